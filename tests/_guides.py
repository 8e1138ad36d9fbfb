"""A guide executed by a test (docs/adding-a-strategy.md, docs/adding-a-task.md): the page's
fenced blocks that name a file (```lang file=PATH) written out as a user would."""

from __future__ import annotations

import re
from pathlib import Path


def page_files(page: Path) -> dict[str, str]:
    """The fenced blocks of ``page`` that name a file (```lang file=PATH), by path."""
    blocks = re.findall(r"```\w* file=(\S+)\n(.*?)```", page.read_text(), flags=re.S)
    return {path: body for path, body in blocks}


def install(page: Path, tmp: Path) -> Path:
    """Write each of ``page``'s files under ``tmp``; returns ``tmp``."""
    for path, body in page_files(page).items():
        (tmp / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp / path).write_text(body)
    return tmp
