"""The writing half of a :class:`~cartridge_runtime.engine._conn.Connection`: the frame queue
to the cartridge's stdin (its placement's :class:`~._placement.ByteSink`) and the task that
writes it.

The queue is the shared :class:`~cartridge_runtime._plumbing.FrameOutbox`, set up the engine's
way: every frame is numbered (one seq assigner per connection) and encoded when it is queued,
so the queue holds bytes in wire order, an unencodable frame raises to its sender, and frames
not yet written can be taken back (:meth:`Outbox.mark`, :meth:`Outbox.withdraw`). A small
frame is one buffer, prefix included; a large payload is a buffer of its own, handed to
``writev`` without being copied into a joined frame.

Code that queues several frames at once (a call opening, the reader dispatching a block)
holds the queue with :meth:`Outbox.hold` and writes it synchronously on
:meth:`Outbox.release` (a non-blocking ``writev``), which saves a wake-up on the hot path of
small calls. A frame queued outside a hold is written from one loop callback on asyncio, else
by the writer task, which otherwise runs only when the pipe is full.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import protocol as P
from .._plumbing import FrameOutbox
from ..protocol import Frame

if TYPE_CHECKING:
    from ._placement import ByteSink
    from ._proc import Counters

_MAX_FRAME = operator.attrgetter("limits.max_frame")


class Outbox:
    """Mixed into :class:`~cartridge_runtime.engine._conn.Connection` (see the module
    docstring): the connection's face of its :class:`~cartridge_runtime._plumbing.FrameOutbox`.
    """

    # Provided by Connection.
    state: str
    counters: Counters
    limits: P.Limits

    def _init_outbox(self) -> None:
        # The negotiated max_frame, read from C (no Python frame per frame encoded).
        max_frame: Callable[[], int] = functools.partial(_MAX_FRAME, self)
        self.outbox = FrameOutbox(None, max_frame, counts=self.counters)
        self._sink: ByteSink | None = None
        #: Holds taken through ``_hold`` (the reader's, around a block).
        self._holds = 0
        box = self.outbox
        # The outbox's own methods, bound once: no extra call on the per-frame path.
        self.hold = box.hold
        self.release = box.release
        self.flush = box.flush
        self.drain = box.drain
        self.mark = box.mark
        self.withdraw = box.withdraw
        self.forget_flow = box.forget_flow
        self._push = box.push
        self._push_numbered = box.push_numbered

    @property
    def _stdin(self) -> ByteSink | None:
        """The cartridge's stdin; set once the instance is launched (the outbox writes to it)."""
        return self._sink

    @_stdin.setter
    def _stdin(self, sink: ByteSink | None) -> None:
        self._sink = sink
        if sink is not None:
            self.outbox.attach(sink)

    @property
    def batches(self) -> int:
        """How many times the queue was handed to the pipe (see :meth:`withdraw`)."""
        return self.outbox.batches

    @property
    def _hold(self) -> int:
        """The reader's holds: it brackets a block's dispatch with ``+= 1`` and ``-= 1``,
        which hold and release the outbox."""
        return self._holds

    @_hold.setter
    def _hold(self, value: int) -> None:
        holds, self._holds = self._holds, value
        box = self.outbox
        while holds < value:
            box.hold()
            holds += 1
        while holds > value:
            box.release()
            holds -= 1

    @property
    def _out(self) -> bool:
        """Whether frames are queued that were not handed to the pipe yet."""
        return self.outbox.pending

    def send(self, frame: Frame) -> None:
        """Queue one frame for the writer (numbered and encoded now, in queue order).

        :raises FrameEncodeError: the frame does not fit the negotiated max_frame.
        """
        if self.state in ("dead", "failed"):
            self.counters.drops += 1
            return
        self._push(frame)

    def send_numbered(self, numbered: Frame, seq: int | None = None) -> None:
        """Queue a frame numbered ``seq`` (default: its own seq, which the caller set): only
        for a flow the caller opens and ends in one go (a small call's whole request), which
        the seq assigner never sees.

        :raises FrameEncodeError: the frame does not fit the negotiated max_frame.
        """
        if self.state in ("dead", "failed"):
            self.counters.drops += 1
            return
        self._push_numbered(numbered, seq)

    async def _writer(self) -> None:
        """The writer task (sleeps until the outbox needs it)."""
        await self.outbox.run()
