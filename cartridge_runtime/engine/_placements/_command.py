"""A cartridge process in words: the command that starts it, how it ended, and the stray
bytes it wrote on stdout instead of frames."""

from __future__ import annotations

import os
import signal
import struct
from collections.abc import Sequence

from .._errors import CartridgeNotFound


def describe_returncode(code: int | None) -> str:
    """``exit status 3``, ``killed by signal 9 (SIGKILL)`` or ``still running``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-code} ({name})"
    return f"exit status {code}"


def command_for(target: str | os.PathLike[str] | Sequence[str]) -> list[str]:
    """The argv that starts ``target``: a ``.py`` script runs with this interpreter, a
    command list is used as is, anything else is executed directly. No arguments are added
    (no arguments means CBOR mode).

    :raises CartridgeNotFound: the script, or the program of a command, does not exist.
    :raises ValueError: an empty command list.
    """
    import shutil
    import sys

    if isinstance(target, str | os.PathLike):
        path = os.fspath(target)
        if path.endswith(".py"):
            if not os.path.isfile(path):
                raise CartridgeNotFound(path)
            return [sys.executable, path]
        argv = [path]
    else:
        argv = [os.fspath(part) for part in target]
        if not argv:
            raise ValueError("a cartridge command needs at least a program")
    program = argv[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        if not os.path.isfile(program):
            raise CartridgeNotFound(program)
    elif shutil.which(program) is None and not os.path.isfile(program):
        raise CartridgeNotFound(program)
    return argv


#: Bytes of a cartridge's stray stdout output quoted in the error about it.
_QUOTE_BYTES = 60


def describe_stray_bytes(block: bytes | memoryview, max_frame: int) -> str | None:
    """Words for a block of stdout that holds bytes that are not a frame, when those bytes
    look like text (a ``print()`` to stdout, or a program that is not a cartridge): says so
    and quotes their first printable characters. ``None`` when they do not look like text
    (the decoder's own error is then the better description).

    The block is walked from its start as a sequence of length-prefixed frames (the engine's
    reads end on frame boundaries); the first prefix over ``max_frame`` marks the bad bytes.
    """
    data = bytes(block)
    pos = 0
    while pos + 4 <= len(data):
        (n,) = struct.unpack_from(">I", data, pos)
        if n > max_frame:
            break
        pos += 4 + n
    else:
        pos = 0
    head = data[pos : pos + _QUOTE_BYTES]
    if len(head) < 4 or not all(32 <= b < 127 or b in (9, 10, 13) for b in head[:4]):
        return None
    text = head.decode("utf-8", "replace")
    shown = "".join(c if c.isprintable() or c == " " else " " for c in text).strip()
    more = "..." if len(data) - pos > _QUOTE_BYTES else ""
    return (
        f"wrote text to stdout instead of Bifaci frames, starting with {shown!r}{more} "
        "(a print() to stdout before run(), or a program that is not a cartridge?)"
    )
