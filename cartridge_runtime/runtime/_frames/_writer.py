"""The output side of a CBOR-mode session: one queue of frames and the one task that writes them.

:class:`FrameWriter` is the session's face of the shared outbound queue,
:class:`~cartridge_runtime._plumbing.FrameOutbox`, set up the cartridge's way: frames are
queued as objects and numbered (by the connection core's :class:`SeqAssigner`, stragglers
dropped) and encoded when their batch is written, an unencodable frame is dropped with a
``cartridge: ...`` line, and the queue is bounded (:data:`WRITER_QUEUE` frames) so that
producers wait, and reading pauses, while the host reads nothing.

Every task of the session hands its frames to :meth:`FrameWriter.send` (or, when that would
neither wait nor yield, queues them with :meth:`FrameWriter.try_send`, without a coroutine);
dispatch, which never waits, uses :meth:`FrameWriter.push`, which may go past the bound. While
the queue has room ``send`` does not yield, so a handler that emits STREAM_START, CHUNK,
STREAM_END and END in a row queues all four before anything is written; then they leave in one
gathering write. On asyncio, with a stream that can write without blocking (the stdout pipe),
that write happens in one loop callback rather than in the writer task, and a request's
terminal frame does not even wait for the callback (:meth:`FrameWriter.flush_now`). Only what
the pipe does not take at once goes to the task, which waits for room. A producer that could
run for long without blocking yields every :data:`YIELD_BYTES` of payload.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

import anyio
import anyio.abc

from cartridge_runtime._plumbing import YIELD_BYTES, EncodeAt, FrameOutbox, sink_for
from cartridge_runtime.protocol import Frame, SeqAssigner, compiled_hold

__all__ = ("WRITER_QUEUE", "YIELD_BYTES", "FrameWriter")

#: Frames queued for the writer before producers wait (the data itself is bounded by credit).
WRITER_QUEUE = 256

_T = TypeVar("_T")

#: The compiled :class:`_HeldWhileRunning` (``None``: not built or switched off).
_C_HELD = compiled_hold()


class _HeldWhileRunning:
    """Awaiting it runs ``coro`` with the outbox held except while ``coro`` is suspended.

    A handler that answers without waiting (a small call) queues its frames under the hold,
    and its runner writes them in place (:meth:`FrameWriter.flush`): no loop callback is
    scheduled for them, and none is cancelled. Whenever ``coro`` suspends (it waits for
    input, credit, a peer, a timer) the hold is released first, which writes what it queued,
    so nothing it sent waits behind its suspension. Results, exceptions, ``throw`` (a
    cancellation) and ``close`` pass through as with ``await coro``.
    """

    __slots__ = ("_coro", "_outbox")

    def __init__(self, coro: Coroutine[Any, Any, _T], outbox: FrameOutbox) -> None:
        self._coro = coro
        self._outbox = outbox

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, outbox = self._coro, self._outbox
        outbox.hold()
        held = True
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    if error is None:
                        yielded = coro.send(value)
                    else:
                        yielded, error = coro.throw(error), None
                except StopIteration as stop:
                    return stop.value
                held = False
                outbox.release()
                try:
                    value = yield yielded
                except GeneratorExit:
                    coro.close()
                    raise
                except BaseException as exc:  # a cancellation (or anything thrown) goes in
                    error = exc
                outbox.hold()
                held = True
        finally:
            if held:
                outbox.release()


class FrameWriter:
    """The session's frame queue and writer task (see the module docstring).

    :param send: the byte stream the frames go to (stdout of the process).
    :param max_frame: returns the negotiated max_frame at encoding time.
    """

    def __init__(self, send: anyio.abc.ByteSendStream, max_frame: Callable[[], int]) -> None:
        self.stream = send
        outbox = self.outbox = FrameOutbox(
            sink_for(send),
            max_frame,
            encode_at=EncodeAt.FLUSH,
            bound=WRITER_QUEUE,
            yield_bytes=YIELD_BYTES,
        )
        #: Set when the writer task has finished.
        self.done: anyio.Event = outbox.done
        # The outbox's own methods, bound once: no extra call on the per-frame path.
        #: ``push(frame)``: queue one frame now, even past the bound (dropped once closed);
        #: for the frames the session sends while it dispatches input.
        self.push: Callable[[Frame], None] = outbox.push
        #: ``try_send(frame)``: queue it if :meth:`send` would neither wait nor yield.
        self.try_send: Callable[[Frame], bool] = outbox.try_send
        #: ``await send(frame)``: queue one frame (waits only when the queue is full).
        self.send: Callable[[Frame], Awaitable[None]] = outbox.send
        #: ``flush_now()``: write what is queued at once when a loop callback would.
        self.flush_now: Callable[[], None] = outbox.flush_now
        #: ``await wait_room()``: return once :attr:`has_room`.
        self.wait_room: Callable[[], Awaitable[None]] = outbox.wait_room
        #: ``close()``: no more frames; the task finishes what is queued and ends.
        self.close: Callable[[], None] = outbox.close
        #: ``flush()``: write what is queued now (in place where the sink allows).
        self.flush: Callable[[], None] = outbox.flush

    def held_while_running(self, coro: Coroutine[Any, Any, _T]) -> Awaitable[_T]:
        """``coro`` as an awaitable that runs it with the queue held while it does not
        suspend (see :class:`_HeldWhileRunning`; compiled where the extension is)."""
        if _C_HELD is not None:
            return _C_HELD(self.outbox, coro)
        return _HeldWhileRunning(coro, self.outbox)

    def number_by(self, seq: SeqAssigner) -> None:
        """Number every frame with the connection core's ``seq`` (before the first frame)."""
        self.outbox.number_by(seq.number, seq.encode_numbered)

    async def run(self) -> None:
        """The writer task: until :meth:`close` and the queue is empty."""
        await self.outbox.run()

    @property
    def has_room(self) -> bool:
        """Whether the queue is below its bound (always once closed: frames are then dropped)."""
        return self.outbox.has_room

    @property
    def drops(self) -> int:
        """Frames that could not be queued (closed) or encoded."""
        return self.outbox.counts.drops

    @property
    def broken(self) -> bool:
        """The output stream failed; later frames are dropped."""
        return self.outbox.broken

    @property
    def _q(self) -> list[Frame]:
        """The frames queued and not written yet (a copy, for inspection)."""
        return self.outbox.queued
