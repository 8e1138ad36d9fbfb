"""``key=value`` command-line arguments, torch-free: what ``python -m gnnscale.embed`` and
``python -m gnnscale.predict`` take."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gnnscale.errors import UserError


def parse_key_values(argv: list[str], keys: Mapping[str, Callable[[str], Any]],
                     required: tuple[str, ...] = ("run_dir",)) -> dict[str, Any]:
    """``key=value`` arguments into keyword arguments, each converted by ``keys[key]``; an
    unknown key, a bad value or a missing ``required`` key is a :class:`UserError` of one
    line."""
    kwargs = {}
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq or key not in keys:
            raise UserError(f"unknown argument {arg!r} (arguments: {', '.join(keys)}; "
                            "--help for the usage)")
        try:
            kwargs[key] = keys[key](value)
        except ValueError:
            raise UserError(f"{key}={value!r} is not a valid value (--help for the usage)"
                            ) from None
    for key in required:
        if key not in kwargs:
            raise UserError(f"{key}= is required (--help for the usage)")
    return kwargs
