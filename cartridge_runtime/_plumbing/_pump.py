"""One reader pump for both ends: blocks in, frames decoded, each dispatched through one callback.

Theory of operation
-------------------
A :class:`FramePump` owns the reading half of a connection around the sans-IO
:class:`~cartridge_runtime.protocol.FrameDecoder`. Its source (a pipe: :class:`~._fd.FdReader`,
:class:`~._fd.FdReceiveStream`; or any anyio byte stream: :class:`StreamSource`) hands it every
block it reads (:meth:`FramePump.on_block`), and the pump feeds the decoder and dispatches each
complete frame, synchronously, through the one callback it was given.

Each read asks for a large block at a frame boundary, else for just the rest of the frame in
progress (:meth:`FramePump.read_size`), so that reads end on frame boundaries, where the decoder
parses a block in place: a block that is a view of the source's reusable buffer is fed
*borrowed* (no copy), and the decoder lets go of it before the buffer is read into again.

Two optional partners shape the dispatch:

- ``room`` (the outbound queue of a bounded outbox): frames are dispatched only while it has
  room; otherwise the pump stops dispatching, keeps the rest (in the decoder, or already
  decoded in its backlog: the decoder hands over a block's frames in one batch), asks the
  source to stop reading, and resumes once :meth:`Room.wait_room` returns. Dispatch never
  waits; reading does.
- ``hold`` (an outbox): the frames that dispatching a block queues (replies, credit, forwarded
  frames) are held and leave together in one write after the block.

End of file is a clean end at a frame boundary; inside a frame, or for bytes that are not
frames, the decoder's :class:`~cartridge_runtime.protocol.ProtocolError` propagates out of
:meth:`FramePump.run` (``on_error`` sees the offending block first, to describe it). The
frames a block completes before a bad length prefix in it (which the decoder refuses as soon
as it is fed) are still dispatched first, in order: a peer that wrote a request and then
garbage in one write gets its request answered or failed, not silence (FRM-21).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

import anyio
import anyio.abc

from cartridge_runtime.protocol import PREFIX_LEN, Frame, FrameDecoder, ProtocolError, decode_frame

from ._backend import Block

#: Read size at a frame boundary (and the size of the reusable read buffer).
READ_SIZE = 1 << 20


class Room(Protocol):
    """Room in the outbound queue (a bounded :class:`~._outbox.FrameOutbox`)."""

    @property
    def has_room(self) -> bool: ...

    async def wait_room(self) -> None: ...


class Hold(Protocol):
    """Batches the frames queued while held (a :class:`~._outbox.FrameOutbox`)."""

    def hold(self) -> None: ...

    def release(self) -> None: ...


@runtime_checkable
class BlockSource(Protocol):
    """Where a pump's blocks come from."""

    async def stream_blocks(
        self,
        buffer: memoryview,
        next_size: Callable[[], int],
        on_block: Callable[[Block], bool],
        until_drained: Callable[[], Awaitable[None]],
    ) -> None:
        """Hand every block read to ``on_block`` (a view of ``buffer``, or bytes), each read
        asking for ``next_size()`` bytes, then ``b""`` at the end; return after that. When
        ``on_block`` returns ``False``, read nothing more until ``await until_drained()``
        returned.

        :raises Exception: whatever ``on_block`` or ``until_drained`` raised.
        """
        ...


class StreamSource:
    """Any anyio byte stream as a :class:`BlockSource`: a task loop over ``receive``; the
    stream's end, or its failure, is the end of the input."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self.stream = stream

    async def stream_blocks(
        self,
        buffer: memoryview,
        next_size: Callable[[], int],
        on_block: Callable[[Block], bool],
        until_drained: Callable[[], Awaitable[None]],
    ) -> None:
        receive = self.stream.receive
        while True:
            try:
                data = await receive(next_size())
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                data = b""
            if not on_block(data):
                await until_drained()
            if not data:
                return


def source_for(stream: anyio.abc.ByteReceiveStream) -> BlockSource:
    """The fastest :class:`BlockSource` for ``stream``: the stream itself when it pumps
    (:class:`~._fd.FdReceiveStream`), else a :class:`StreamSource`."""
    if isinstance(stream, BlockSource):
        return stream
    return StreamSource(stream)


class FramePump:
    """Decodes a connection's input and dispatches its frames (see the module docstring).

    :param decoder: the connection's decoder (its owner sets its ``max_frame``).
    :param dispatch: called with every frame, in order; must not wait.
    :param room: dispatch only while it has room (``None``: always).
    :param hold: held while a block is dispatched (``None``: nothing held).
    :param read_size: the read size at a frame boundary, and the read buffer's size.
    :param on_error: sees the block the decoder failed on, and the error, before it
        propagates.
    """

    def __init__(
        self,
        decoder: FrameDecoder,
        dispatch: Callable[[Frame], None],
        *,
        room: Room | None = None,
        hold: Hold | None = None,
        read_size: int = READ_SIZE,
        on_error: Callable[[Block, ProtocolError], None] | None = None,
    ) -> None:
        self.decoder = decoder
        self._dispatch = dispatch
        self._room = room
        self._hold = hold
        self._size = read_size
        self._on_error = on_error
        self._buffer: memoryview | None = None
        #: Frames the decoder gave in one batch that wait for room to be dispatched.
        self._backlog: collections.deque[Frame] = collections.deque()
        #: Frames a failed block completed before its bad prefix, not yet handed out, and
        #: the error to raise after them (see :meth:`next_frame`).
        self._salvaged: list[Frame] = []
        self._failure: ProtocolError | None = None

    def dispatch_by(self, dispatch: Callable[[Frame], None]) -> None:
        """Hand every frame from now on to ``dispatch`` (a connection that serves differently
        once its handshake is done)."""
        self._dispatch = dispatch

    def read_size(self) -> int:
        """The size of the next read: a large block at a frame boundary, else just the rest
        of the frame in progress, so that the next read starts on a boundary."""
        decoder = self.decoder
        if decoder.at_frame_boundary:
            return self._size
        try:
            return min(decoder.bytes_wanted, self._size)
        except ProtocolError:  # the decoder failed: the next feed raises it
            return self._size

    def on_block(self, data: Block) -> bool:
        """Take a block of input (``b""``: end of file) and dispatch the frames it completes.

        A view is taken to be of the source's reusable buffer: the decoder parses it in place
        and keeps none of it once this returns.

        :returns: ``False`` when the outbound queue filled up first: the remaining frames wait
            in the decoder until :meth:`until_drained`, and no more should be read meanwhile.
        :raises ProtocolError: the input is not valid frames (also EOF inside a frame).
        """
        hold = self._hold
        if hold is not None:
            hold.hold()
        decoder = self.decoder
        boundary = decoder.at_frame_boundary
        try:
            if type(data) is memoryview:
                room = self._room
                got = (
                    decoder.take_block(data)
                    if boundary and (room is None or room.has_room)
                    else None
                )
                if got is not None:
                    # The block's whole frames at its front in one step; the rest fed below.
                    taken, end = got
                    dispatch = self._dispatch
                    if room is None:
                        for frame in taken:
                            dispatch(frame)
                    else:
                        for i, frame in enumerate(taken):
                            if i and not room.has_room:  # the rest waits for room
                                self._backlog.extend(taken[i:])
                                break
                            dispatch(frame)
                    if end == len(data):
                        return not self._backlog
                    data = data[end:]
                try:
                    decoder.feed_borrowed(data)
                except ProtocolError:
                    self._dispatch_salvaged(data, boundary)
                    raise
                if self.drain():
                    return True  # every frame taken: the decoder let go of the buffer
                decoder.release_borrowed()
                return False
            try:
                decoder.feed(data)
            except ProtocolError:
                self._dispatch_salvaged(data, boundary)
                raise
            return self.drain()
        except ProtocolError as exc:
            if self._on_error is not None:
                self._on_error(data, exc)
            raise
        finally:
            if hold is not None:
                hold.release()

    def _dispatch_salvaged(self, data: Block, boundary: bool) -> None:
        """After the decoder refused ``data`` as it was fed: dispatch the frames it
        completed before the bad prefix (the connection is ending: room is not waited for)."""
        for frame in frames_before_error(data, self.decoder.max_frame) if boundary else ():
            self._dispatch(frame)

    def feed(self, data: Block) -> None:
        """:meth:`on_block` for a source that cannot pause (with no ``room``, it never asks
        to)."""
        self.on_block(data)

    def drain(self) -> bool:
        """Dispatch the frames the decoder holds while there is room; ``False`` when the room
        ran out first."""
        dispatch = self._dispatch
        room = self._room
        backlog = self._backlog
        if backlog:  # frames taken before the room ran out
            while room is None or room.has_room:
                dispatch(backlog.popleft())
                if not backlog:
                    break
            else:
                return False
        take = self.decoder.take_frames
        if room is None:
            while batch := take():
                for frame in batch:
                    dispatch(frame)
            return True
        while room.has_room:
            batch = take()
            if not batch:
                return True
            if len(batch) == 1:
                dispatch(batch[0])
                continue
            for i, frame in enumerate(batch):
                if i and not room.has_room:
                    backlog.extend(batch[i:])
                    return False
                dispatch(frame)
        return False

    async def until_drained(self) -> None:
        """Wait for room and dispatch what the decoder holds, until it is all dispatched."""
        room = self._room
        while True:
            if room is not None:
                await room.wait_room()
            if self.drain():
                return

    async def next_frame(self, source: anyio.abc.ByteReceiveStream) -> Frame | None:
        """Read from ``source`` until one frame is complete and return it without
        dispatching it (a handshake reads its first frame so); ``None`` at a clean EOF.

        :raises ProtocolError: the input is not a valid frame (also EOF inside one).
        """
        decoder = self.decoder
        while True:
            frame = decoder.next_frame()
            if frame is not None:
                return frame
            try:
                data = await source.receive(self.read_size())
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                data = b""
            boundary = decoder.at_frame_boundary
            try:
                decoder.feed(data)
            except ProtocolError as exc:
                # Frames before the bad prefix are handed out first, then the error (by
                # :meth:`run`, which raises it once they are dispatched).
                salvaged = frames_before_error(data, decoder.max_frame) if boundary else []
                if not salvaged:
                    raise
                self._salvaged, self._failure = salvaged[1:], exc
                return salvaged[0]
            if not data:
                return decoder.next_frame()  # raises when EOF fell inside a frame

    async def run(
        self, source: BlockSource, *, through: Callable[[Block], bool] | None = None
    ) -> None:
        """Dispatch what the decoder already holds, then read ``source`` and dispatch every
        frame until a clean end of file.

        :param through: where each block goes instead of :meth:`on_block` (a filter that
            hands on to it, and passes back its answer).

        :raises ProtocolError: the input is not valid frames (also EOF inside a frame).
        :raises Exception: whatever ``dispatch`` raised (reading stops there).
        """
        failure = self._failure
        if failure is not None:  # a block refused while reading the first frame
            salvaged, self._salvaged, self._failure = self._salvaged, [], None
            for frame in salvaged:
                self._dispatch(frame)
            raise failure
        if not self.drain():
            await self.until_drained()
        buffer = self._buffer
        if buffer is None:
            buffer = self._buffer = memoryview(bytearray(self._size))
        on_block = self.on_block if through is None else through
        await source.stream_blocks(buffer, self.read_size, on_block, self.until_drained)


def frames_before_error(block: Block, max_frame: int) -> list[Frame]:
    """The valid frames ``block`` (taken to start on a frame boundary) holds, complete, before
    the first length prefix over ``max_frame`` or the first frame that does not decode."""
    out: list[Frame] = []
    pos = 0
    end = len(block)
    while pos + PREFIX_LEN <= end:
        n = int.from_bytes(block[pos : pos + PREFIX_LEN], "big")
        stop = pos + PREFIX_LEN + n
        if n > max_frame or stop > end:
            break
        try:
            out.append(decode_frame(bytes(block[pos:stop]), max_frame))
        except ProtocolError:
            break
        pos = stop
    return out
