"""What a call queues on its connection: the request's frames, in order, through the
connection's outbox, numbered by its sans-IO core.

These are the connection's verbs for a call (:class:`~._links.CallLink`): a frame, a flow
opened and ended in one go, a hold while several are queued, marks to take frames back while
none was written, and the tasks that must end with the connection. Every frame sent is shown
to the frame tap first, when there is one.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import anyio.abc

from ..._plumbing import FrameOutbox
from ...protocol import Frame, HostConnection, MessageId
from ._links import Flow, PeerOrigin

__all__ = ("CallSending",)


class CallSending:
    """The sending half of :class:`~._shell.Connection`."""

    # The connection's own fields, used here.
    name: str
    core: HostConnection[Flow, PeerOrigin]
    outbox: FrameOutbox
    _tap: Any
    _tg: anyio.abc.TaskGroup | None
    # The core's own methods, bound once (each call made per request skips a forwarding
    # frame): a fresh small-uint routing id for a request sent on this connection; route the
    # response frames of a request (by rid) to its flow; a flow of a rid ended, so later
    # frames for it are stragglers.
    next_xid: Callable[[], MessageId]
    add_flow: Callable[[MessageId, Flow], None]
    forget: Callable[[MessageId], None]

    def add_origin(self, rid: MessageId, origin: PeerOrigin) -> None:
        """Route the frames of this cartridge's peer call (by its rid) to its origin."""
        self.core.add_origin(rid, origin)

    def send(self, frame: Frame) -> None:
        """Queue one frame, numbered by the core (a straggler is dropped and counted)."""
        tap = self._tap
        if tap is not None:
            tap.on_sent(self.name, frame)
        self.outbox.push(frame)

    def send_numbered(self, frame: Frame, seq: int | None) -> None:
        """Queue a frame of a flow the caller opens and ends in one go, numbered by it."""
        tap = self._tap
        if tap is not None:
            tap.on_sent(self.name, frame)
        self.outbox.push_numbered(frame, seq)

    def send_flow(self, frames: Sequence[Frame]) -> None:
        """Queue a whole flow the caller opens and ends in one go, numbered 0, 1, 2..."""
        tap = self._tap
        if tap is not None:
            for frame in frames:
                tap.on_sent(self.name, frame)
        self.outbox.push_flow(frames)

    def send_wire(self, data: bytes, count: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """Queue ``count`` frames of a flow the caller opens and ends in one go, already in
        their wire form and numbered 0, 1, 2... (``data``), and write them now unless a hold
        is on: their queue positions (for :meth:`withdraw`); ``None``, with nothing queued,
        when a frame tap must see each frame."""
        if self._tap is not None:
            return None
        outbox = self.outbox
        first = outbox.mark()
        outbox.hold()
        outbox.push_wire(data, count)
        stop = outbox.mark()
        outbox.release()
        return first, stop

    def hold(self) -> None:
        """Queue frames without writing them until the matching :meth:`release`."""
        self.outbox.hold()

    def release(self) -> None:
        """End a :meth:`hold`: what was queued meanwhile leaves in one write."""
        self.outbox.release()

    def mark(self) -> tuple[int, int]:
        """The queue position of the next frame (for :meth:`withdraw`)."""
        return self.outbox.mark()

    def withdraw(self, start: tuple[int, int], stop: tuple[int, int]) -> bool:
        """Take back the frames queued between two marks if none was written yet."""
        return self.outbox.withdraw(start, stop)

    def forget_flow(self, rid: MessageId, xid: MessageId | None) -> None:
        """Drop the numbering of a flow whose frames were withdrawn."""
        self.core.seq.forget(rid, xid)

    def flush(self) -> None:
        """Write what is queued now (see :meth:`~cartridge_runtime._plumbing.FrameOutbox.flush`)."""
        self.outbox.flush()

    def send_raw(self, data: bytes) -> None:
        """Queue ``data`` as it is, in order with the frames around it: bytes that need not
        be a frame at all, for tests of how a cartridge meets bad input. Dropped once the
        connection's output closed."""
        self.outbox.push_raw(data)

    async def drain(self) -> None:
        """Wait until everything queued so far was handed to the pipe."""
        await self.outbox.drain()

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run a task that must end with this connection."""
        if self._tg is not None and not self.core.gone:
            self._tg.start_soon(fn, *args)
