"""Incremental, length-prefixed frame decoder (FRM-2, FRM-9).

Theory of operation: bytes go in with :meth:`FrameDecoder.feed`; complete frames come out of
:meth:`FrameDecoder.next_frame` one at a time, parsed only when asked for. The length prefix
is checked against the negotiated ``max_frame`` and the 16 MiB hard cap as soon as its four
bytes are known, before any body byte is kept, so a hostile prefix costs nothing.
:attr:`FrameDecoder.bytes_wanted` tells an IO shell how much to read next, so that it never
buffers more than the frame being completed.

After an error the decoder is poisoned: the byte stream can no longer be trusted, and every
later call raises the same error.
"""

from __future__ import annotations

import struct

from . import _codec
from ._codec import decode_body, decode_range
from ._constants import DEFAULT_MAX_FRAME, HARD_FRAME_CAP, PREFIX_LEN
from ._errors import FrameDecodeError, FrameTooLargeError, ProtocolError
from ._frame import Frame

_unpack_len = struct.Struct(">I").unpack_from


class FrameDecoder:
    """Turn a byte stream into :class:`Frame` values.

    :param max_frame: the largest body accepted; before the handshake use the default.
    """

    __slots__ = ("_buf", "_closed", "_error", "_max_frame", "_need", "_off", "_scan")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        # Pending bytes are ``_buf[_off:]``. ``_buf`` is a bytearray, or, when a ``bytes`` object
        # (or, by feed_borrowed, a view) was fed while nothing was pending, that very object
        # (decoded in place, no copy; a large frame fed whole is then copied only once, into its
        # payload). A borrowed view is replaced by a copy of its tail when next_frame runs dry.
        self._buf: bytearray | bytes | memoryview = bytearray()
        self._off = 0
        self._max_frame = min(max_frame, HARD_FRAME_CAP)
        self._error: ProtocolError | None = None
        self._closed = False
        self._need = PREFIX_LEN
        #: Offset in ``_buf`` of the first length prefix not yet checked against max_frame.
        self._scan = 0

    @property
    def max_frame(self) -> int:
        return self._max_frame

    @max_frame.setter
    def max_frame(self, value: int) -> None:
        """Apply a negotiated max_frame (bounded by the hard cap)."""
        self._max_frame = min(int(value), HARD_FRAME_CAP)

    @property
    def buffered(self) -> int:
        """Bytes held that have not been returned as frames yet."""
        return len(self._buf) - self._off

    @property
    def bytes_wanted(self) -> int:
        """How many more bytes complete the frame in progress (at least 1 while open).

        :raises ProtocolError: the decoder already failed (e.g. an oversize prefix), so an IO
            shell never sizes a read from a hostile prefix.
        """
        if self._error is not None:
            raise self._error
        buf, off = self._buf, self._off
        have = len(buf) - off
        if have < PREFIX_LEN:
            return PREFIX_LEN - have
        n: int = _unpack_len(buf, off)[0]
        return max(1, PREFIX_LEN + n - have)

    @property
    def at_frame_boundary(self) -> bool:
        """True when no partial frame is buffered (EOF here is a clean end)."""
        return len(self._buf) == self._off

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes. ``b""`` means end of stream.

        :raises ProtocolError: the decoder already failed, or the stream ended mid-frame
            (raised by :meth:`next_frame`).
        """
        self._feed(data, type(data) is bytes)

    def feed_borrowed(self, data: memoryview) -> None:
        """Like :meth:`feed`, for a buffer the caller will fill again (a reusable read buffer).

        When nothing is pending the frames are parsed where they lie, without copying the
        block; the decoder lets go of ``data`` as soon as :meth:`next_frame` returns ``None``
        (it keeps a copy of an incomplete tail). So the caller must take every complete frame
        before it reuses the buffer.
        """
        self._feed(data, True)

    def _feed(self, data: bytes | bytearray | memoryview, in_place: bool) -> None:
        if self._error is not None:
            raise self._error
        if not data:
            self._closed = True
            return
        if self._closed:
            raise FrameDecodeError("data fed after end of stream")
        buf = self._buf
        if in_place and self._off == len(buf):
            # Nothing pending: parse the caller's block where it is (bytes are immutable; a
            # borrowed view is released by next_frame before the caller may reuse it).
            self._buf = buf = data if type(data) is bytes else memoryview(data).cast("B")
            self._off = self._scan = 0
        else:
            if type(buf) is not bytearray:
                # Switch to a mutable buffer holding only the pending tail.
                self._scan -= self._off
                self._buf = buf = bytearray(memoryview(buf)[self._off :])
                self._off = 0
            assert type(buf) is bytearray
            buf += data
        # Check each length prefix as soon as its four bytes are known, and drop an oversize
        # frame's body at once, so a hostile prefix never makes us hold its body (FRM-9).
        scan = self._scan
        limit = self._max_frame
        c_scan = _codec._c_scan_prefixes
        if c_scan is not None:
            scan = c_scan(buf, scan, limit)
            if scan >= 0:
                self._scan = scan
                return
            scan = -1 - scan  # a prefix over the limit: the loop below names it
        while scan + PREFIX_LEN <= len(buf):
            (n,) = _unpack_len(buf, scan)
            if n > limit:
                self._buf = bytearray(memoryview(buf)[self._off : scan + PREFIX_LEN])
                self._off = 0
                self._fail(FrameTooLargeError(f"frame length {n} exceeds max_frame {limit}"))
            scan += PREFIX_LEN + n
        self._scan = scan

    def next_frame(self) -> Frame | None:
        """The next complete frame, or ``None`` when more bytes are needed (or at clean EOF).

        :raises FrameTooLargeError: a length prefix exceeds the limit.
        :raises FrameDecodeError: a body is malformed, or EOF fell inside a frame.
        """
        if self._error is not None:
            raise self._error
        buf, off = self._buf, self._off
        take = _codec._c_take_frame  # looked up each time: the codec may switch it off
        if take is not None and type(buf) is not bytearray:
            # The compiled path for a frame parsed in place: prefix, limit and body in one
            # call. It answers None for anything but a complete, valid, ordinary frame, and
            # the code below then decides (and names the error).
            try:
                got = take(buf, off, self._max_frame)
            except ProtocolError as exc:
                self._fail(exc)
            if got is not None:
                taken: Frame = got[0]
                end: int = got[1]
                if end == len(buf):  # all consumed: let the caller's object go
                    self._buf = bytearray()
                    self._off = self._scan = 0
                else:
                    self._off = end
                return taken
        have = len(buf) - off
        if have < PREFIX_LEN:
            if self._closed and have:
                self._fail(
                    FrameDecodeError(f"stream ended inside a length prefix ({have} of 4 bytes)")
                )
            if type(buf) is memoryview:
                self._let_go()
            return None
        (n,) = _unpack_len(buf, off)
        if n > self._max_frame:
            self._fail(FrameTooLargeError(f"frame length {n} exceeds max_frame {self._max_frame}"))
        end = off + PREFIX_LEN + n
        if len(buf) < end:
            if self._closed:
                self._fail(
                    FrameDecodeError(
                        f"stream ended inside a frame ({have - PREFIX_LEN} of {n} body bytes)"
                    )
                )
            if type(buf) is memoryview:
                self._let_go()
            return None
        try:
            if type(buf) is not bytearray:  # bytes or a borrowed view: decoded in place
                frame = decode_range(buf, off + PREFIX_LEN, end)
            else:
                with memoryview(buf) as mv:
                    frame = decode_body(mv[PREFIX_LEN:end])
        except ProtocolError as exc:
            self._fail(exc)
        if isinstance(buf, bytearray):  # a bytearray buffer always starts at offset 0
            del buf[:end]
            self._scan -= end
        elif end == len(buf):  # in-place bytes all consumed: let the caller's object go
            self._buf = bytearray()
            self._off = self._scan = 0
        else:
            self._off = end
        return frame

    def take_frames(self) -> list[Frame]:
        """The complete frames now available, in order, as a list (empty when more bytes
        are needed): what repeated :meth:`next_frame` calls give, up to the first frame that
        needs a decision of the Python path, which the next call takes or refuses.

        With the compiled codec a block of small frames is taken in one call (the pump takes
        its frames so, and keeps those it may not dispatch yet).

        :raises ProtocolError: as :meth:`next_frame` (only when no frame came before the bad
            one: those are returned first).
        """
        buf = self._buf
        if type(buf) is bytearray:
            if not buf and self._error is None:
                return []  # nothing pending (a bytearray buffer starts at offset 0)
            take = None
        else:
            take = _codec._c_take_frames  # looked up each time: the codec may switch it off
        if take is not None and self._error is None:
            try:
                got, end = take(buf, self._off, self._max_frame)
            except ProtocolError as exc:
                self._fail(exc)
            if got:
                if end == len(buf):  # all consumed: let the caller's object go
                    self._buf = bytearray()
                    self._off = self._scan = 0
                else:
                    self._off = end
                taken: list[Frame] = got
                return taken
        frame = self.next_frame()
        return [] if frame is None else [frame]

    def take_block(self, data: memoryview) -> tuple[list[Frame], int] | None:
        """The frames at the front of a reader's block, taken whole in one step when nothing
        is pending, parsed where they lie and kept by nothing here, and the offset after
        them (``len(data)``: all of it); feed the rest, if any, as usual. ``None``, with
        nothing taken, when this does not apply (the codec not compiled, bytes pending, a
        failed or ended decoder, an empty block, or a first frame the Python path must
        decide): then feed the whole block."""
        take = _codec._c_take_frames  # looked up each time: the codec may switch it off
        if take is None or self._off != len(self._buf) or self._error is not None or not data:
            return None
        if self._closed:
            return None
        try:
            got: tuple[list[Frame], int] = take(data, 0, self._max_frame)
        except ProtocolError:
            return None  # the Python path names the error
        return got if got[0] else None

    def release_borrowed(self) -> None:
        """Stop referring to the buffer given to :meth:`feed_borrowed`, keeping a copy of
        whatever of it is still pending (frames not taken yet, an incomplete tail), so that
        the caller may refill the buffer before taking every frame. A no-op otherwise."""
        if type(self._buf) is memoryview:
            self._let_go()

    def _let_go(self) -> None:
        """Stop referring to a borrowed buffer: keep a copy of its incomplete tail only."""
        buf, off = self._buf, self._off
        self._scan -= off
        self._buf = bytearray(buf[off:])
        self._off = 0

    def frames(self) -> list[Frame]:
        """All complete frames now available."""
        out = []
        while (f := self.next_frame()) is not None:
            out.append(f)
        return out

    def _fail(self, exc: ProtocolError) -> None:
        self._error = exc
        raise exc
