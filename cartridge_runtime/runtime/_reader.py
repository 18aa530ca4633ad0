"""The read side of a CBOR-mode session: reads, the decoder, and the pause that keeps the
writer's queue bounded.

:class:`SessionReader` is the part of a session that reads (see the session's module docstring
for the whole picture); it hands each frame to the session's dispatch.
Dispatch is synchronous and never waits; so reading is where the session
waits: for input, and for room in the writer's queue when dispatch filled it. On asyncio, with
the stdin stream of :mod:`._stdin`, blocks are read and dispatched inside the event loop's
reader callback (``pump``); on any other backend or byte stream, a task runs the same steps.

Each read asks for a large block at a frame boundary, else for just the rest of the frame in
progress, so that reads end on frame boundaries, where the decoder parses the bytes in place.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.abc

from cartridge_runtime.protocol import Frame, FrameDecoder, ProtocolError

from ._writer import FrameWriter

#: Read size at a frame boundary.
READ_SIZE = 1 << 20


class SessionReader:
    """The read side of a session (see the module docstring).

    :param receive: the byte stream from the host.
    :param writer: the session's writer, whose room paces dispatch.
    :param dispatch: takes each frame, synchronously.
    """

    def __init__(
        self,
        receive: anyio.abc.ByteReceiveStream,
        writer: FrameWriter,
        dispatch: Callable[[Frame], None],
    ) -> None:
        self.receive_stream = receive
        self.writer = writer
        self.dispatch = dispatch
        self.decoder = FrameDecoder()

    async def next_frame(self) -> Frame | None:
        """The next frame, or ``None`` at a clean EOF. Decoder errors propagate."""
        decoder = self.decoder
        while True:
            frame = decoder.next_frame()
            if frame is not None:
                return frame
            try:
                data = await self.receive_stream.receive(self._read_size())
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                decoder.feed(b"")
                frame = decoder.next_frame()  # raises when EOF fell inside a frame
                if frame is None:
                    return None
                return frame
            decoder.feed(data)

    async def read_loop(self) -> None:
        """Read and dispatch until EOF.

        :raises ProtocolError: the input is not valid frames.
        :raises Exception: whatever dispatch raises to end the session.
        """
        if not self._drain():  # frames that came with the handshake's read
            await self._until_drained()
        pump = getattr(self.receive_stream, "pump", None)
        if pump is not None and await pump(self._on_block, self._read_size, self._until_drained):
            return
        receive = self.receive_stream.receive
        while True:
            try:
                data = await receive(self._read_size())
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                data = b""
            if not self._on_block(data):
                await self._until_drained()
            if not data:
                return

    def _read_size(self) -> int:
        """The size of the next read: a large block at a frame boundary, else just the rest of
        the frame in progress, so that the next read starts on a boundary, where the decoder
        parses the bytes in place (no copy into its buffer)."""
        decoder = self.decoder
        if decoder.at_frame_boundary:
            return READ_SIZE
        try:
            return min(decoder.bytes_wanted, READ_SIZE)
        except ProtocolError:  # the decoder failed: the next feed raises it
            return READ_SIZE

    def _on_block(self, data: bytes | memoryview) -> bool:
        """Take a block of input (``b""``: end of file) and dispatch the frames it completes.

        A view is of the reader's reusable buffer: the decoder parses it in place and keeps
        none of it once this returns.

        :returns: ``False`` when the writer's queue filled up first: the remaining frames wait
            in the decoder until :meth:`_until_drained`, and no more is read meanwhile.
        :raises ProtocolError: the input is not valid frames (also EOF inside a frame).
        """
        decoder = self.decoder
        if type(data) is memoryview:
            decoder.feed_borrowed(data)
            if self._drain():
                return True  # every frame taken: the decoder let go of the buffer
            decoder.release_borrowed()
            return False
        decoder.feed(data)
        return self._drain()

    def _drain(self) -> bool:
        """Dispatch the frames the decoder holds while the writer has room (see
        :meth:`_on_block`)."""
        next_frame = self.decoder.next_frame
        dispatch = self.dispatch
        writer = self.writer
        while writer.has_room:
            frame = next_frame()
            if frame is None:
                return True
            dispatch(frame)
        return False

    async def _until_drained(self) -> None:
        """Wait for room in the writer's queue and dispatch what the decoder holds, until it
        is all dispatched."""
        while True:
            await self.writer.wait_room()
            if self._drain():
                return
