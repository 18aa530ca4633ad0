"""The rich console the commands print tables and trees with.

On a terminal it takes the terminal's width; off one (a pipe, a file) it never wraps short, so
a cap URN or a media URN stays whole on its line for ``grep`` and copy-paste.
"""

from __future__ import annotations

import sys
from typing import Any, Final

__all__ = ("console", "UNWRAPPED_WIDTH")

#: The width used off a terminal: wider than any line the commands print.
UNWRAPPED_WIDTH: Final = 10_000


def console(*, stderr: bool = False) -> Any:
    """A :class:`rich.console.Console` on stdout (or stderr) that wraps only on a terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return Console(stderr=stderr, width=None if tty else UNWRAPPED_WIDTH, highlight=False)
