"""Errors that carry a message meant for the user: what is wrong, the key to change.

The launcher prints a :class:`UserError` as one short message without a traceback and exits
with status 2; any other exception keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user fixes by changing a setting or a file, not the code."""


class ConfigError(UserError, ValueError):
    """A config value that cannot work; the message says which key to change and how."""
