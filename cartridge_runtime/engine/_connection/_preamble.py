"""Text a cartridge printed on stdout before its first frame, taken as its log.

Rules
-----
1. Before the first frame, a line whose first byte is text (printable ASCII, tab, CR, LF, or
   a UTF-8 lead byte) is the cartridge's log, not frames.
2. The first line start holding any other byte begins the frames: from there on every byte,
   that one included, goes to the decoder untouched, and this filter only passes blocks on.
3. At most :data:`MAX_PREAMBLE_BYTES` of text are taken; past that the rest goes to the
   decoder, whose error then names the stray text.

Why it is safe: a frame starts with its 4-byte big-endian length, and the first byte of the
length of any frame under 16 MiB is ``0x00``, which is never text. A library that greets on
import (a ``print()`` before ``run()``) therefore costs a warning instead of the cartridge.
"""

from __future__ import annotations

from collections.abc import Callable

from ..._plumbing import Block

__all__ = ("MAX_PREAMBLE_BYTES", "StdoutPreamble")

#: Most bytes of text taken before the first frame: a greeting fits; a program that is not a
#: cartridge and keeps printing is told apart by the decoder soon after.
MAX_PREAMBLE_BYTES = 64 * 1024

#: First bytes of a line of text: tab, LF, CR, printable ASCII, UTF-8 lead bytes.
_TEXT_START = frozenset((9, 10, 13, *range(0x20, 0x7F), *range(0xC2, 0xF5)))


class StdoutPreamble:
    """Sits between a cartridge's stdout blocks and the frame pump (see the module docstring).

    :param feed: where frames' bytes go (the pump's ``on_block``, whose answer, ``False``
        when its room ran out, is passed back); gets ``b""`` at end of file.
    :param on_line: called with each line of text taken (its bytes, ending in ``\\n`` but for
        a last line cut by end of file or by the limit).
    """

    def __init__(self, feed: Callable[[Block], bool], on_line: Callable[[bytes], None]) -> None:
        self._feed = feed
        self._on_line = on_line
        self._pending = b""
        self._taken = 0
        #: True once frames began (or the limit was reached): blocks are passed on as they are.
        self.through = False

    @property
    def only_text(self) -> bool:
        """Whether text was taken and no frame has begun yet."""
        return not self.through and (self._taken > 0 or bool(self._pending))

    def feed(self, data: Block) -> bool:
        """Take one block of stdout (``b""``: end of file); a view is not kept past the call.

        :returns: the downstream's answer for a block it was given, else ``True``.
        :raises Exception: whatever the downstream ``feed`` raised.
        """
        if self.through:
            return self._feed(data)
        if not data:
            if self._pending:
                self._on_line(self._pending)
                self._pending = b""
            return self._feed(data)  # the end, before any frame: only_text still tells
        if not self._pending and data[0] not in _TEXT_START:
            return self._pass_on(data)  # the usual first block: a frame, fed as it came
        buf = self._pending + bytes(data)
        self._pending = b""
        pos = 0
        end = len(buf)
        while pos < end:
            if buf[pos] not in _TEXT_START:
                return self._pass_on(buf[pos:])
            newline = buf.find(b"\n", pos)
            stop = end if newline < 0 else newline + 1
            if self._taken + (stop - pos) > MAX_PREAMBLE_BYTES:
                return self._pass_on(buf[pos:])
            if newline < 0:
                self._pending = buf[pos:]
                return True
            self._taken += stop - pos
            self._on_line(buf[pos:stop])
            pos = stop
        return True

    def _pass_on(self, data: Block) -> bool:
        self.through = True
        return self._feed(data)
