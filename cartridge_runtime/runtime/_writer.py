"""The output side of a CBOR-mode session: one queue of frames and the one task that writes them.

Theory of operation
-------------------
Every task of the session hands its frames to :meth:`FrameWriter.send` (or, when that would
neither wait nor yield, queues them with :meth:`FrameWriter.try_send`, without a coroutine);
dispatch, which never waits, uses :meth:`FrameWriter.push`, which may go past the queue's
bound (the session then reads no more input until there is room again). While the queue has
room ``send`` does not yield to the event loop, so a handler that emits STREAM_START, CHUNK,
STREAM_END and END in a row queues all four before the writer task runs; the writer then
takes *everything* queued, numbers each frame (seq per flow, stragglers dropped), encodes it
and sends the batch with one write (a gathering ``writev`` when the stream offers
``send_many``). So a small response costs one write system call, and one wake-up of the
reader on the other end.

On asyncio, when the stream can write without blocking (``write_now``, as the stdout pipe
can), the writer task is not even woken for a batch: the first frame queued while it is idle
schedules one loop callback that encodes and writes the batch in place, which costs a
fraction of a task switch. A request's terminal frame does not wait for that callback: the
session writes the batch at once (:meth:`FrameWriter.flush_now`), before cleaning up. Only
what the pipe does not take at once goes to the task, which waits for room; while it holds
unwritten bytes, callbacks leave everything to it, so frames never overtake each other.

A producer that could run for long without blocking (a handler generating data faster than
it needs credit) yields every :data:`YIELD_BYTES` of payload so that the writer keeps data
flowing. When the queue is full (:data:`WRITER_QUEUE` frames), producers wait.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import sniffio

from cartridge_runtime.protocol import Frame, ProtocolError, SeqAssigner, encode_frame_parts

#: Frames queued for the writer before producers wait (the data itself is bounded by credit).
WRITER_QUEUE = 256
#: Payload bytes queued without blocking before a producer yields to the writer anyway.
YIELD_BYTES = 1 << 20


def _note(message: str) -> None:
    print(f"cartridge: {message}", file=sys.stderr, flush=True)


class FrameWriter:
    """The session's frame queue and writer task (see the module docstring).

    :param send: the byte stream the frames go to (stdout of the process).
    :param max_frame: returns the negotiated max_frame at encoding time.
    """

    def __init__(self, send: anyio.abc.ByteSendStream, max_frame: Callable[[], int]) -> None:
        self.stream = send
        self._send_many: Any = getattr(send, "send_many", None)
        self._max_frame = max_frame
        self.seq = SeqAssigner()
        self._q: collections.deque[Frame] = collections.deque()
        self._wake: anyio.Event | None = None  # the writer waits on it when the queue is empty
        self._space: anyio.Event | None = None  # producers wait on it when the queue is full
        self._closed = False
        self._unyielded = 0
        self.drops = 0  #: frames that could not be queued or encoded
        self.broken = False  #: the output stream failed; later frames are dropped
        self.done = anyio.Event()  #: set when the writer task has finished
        self._write_now: Any = getattr(send, "write_now", None)
        self._call_soon: Callable[[Callable[[], None]], Any] | None = None  # set by run()
        self._scheduled: Any = None  # the pending flush callback's handle, if any
        self._rest: list[Any] = []  # bytes a callback could not write; the task owns them

    @property
    def has_room(self) -> bool:
        """Whether the queue is below its bound (always once closed: frames are then dropped)."""
        return len(self._q) < WRITER_QUEUE or self._closed

    async def wait_room(self) -> None:
        """Return once :attr:`has_room` (at once when it already is)."""
        while not self.has_room:
            if self._space is None:
                self._space = anyio.Event()
            await self._space.wait()

    def push(self, frame: Frame) -> None:
        """Queue one frame now, even past the bound (dropped once closed).

        For the frames the session sends while it dispatches input (replies, CREDIT, ERR):
        the session reads no more input while the queue is over its bound, so these stay few.
        """
        if self._closed:
            self.drops += 1
            return
        self._q.append(frame)
        if self._wake is not None:
            if self._call_soon is not None:
                if self._scheduled is None:
                    self._scheduled = self._call_soon(self._flush_soon)
            else:
                self._wake.set()
                self._wake = None

    def try_send(self, frame: Frame) -> bool:
        """Queue one frame now if :meth:`send` would neither wait nor yield; ``False`` (and
        nothing queued) otherwise, when the caller must ``await send(frame)``.

        The handlers' path: queuing a small frame then costs no coroutine.
        """
        if len(self._q) >= WRITER_QUEUE:
            return False
        payload = frame.payload
        if payload is not None:
            unyielded = self._unyielded + len(payload)
            if unyielded >= YIELD_BYTES:
                return False
            self._unyielded = unyielded
        self.push(frame)
        return True

    async def send(self, frame: Frame) -> None:
        """Queue one frame (waits only when the queue is full; dropped once closed)."""
        if len(self._q) >= WRITER_QUEUE:
            await self.wait_room()
        self.push(frame)
        payload = frame.payload
        if payload is not None:
            self._unyielded += len(payload)
            if self._unyielded >= YIELD_BYTES:
                self._unyielded = 0
                await anyio.lowlevel.checkpoint()

    def flush_now(self) -> None:
        """Write what is queued at once, in place, when the writer can (asyncio, an idle
        writer task, a non-blocking stream); otherwise leave it to the scheduled flush.

        The session calls this after a request's terminal frame: the response then leaves
        before the request's clean-up runs, so that clean-up overlaps with the host's work.
        """
        handle = self._scheduled
        if handle is not None and self._q:
            handle.cancel()  # the loop then skips it instead of running it for nothing
            self._flush_soon()

    def close(self) -> None:
        """No more frames: the writer finishes what is queued and ends."""
        self._closed = True
        if self._wake is not None:
            self._wake.set()
            self._wake = None
        if self._space is not None:
            self._space.set()
            self._space = None

    def _encode(self, frames: list[Frame]) -> list[bytes]:
        number = self.seq.number
        max_frame = self._max_frame()
        parts: list[bytes] = []
        for frame in frames:
            seq = number(frame)
            if seq is None:
                continue
            try:
                # The seq goes straight to the encoder: no numbered copy of the frame; a large
                # payload stays its own buffer (no joined copy of the frame).
                parts.extend(encode_frame_parts(frame, max_frame, seq))
            except ProtocolError as exc:
                _note(f"dropping a {frame.frame_type.name} frame that cannot be encoded: {exc}")
                self.drops += 1
        return parts

    def _take_encoded(self) -> list[bytes]:
        """Everything queued, numbered and encoded (producers waiting for room are woken)."""
        batch = list(self._q)
        self._q.clear()
        if self._space is not None:
            self._space.set()
            self._space = None
        return self._encode(batch)

    def _flush_soon(self) -> None:
        """The loop callback (asyncio): write what is queued in place while the task idles."""
        self._scheduled = None
        if not self._q or self._wake is None or self.broken:
            return  # the task is busy (it takes the queue itself), or nothing to do
        parts = self._take_encoded()
        if not parts:
            return
        try:
            rest = self._write_now(parts)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self.broken = True
            return
        if rest:  # the pipe is full: the task waits for room and writes the rest
            self._rest = rest
            self._wake.set()
            self._wake = None

    async def _write(self, parts: list[Any]) -> None:
        """Send ``parts`` in order with as few writes as the stream allows."""
        try:
            if len(parts) == 1:
                await self.stream.send(parts[0])
            elif self._send_many is not None:
                await self._send_many(parts)  # one gathering write, no join copy
            else:
                await self.stream.send(b"".join(parts))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self.broken = True

    async def run(self) -> None:
        """The writer task: until :meth:`close` and the queue is empty."""
        q = self._q
        if self._write_now is not None and sniffio.current_async_library() == "asyncio":
            import asyncio

            self._call_soon = asyncio.get_running_loop().call_soon
        try:
            while True:
                if self._rest:
                    rest, self._rest = self._rest, []
                    await self._write(rest)
                    continue
                if not q:
                    if self._closed:
                        return
                    self._wake = anyio.Event()
                    await self._wake.wait()
                    continue
                parts = self._take_encoded()
                if parts and not self.broken:
                    await self._write(parts)
        finally:
            self.done.set()
