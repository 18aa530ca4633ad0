"""One outbound frame queue and its writer, for the engine and the cartridge alike.

1. Bytes leave in the order their frames were queued; nothing overtakes a frame the writer
   holds.
2. A frame goes out with the seq its connection core gives it (``number``); the outbox applies
   no protocol rule of its own: a frame the core refuses (a straggler) is not written.
3. Only one writer writes at a time: a write in place, or the task while it holds bytes.

Theory of operation. Every frame a connection sends goes through one :class:`FrameOutbox`. It
asks the core's numbering for the frame's seq, encodes it, and hands whatever is queued to the
byte sink in one gathering write: a small frame is one buffer, prefix included, and a large
payload is a buffer of its own, never copied into a joined frame.

Two knobs tell the shells apart:

- ``encode_at``: :attr:`EncodeAt.QUEUE` numbers and encodes a frame when it is queued, so the
  queue holds bytes in wire order, an unencodable frame raises to its sender, and queued frames
  can be taken back (:meth:`FrameOutbox.mark`, :meth:`FrameOutbox.withdraw`): the engine.
  :attr:`EncodeAt.FLUSH` queues the frame objects and numbers and encodes them in one go when
  the batch is written; an unencodable frame is dropped, counted and reported: the cartridge.
- ``bound``: with a bound, at most that many frames wait for the writer before
  :meth:`FrameOutbox.send` waits (:attr:`FrameOutbox.has_room`, :meth:`FrameOutbox.wait_room`);
  :meth:`FrameOutbox.push` goes past it, for a dispatch that must not wait (the reader then
  pauses). A producer that could run for long without waiting yields every ``yield_bytes`` of
  payload so that the writer keeps data flowing. No bound: the engine, whose senders never wait.

Writing is synchronous where it can be: code that queues several frames at once brackets them
with :meth:`FrameOutbox.hold` and :meth:`FrameOutbox.release`, which writes them at once with a
non-blocking ``writev`` (:meth:`FrameOutbox.flush`). A frame queued outside a hold is written
from one event-loop callback on asyncio (a fraction of a task switch), else by the writer task.
The writer task (:meth:`FrameOutbox.run`) otherwise sleeps: it is woken only for what the pipe
did not take (it waits for room), on backends without loop callbacks, for a sink that cannot
write without waiting (:class:`StreamSink`), and to finish after :meth:`FrameOutbox.close`.
While it holds unwritten bytes nothing else writes, so frames never overtake each other.
"""

from __future__ import annotations

import enum
import operator
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import anyio
import anyio.abc
import anyio.lowlevel
import attrs

from cartridge_runtime.protocol import (
    Frame,
    ProtocolError,
    encode_flow,
    encode_frame,
    encode_frame_parts,
)

from ._backend import Block, Cancellable, SoonCaller, event_factory, soon_caller
from ._fd import FdSink

#: Frames whose payload is under this size are encoded as one buffer, prefix included; larger
#: ones as separate buffers around the payload, which is never copied (the codec's threshold).
SMALL_PAYLOAD = 4096
#: Payload bytes queued without waiting before a producer yields to the writer anyway.
YIELD_BYTES = 1 << 20

#: The numbering of an outbox given none: every frame keeps the seq it carries.
_OWN_SEQ: Callable[[Frame], int | None] = operator.attrgetter("seq")

#: ``encode_run(frames, start, out, max_frame) -> index``: numbers and encodes frames from
#: ``start`` onto ``out`` while it can; the index of the first it left (see ``number_by``).
BatchEncoder = Callable[[list[Frame], int, list[Block], int], int]

#: The errors of a byte sink whose reader is gone (or that was closed): the outbox is broken.
_SINK_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class EncodeAt(enum.Enum):
    """When an outbox numbers and encodes a frame (see the module docstring)."""

    #: When it is queued: errors raise to the sender; queued frames can be withdrawn.
    QUEUE = "queue"
    #: When its batch is written: errors drop the frame (counted and reported).
    FLUSH = "flush"


class ByteSink(Protocol):
    """Where an outbox's bytes go: a pipe (:class:`~._fd.FdSink`), memory, or a byte stream
    (:class:`StreamSink`)."""

    @property
    def closed(self) -> bool: ...

    def write_now(self, parts: list[Block]) -> list[Block]:
        """Write what fits without waiting; return the rest (``[]``: all written).

        :raises anyio.BrokenResourceError: the reader is gone.
        """
        ...

    async def send_all(self, parts: Sequence[Block]) -> None:
        """Write every buffer in order, waiting for room.

        :raises anyio.BrokenResourceError: the reader is gone.
        """
        ...


class StreamSink:
    """An anyio byte stream as a :class:`ByteSink`. A batch is one ``send_many`` (gathering)
    call when the stream has one, else one joined ``send``. A stream that can write without
    waiting offers ``write_now`` (as :class:`ByteSink` has it); without one, nothing is written
    in place (:attr:`in_place` is false) and the outbox always writes from its task."""

    closed = False

    def __init__(self, stream: anyio.abc.ByteSendStream) -> None:
        self.stream = stream
        self._send_many: Callable[[Sequence[Block]], Awaitable[None]] | None = getattr(
            stream, "send_many", None
        )
        write_now: Callable[[list[Block]], list[Block]] | None = getattr(stream, "write_now", None)
        #: Whether :meth:`write_now` can write anything.
        self.in_place = write_now is not None
        self._write_now = write_now

    def write_now(self, parts: list[Block]) -> list[Block]:
        write_now = self._write_now
        return parts if write_now is None else write_now(parts)

    async def send_all(self, parts: Sequence[Block]) -> None:
        many = self._send_many
        if len(parts) == 1:
            await self.stream.send(bytes(parts[0]) if type(parts[0]) is memoryview else parts[0])
        elif many is not None:
            await many(parts)  # one gathering write, no joining copy
        else:
            await self.stream.send(b"".join(parts))


def sink_for(stream: anyio.abc.ByteSendStream) -> ByteSink:
    """The fastest :class:`ByteSink` for ``stream``: the fd sink of a
    :class:`~._fd.FdSendStream`, else a :class:`StreamSink`."""
    sink = getattr(stream, "sink", None)
    if isinstance(sink, FdSink):
        return sink
    return StreamSink(stream)


def _writes_in_place(sink: ByteSink | None) -> bool:
    """Whether ``sink`` may write without waiting (else everything goes through the task)."""
    if sink is None:
        return False
    return sink.in_place if isinstance(sink, StreamSink) else True


class DropCounts(Protocol):
    """Where an outbox counts the frames it does not send (stragglers are counted by the
    numbering that refuses them)."""

    #: Frames queued after :meth:`FrameOutbox.close`, or that could not be encoded.
    drops: int


@attrs.define
class OutboxCounts:
    """An outbox's own :class:`DropCounts`, when its owner keeps none."""

    drops: int = 0


def _note(frame: Frame, exc: ProtocolError) -> None:
    print(
        f"cartridge: dropping a {frame.frame_type.name} frame that cannot be encoded: {exc}",
        file=sys.stderr,
        flush=True,
    )


class FrameOutbox:
    """A connection's outbound frames and their writer (see the module docstring).

    :param sink: where the bytes go; may be given later (:meth:`attach`), before any flush.
    :param max_frame: returns the negotiated max_frame when a frame is encoded.
    :param number: the connection core's numbering (``SeqAssigner.number``): a frame's seq,
        or ``None`` for a straggler, which is not written. Default: frames keep their seq.
    :param encode_at: when frames are numbered and encoded.
    :param bound: frames queued before :meth:`send` waits (``None``: no bound).
    :param yield_bytes: payload bytes :meth:`send` queues before it yields anyway.
    :param counts: where drops are counted (default: :attr:`counts`, new).
    :param on_drop: told of each frame dropped because it cannot be encoded (default: a
        ``cartridge: ...`` line on stderr).
    """

    def __init__(
        self,
        sink: ByteSink | None,
        max_frame: Callable[[], int],
        *,
        number: Callable[[Frame], int | None] | None = None,
        encode_at: EncodeAt = EncodeAt.QUEUE,
        bound: int | None = None,
        yield_bytes: int = YIELD_BYTES,
        counts: DropCounts | None = None,
        on_drop: Callable[[Frame, ProtocolError], None] = _note,
    ) -> None:
        self._sink = sink
        self._in_place = _writes_in_place(sink)
        self._max_frame = max_frame
        #: ``push(frame)``: queue one frame now, even past the bound (dropped and counted
        #: once closed). Raises :class:`FrameEncodeError` (EncodeAt.QUEUE) when the frame
        #: does not fit max_frame.
        self.push: Callable[[Frame], None] = (
            self._push_encoded if encode_at is EncodeAt.QUEUE else self._push_frame
        )
        self._bound = sys.maxsize if bound is None else bound
        self._yield_bytes = yield_bytes
        self.counts: DropCounts = OutboxCounts() if counts is None else counts
        self._on_drop = on_drop
        self._number = _OWN_SEQ if number is None else number
        self._batch: BatchEncoder | None = None
        #: Frames waiting to be numbered and encoded (EncodeAt.FLUSH).
        self._frames: list[Frame] = []
        #: Encoded buffers in wire order, not handed to the sink yet.
        self._out: list[Block] = []
        #: Frames queued since the writer last took the queue (what the bound counts).
        self._count = 0
        #: How many times the queue was handed to the sink: a position (batches, index) in
        #: the queue stays valid only while this number is unchanged (see :meth:`withdraw`).
        self.batches = 0
        self._hold = 0
        self._unyielded = 0
        #: Whether someone will take the queue: a flush callback is scheduled, or the task
        #: is awake. Cleared when the queue was written, or when the task goes to sleep.
        self._kicked = False
        self._writing = False  # the task is in a waiting write: nobody else writes
        self._closed = False
        #: The sink failed: later frames are discarded.
        self.broken = False
        self._soon: SoonCaller | None = None  # the loop's call_soon, bound by run()
        self._scheduled: Cancellable | None = None
        self._new_event: Callable[[], anyio.Event] | None = None
        self._wake: anyio.Event | None = None  # the sleeping task waits on it
        self._space: anyio.Event | None = None  # producers wait on it for room
        self._drained: anyio.Event | None = None  # drain() waits on it
        #: Set when the writer task has finished (after :meth:`close`).
        self.done = anyio.Event()

    # -- queueing ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (later frames are dropped and counted)."""
        return self._closed

    @property
    def has_room(self) -> bool:
        """Whether the queue is below its bound (always once closed: frames are then
        dropped)."""
        return self._count < self._bound or self._closed

    @property
    def pending(self) -> bool:
        """Whether frames are queued that were not handed to the sink yet."""
        return bool(self._out or self._frames)

    @property
    def held(self) -> int:
        """How many :meth:`hold` calls wait for their :meth:`release`."""
        return self._hold

    @property
    def queued(self) -> list[Frame]:
        """The frames queued and not encoded yet (EncodeAt.FLUSH; a copy)."""
        return list(self._frames)

    async def wait_room(self) -> None:
        """Return once :attr:`has_room` (at once when it already is)."""
        while not self.has_room:
            if self._space is None:
                self._space = anyio.Event()
            await self._space.wait()

    def _push_encoded(self, frame: Frame) -> None:
        """:meth:`push` when encoding at queue time."""
        if self._closed:
            self.counts.drops += 1
            return
        seq = self._number(frame)
        if seq is None:
            return  # a straggler: the numbering counted it
        self._queue_encoded(frame, seq)

    def _push_frame(self, frame: Frame) -> None:
        """:meth:`push` when encoding at flush time."""
        if self._closed:
            self.counts.drops += 1
            return
        self._frames.append(frame)
        self._count += 1
        if not self._hold and not self._kicked:
            self._schedule()

    def push_numbered(self, frame: Frame, seq: int | None = None) -> None:
        """Queue a frame numbered ``seq`` (default: its own seq), bypassing the numbering:
        only for a flow the caller opens and ends in one go (a small call's whole request),
        which the numbering then never sees. EncodeAt.QUEUE only.

        :raises FrameEncodeError: the frame does not fit max_frame.
        """
        if self._closed:
            self.counts.drops += 1
            return
        self._queue_encoded(frame, seq)

    def push_flow(self, frames: Sequence[Frame]) -> None:
        """Queue a whole flow the caller opens and ends in one go (a small call's request),
        numbered 0, 1, 2... in order, bypassing the numbering as :meth:`push_numbered` does,
        with one call for all of it. EncodeAt.QUEUE only.

        :raises FrameEncodeError: a frame does not fit max_frame (the frames before it stay
            queued, as with one :meth:`push_numbered` per frame).
        """
        if self._closed:
            self.counts.drops += len(frames)
            return
        out = self._out
        max_frame = self._max_frame()
        try:
            taken = encode_flow(frames, max_frame, out)  # the small frames, in one call
            self._count += taken
            for seq in range(taken, len(frames)):
                frame = frames[seq]
                payload = frame.payload
                if payload is None or len(payload) < SMALL_PAYLOAD:
                    out.append(encode_frame(frame, max_frame, seq))
                else:
                    out.extend(encode_frame_parts(frame, max_frame, seq))
                self._count += 1
        finally:
            if not self._hold and not self._kicked:
                self._schedule()

    def push_wire(self, data: bytes, count: int) -> None:
        """Queue ``count`` frames already in their wire form (``data``, length prefixes
        included) as one buffer: a whole flow the caller opens and ends in one go, numbered
        by it, bypassing the numbering as :meth:`push_flow` does. EncodeAt.QUEUE only."""
        if self._closed:
            self.counts.drops += count
            return
        self._out.append(data)
        self._count += count
        if not self._hold and not self._kicked:
            self._schedule()

    def _queue_encoded(self, frame: Frame, seq: int | None) -> None:
        """Encode ``frame`` with ``seq`` onto the queue: a small frame as one buffer, prefix
        included; a large payload as a buffer of its own (never copied into a joined frame)."""
        payload = frame.payload
        if payload is None or len(payload) < SMALL_PAYLOAD:
            self._out.append(encode_frame(frame, self._max_frame(), seq))
        else:
            self._out.extend(encode_frame_parts(frame, self._max_frame(), seq))
        self._count += 1
        if not self._hold and not self._kicked:
            self._schedule()

    def push_raw(self, data: bytes) -> None:
        """Queue ``data`` as it is, neither numbered nor checked against max_frame (raw
        bytes for bad-input tests); dropped and counted once closed."""
        if self._closed:
            self.counts.drops += 1
            return
        if data:
            self._out.append(bytes(data))
            self._count += 1
            if not self._hold and not self._kicked:
                self._schedule()

    def try_send(self, frame: Frame) -> bool:
        """Queue one frame now if :meth:`send` would neither wait nor yield; ``False`` (and
        nothing queued) otherwise, when the caller must ``await send(frame)``."""
        if self._count >= self._bound:
            return False
        payload = frame.payload
        if payload is not None:
            unyielded = self._unyielded + len(payload)
            if unyielded >= self._yield_bytes:
                return False
            self._unyielded = unyielded
        self.push(frame)
        return True

    async def send(self, frame: Frame) -> None:
        """Queue one frame, waiting only while the queue is full (dropped once closed)."""
        if self._count >= self._bound:
            await self.wait_room()
        self.push(frame)
        payload = frame.payload
        if payload is not None:
            self._unyielded += len(payload)
            if self._unyielded >= self._yield_bytes:
                self._unyielded = 0
                await anyio.lowlevel.checkpoint()

    def number_by(
        self, number: Callable[[Frame], int | None], batch: BatchEncoder | None = None
    ) -> None:
        """Take the numbering of a connection core made after the outbox (before any frame
        is queued); ``batch`` numbers and encodes a run of frames in one call where it can
        (:meth:`~cartridge_runtime.protocol.SeqAssigner.encode_numbered`; EncodeAt.FLUSH)."""
        self._number = number
        self._batch = batch

    def mark(self) -> tuple[int, int]:
        """The position the next queued frame will take (for :meth:`withdraw`)."""
        return self.batches, len(self._out)

    def withdraw(self, start: tuple[int, int], stop: tuple[int, int]) -> bool:
        """Take back the frames queued between two :meth:`mark` positions if none of them
        was handed to the sink yet; ``True`` when they were withdrawn. EncodeAt.QUEUE only."""
        out = self._out
        if start[0] != self.batches or stop[0] != self.batches or stop[1] > len(out):
            return False
        for i in range(start[1], stop[1]):
            out[i] = b""  # blanked, not deleted: positions others hold stay valid
        return True

    # -- writing -------------------------------------------------------------------------

    def hold(self) -> None:
        """Queue frames without writing them until the matching :meth:`release`."""
        self._hold += 1

    def release(self) -> None:
        """End a :meth:`hold`; the frames queued meanwhile are written now (:meth:`flush`)."""
        self._hold -= 1
        if not self._hold and (self._out or self._frames):
            self.flush()

    def flush(self) -> None:
        """Write what is queued now with a non-blocking write when nothing else is writing;
        whatever the sink does not take is left to the writer task."""
        scheduled = self._scheduled
        if scheduled is not None:
            self._scheduled = None
            scheduled.cancel()  # the loop then skips it instead of running it for nothing
        if self._writing:
            return  # the task writes; it takes the queue when it is done
        if not self._in_place or self.broken:
            self._wake_task()
            return
        batch = self._take()
        if batch:
            sink = self._sink
            assert sink is not None
            try:
                rest = sink.write_now(batch)
            except _SINK_GONE:
                self._break()
                return
            if rest:  # the pipe is full: the task waits for room and writes the rest
                self._out[:0] = rest
                self._wake_task()
                return
        self._kicked = False
        if self._drained is not None:
            self._drained.set()

    def flush_now(self) -> None:
        """Write what is queued at once if a loop callback was scheduled to write it (a frame
        queued outside a hold, on asyncio): a response then leaves before its sender's
        clean-up runs. Otherwise the write is left to whoever was going to do it."""
        if self._scheduled is not None:
            self.flush()

    def _schedule(self) -> None:
        """Someone must take the queue: a loop callback when there is a loop to call back
        from and a sink to write in place, else the task."""
        self._kicked = True
        soon = self._soon
        if soon is not None and not self._writing:
            self._scheduled = soon(self.flush)
        elif self._wake is not None:
            self._wake.set()

    def _wake_task(self) -> None:
        self._kicked = True
        if self._wake is not None:
            self._wake.set()

    def _take(self) -> list[Block]:
        """Everything queued, numbered and encoded, for one write (producers waiting for
        room are woken)."""
        if self._frames:
            frames, self._frames = self._frames, []
            number = self._number
            max_frame = self._max_frame()
            out = self._out
            encode_run = self._batch
            i, n = 0, len(frames)
            while i < n:
                if encode_run is not None:
                    # Numbers and encodes the frames it can in one call; the first it leaves
                    # (a straggler, a large payload, an error to report) goes the way below.
                    i = encode_run(frames, i, out, max_frame)
                    if i >= n:
                        break
                frame = frames[i]
                i += 1
                seq = number(frame)
                if seq is None:
                    continue  # a straggler: the numbering counted it
                payload = frame.payload
                try:
                    if payload is None or len(payload) < SMALL_PAYLOAD:
                        out.append(encode_frame(frame, max_frame, seq))
                    else:
                        out.extend(encode_frame_parts(frame, max_frame, seq))
                except ProtocolError as exc:
                    self.counts.drops += 1
                    self._on_drop(frame, exc)
        batch, self._out = self._out, []
        self._count = 0
        if batch:
            self.batches += 1
        if self._space is not None:
            self._space.set()
            self._space = None
        return batch

    def _break(self) -> None:
        """The sink failed: what is queued is discarded, and so is everything queued later."""
        self.broken = True
        self._frames.clear()
        self._out.clear()
        self._count = 0
        self._kicked = False
        if self._drained is not None:
            self._drained.set()
        if self._space is not None:
            self._space.set()
            self._space = None

    # -- the task ------------------------------------------------------------------------

    def attach(self, sink: ByteSink) -> None:
        """Give the outbox its sink (when it was made before the sink existed)."""
        self._sink = sink
        self._in_place = _writes_in_place(sink)

    async def drain(self) -> None:
        """Wait until everything queued so far was handed to the sink (or the sink failed)."""
        if not (self._out or self._frames or self._writing):
            return
        self.flush()
        if not (self._out or self._frames or self._writing):
            return
        if self._drained is None or self._drained.is_set():
            self._drained = anyio.Event()
        self._wake_task()
        await self._drained.wait()

    def close(self) -> None:
        """No more frames (later ones are dropped): the writer task writes what is queued
        and ends."""
        self._closed = True
        self._wake_task()
        if self._space is not None:
            self._space.set()
            self._space = None

    async def run(self) -> None:
        """The writer task: sleeps until woken (see the module docstring), until
        :meth:`close` and everything queued was written."""
        sink = self._sink
        assert sink is not None, "attach a sink first"
        new_event = self._new_event = event_factory()
        if self._in_place:
            self._soon = soon_caller()
        try:
            while True:
                if self.broken:
                    self._break()
                elif self._out or self._frames:
                    batch = self._take()
                    if batch:
                        self._writing = True
                        try:
                            await sink.send_all(batch)
                        except _SINK_GONE:
                            self._break()
                        finally:
                            self._writing = False
                    continue
                self._kicked = False
                if self._drained is not None:
                    self._drained.set()
                if self._closed:
                    return
                wake = self._wake = new_event()
                try:
                    await wake.wait()
                finally:
                    self._wake = None
        finally:
            self._soon = None
            self.done.set()
