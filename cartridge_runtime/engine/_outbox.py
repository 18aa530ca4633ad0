"""The writing half of a connection: the frame queue to the cartridge's stdin (its placement's
:class:`~._placement.ByteSink`) and the task that writes it. The connection holds one
:class:`Outbox` and hands its methods out as its own (bound once: no extra call per frame).

Theory of operation
-------------------
Every frame is numbered (one :class:`~cartridge_runtime.protocol.SeqAssigner` per connection)
and encoded when it is queued, so the queue holds bytes in wire order. A small frame is one
buffer, prefix included; a large payload is a buffer of its own, handed to ``writev`` without
being copied into a joined frame.

Code that queues several frames at once (a call opening, the reader dispatching a block)
holds the queue with :meth:`Outbox.hold` and writes it synchronously on
:meth:`Outbox.release` (a non-blocking ``writev``), which saves the writer task's wake-up on
the hot path of small calls. The writer task runs only when the pipe is full or nobody
flushed.
"""

from __future__ import annotations

from typing import Protocol

import anyio

from .. import protocol as P
from ..protocol import Frame, MessageId
from ._placement import ByteSink

#: Frames whose payload is under this size are encoded as one buffer, prefix included; larger
#: ones as separate buffers around the payload, which is never copied (the codec's threshold).
_SMALL_PAYLOAD = 4096


class SendCounters(Protocol):
    """The statistics the outbox adds to: frames refused after the end, and stragglers."""

    drops: int
    stragglers: int


class Outbox:
    """The frame queue of one connection and its writer (see the module docstring).

    :param counters: where refused frames are counted.
    :param max_frame: the largest frame that may be sent (updated once negotiated).
    """

    def __init__(self, counters: SendCounters, max_frame: int) -> None:
        self.counters = counters
        self.max_frame = max_frame
        #: Set once the connection is dead or failed: frames are dropped (and counted).
        self.closed = False
        self._stdin: ByteSink | None = None
        self._seq = P.SeqAssigner()
        self._out: list[bytes | memoryview] = []
        #: How many times the queue was handed to the pipe: a position (batches, index) in
        #: ``_out`` stays valid only while this number is unchanged (see :meth:`withdraw`).
        self.batches = 0
        self._hold = 0
        self._writing = False
        self._kicked = False
        self._wake = anyio.Event()
        self._drained: anyio.Event | None = None

    def send(self, frame: Frame) -> None:
        """Queue one frame for the writer (numbered and encoded now, in queue order).

        :raises FrameEncodeError: the frame does not fit the negotiated max_frame.
        """
        if self.closed:
            self.counters.drops += 1
            return
        seq = self._seq.number(frame)
        if seq is None:
            self.counters.stragglers += 1
            return
        self.send_numbered(frame, seq)

    def send_numbered(self, numbered: Frame, seq: int | None = None) -> None:
        """Queue a frame numbered ``seq`` (default: its own seq, which the caller set): only
        for a flow the caller opens and ends in one go (a small call's whole request), which
        the seq assigner never sees; :meth:`send` passes the seq it assigned.

        :raises FrameEncodeError: the frame does not fit the negotiated max_frame.
        """
        if self.closed:
            self.counters.drops += 1
            return
        payload = numbered.payload
        out = self._out
        if payload is None or len(payload) < _SMALL_PAYLOAD:
            # A small frame is one buffer, prefix included (the codec's fastest path).
            out.append(P.encode_frame(numbered, self.max_frame, seq))
        else:
            # The payload goes to writev as its own buffer: never copied into a joined frame.
            out.extend(P.encode_frame_parts(numbered, self.max_frame, seq))
        if not self._hold and not self._kicked:
            self._kicked = True
            self._wake.set()

    def attach(self, stdin: ByteSink) -> None:
        """Write to ``stdin`` (the launched instance's input) from now on."""
        self._stdin = stdin

    def hold(self) -> None:
        """Queue frames without waking the writer until the matching :meth:`release`."""
        self._hold += 1

    def release(self) -> None:
        """End a :meth:`hold`; the frames queued meanwhile are written now (:meth:`flush`)."""
        self._hold -= 1
        if not self._hold:
            self.flush()

    def forget_flow(self, rid: MessageId, xid: MessageId | None) -> None:
        """Drop the numbering of a flow whose frames were withdrawn."""
        self._seq.forget(rid, xid)

    def mark(self) -> tuple[int, int]:
        """The position the next queued frame will take (for :meth:`withdraw`)."""
        return self.batches, len(self._out)

    def withdraw(self, start: tuple[int, int], stop: tuple[int, int]) -> bool:
        """Take back the frames queued between two :meth:`mark` positions if none of them
        has been handed to the pipe yet; True when they were withdrawn."""
        if start[0] != self.batches or stop[0] != self.batches or stop[1] > len(self._out):
            return False
        out = self._out
        for i in range(start[1], stop[1]):
            out[i] = b""  # blanked, not deleted: positions others hold stay valid
        return True

    def flush(self) -> None:
        """Write what is queued now with a non-blocking ``writev`` when the writer is idle;
        whatever the pipe does not take is left to the writer."""
        if not self._out:
            return
        if self._writing or self._stdin is None or self.closed:
            self._kick()
            return
        batch, self._out = self._out, []
        self.batches += 1
        try:
            rest = self._stdin.write_now(batch)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # The cartridge stopped reading; the reader sees its end and reports death.
            rest = []
        if rest:
            self._out[:0] = rest
            self._kick()
        elif not self._out and self._drained is not None:
            self._drained.set()

    def _kick(self) -> None:
        if not self._kicked:
            self._kicked = True
            self._wake.set()

    async def drain(self) -> None:
        """Wait until everything queued so far was handed to the pipe."""
        if not self._out and not self._writing:
            return
        if self._drained is None or self._drained.is_set():
            self._drained = anyio.Event()
        self._kick()
        await self._drained.wait()

    async def run_writer(self) -> None:
        """Task body: write whatever is queued whenever it is kicked, until the pipe breaks."""
        assert self._stdin is not None
        stdin = self._stdin
        try:
            while True:
                while not self._out:
                    if self._drained is not None:
                        self._drained.set()
                    self._wake = anyio.Event()
                    self._kicked = False
                    await self._wake.wait()
                batch, self._out = self._out, []
                self.batches += 1
                self._writing = True
                await stdin.send_all(batch)
                self._writing = False
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            # The cartridge stopped reading; the reader sees its end and reports death.
            self._out.clear()
            self._writing = False
            self._kicked = True  # nobody will wait for a wake-up any more
            if self._drained is not None:
                self._drained.set()
