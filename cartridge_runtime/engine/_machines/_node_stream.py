"""A node's value on its way through a machine run: pieces broadcast to a fixed set of readers.

A :class:`NodeStream` is one node's value in one scope instance. Its producer says whether it is
present (:meth:`NodeStream.start`) or absent (:meth:`NodeStream.absent`), then puts its pieces (scalar
data, or whole :class:`Item` values of a sequence) and closes it. Every consumer took a
:class:`NodeReader` before the run started; each reader has a small buffer of its own, so the
slowest reader sets the producer's pace (credit then carries that pace back to the cartridge
that makes the value) and memory stays bounded. A reader that stops reading early (a skipped
step) is closed and no longer counted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._inputs import Verified

__all__ = ("NodeStream", "NodeReader", "NodeCollector", "NODE_BUFFER", "whole_value")

#: Pieces a reader may have waiting before the producer waits for it.
NODE_BUFFER: Final = 8


class NodeReader:
    """One consumer's view of a flow."""

    def __init__(self, flow: NodeStream, receive: MemoryObjectReceiveStream[Any]) -> None:
        self._flow = flow
        self._receive = receive

    @property
    def flow(self) -> NodeStream:
        return self._flow

    async def present(self) -> bool:
        """Wait until the flow's producer decided; whether the value is present."""
        await self._flow.wait_decided()
        return self._flow.is_present

    async def pieces(self) -> AsyncIterator[Any]:
        """The pieces, as they come (bytes that arrived verified as :class:`Verified`)."""
        async with self._receive:
            async for piece in self._receive:
                yield piece

    async def whole(self) -> list[Any]:
        """Every piece, once the producer closed the flow."""
        return [piece async for piece in self.pieces()]

    def close(self) -> None:
        """Read no more: the producer stops waiting for this reader."""
        self._receive.close()


class NodeCollector:
    """A consumer that takes the value whole: the producer appends each piece to ``pieces``
    without waiting (the value is held whole anyway), and ``done`` is set at the end."""

    def __init__(self, flow: NodeStream) -> None:
        self._flow = flow
        self.pieces: list[Any] = []
        self.is_done = False
        self._done: anyio.Event | None = None  # made only when somebody waits

    def finish(self) -> None:
        self.is_done = True
        if self._done is not None:
            self._done.set()

    async def whole(self) -> list[Any] | None:
        """Every piece once the flow is closed, or None when the value is absent."""
        if not self.is_done:
            if self._done is None:
                self._done = anyio.Event()
            await self._done.wait()
        return self.value()

    def value(self) -> list[Any] | None:
        """Every piece, or None when the value is absent (once the flow ended)."""
        assert self.is_done, f"{self._flow.name} read before it ended"
        return self.pieces if self._flow.is_present else None


class NodeStream:
    """One node's value in one scope instance (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.is_decided = False
        self.is_present = False
        self._decided: anyio.Event | None = None  # made only when somebody waits
        self._senders: list[MemoryObjectSendStream[Any]] = []
        self._collectors: list[NodeCollector] = []
        self._sealed = False
        #: The value's digest as a step cache knows it before the pieces come (a replayed
        #: output, a machine input held whole), set before :meth:`start`; None: not known.
        self.digest: Any = None
        #: The producer is a call being stored: it sets :attr:`digest` when the value ended
        #: (a consumer need not hash the pieces itself).
        self.digest_later = False
        #: That call's progress in storing the value, or the file already holding its bytes
        #: (a run's input file, a replayed blob): a ``Leader``, so a call the value feeds need
        #: not store the same bytes again.
        self.stored_by: Any = None

    def collector(self) -> NodeCollector:
        """A new whole-value consumer (taken, like readers, before the producer starts)."""
        assert not self._sealed, f"a collector of {self.name} taken after its flow started"
        collector = NodeCollector(self)
        self._collectors.append(collector)
        return collector

    def reader(self) -> NodeReader:
        """A new reader; all readers are taken before the producer starts."""
        assert not self._sealed, f"a reader of {self.name} taken after its flow started"
        send, receive = anyio.create_memory_object_stream[Any](NODE_BUFFER)
        self._senders.append(send)
        return NodeReader(self, receive)

    @property
    def readers(self) -> int:
        return len(self._senders) + len(self._collectors)

    @property
    def wanted(self) -> bool:
        """Whether a consumer still takes the pieces (every reader may have stopped early)."""
        return bool(self._collectors) or any(
            send.statistics().open_receive_streams for send in self._senders
        )

    async def wait_decided(self) -> None:
        if not self.is_decided:
            if self._decided is None:
                self._decided = anyio.Event()
            await self._decided.wait()

    def _decide(self, present: bool) -> None:
        self._sealed = True
        if not self.is_decided:
            self.is_decided = True
            self.is_present = present
            if self._decided is not None:
                self._decided.set()

    def start(self) -> None:
        """The value is present; pieces follow."""
        self._decide(True)

    def absent(self) -> None:
        """The value is absent (nothing follows)."""
        self._decide(False)
        self.close()

    async def put(self, piece: Any, wire: tuple[int, int] | None = None) -> None:
        """Hand ``piece`` to every reader, waiting for room in each. ``wire`` is the verified
        checksum and payload length ``piece`` arrived with: a streaming reader gets it along
        (:class:`Verified`), to forward the piece without hashing it again."""
        for collector in self._collectors:
            collector.pieces.append(piece)
        if wire is not None:
            piece = Verified(piece, *wire)
        for send in self._senders:
            try:
                send.send_nowait(piece)
            except anyio.WouldBlock:
                try:
                    await send.send(piece)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    continue
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                continue  # that reader stopped reading

    def close(self) -> None:
        self._sealed = True
        for send in self._senders:
            send.close()
        for collector in self._collectors:
            collector.finish()


def whole_value(pieces: list[Any]) -> Any:
    """One value from a scalar's pieces: bytes joined, text joined, a lone value as it is,
    mixed pieces as a list."""
    if not pieces:
        return b""
    if all(isinstance(p, bytes | bytearray | memoryview) for p in pieces):
        return pieces[0] if len(pieces) == 1 and isinstance(pieces[0], bytes) else b"".join(pieces)
    if all(isinstance(p, str) for p in pieces):
        return "".join(pieces)
    return pieces[0] if len(pieces) == 1 else list(pieces)
