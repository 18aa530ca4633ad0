"""Binary data is not written to a terminal.

Bytes that are not text would garble the terminal (escape sequences, a bell, a changed
character set): as ``curl`` does, a command refuses them there and says how to keep them
(``-o FILE``, or a pipe). Text is judged by the first bytes written: valid UTF-8 (a character
cut at the end of the piece allowed) with no control character other than tab, newline,
carriage return, form feed and escape.
"""

from __future__ import annotations

import codecs
from typing import Final

__all__ = ("looks_binary", "BINARY_ON_TERMINAL", "SNIFF")

#: Bytes of the first piece that are judged.
SNIFF: Final = 8192
_CONTROLS: Final = frozenset(range(32)) - {9, 10, 12, 13, 27}

#: The refusal, with the way out.
BINARY_ON_TERMINAL: Final = (
    "the output is binary and standard output is a terminal: write it to a file with "
    "-o FILE, or pipe it"
)


def looks_binary(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` (the start of an output) is not text."""
    head = bytes(data[:SNIFF])
    if any(byte in _CONTROLS for byte in head):
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return True
    return False
