"""A node's value on its way through a machine run: pieces broadcast to a fixed set of readers.

A :class:`Flow` is one node's value in one scope instance. Its producer says whether it is
present (:meth:`Flow.start`) or absent (:meth:`Flow.absent`), then puts its pieces (scalar
data, or whole :class:`Item` values of a sequence) and closes it. Every consumer took a
:class:`FlowReader` before the run started; each reader has a small buffer of its own, so the
slowest reader sets the producer's pace (credit then carries that pace back to the cartridge
that makes the value) and memory stays bounded. A reader that stops reading early (a skipped
step) is closed and no longer counted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ("Flow", "FlowReader", "FLOW_BUFFER", "whole_value")

#: Pieces a reader may have waiting before the producer waits for it.
FLOW_BUFFER: Final = 8


class FlowReader:
    """One consumer's view of a flow."""

    def __init__(self, flow: Flow, receive: MemoryObjectReceiveStream[Any]) -> None:
        self._flow = flow
        self._receive = receive

    async def present(self) -> bool:
        """Wait until the flow's producer decided; whether the value is present."""
        await self._flow.decided.wait()
        return self._flow.is_present

    async def pieces(self) -> AsyncIterator[Any]:
        """The pieces, as they come."""
        async with self._receive:
            async for piece in self._receive:
                yield piece

    async def whole(self) -> list[Any]:
        """Every piece, once the producer closed the flow."""
        return [piece async for piece in self.pieces()]

    def close(self) -> None:
        """Read no more: the producer stops waiting for this reader."""
        self._receive.close()


class Flow:
    """One node's value in one scope instance (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.decided = anyio.Event()
        self.is_present = False
        self._senders: list[MemoryObjectSendStream[Any]] = []
        self._sealed = False

    def reader(self) -> FlowReader:
        """A new reader; all readers are taken before the producer starts."""
        assert not self._sealed, f"a reader of {self.name} taken after its flow started"
        send, receive = anyio.create_memory_object_stream[Any](FLOW_BUFFER)
        self._senders.append(send)
        return FlowReader(self, receive)

    @property
    def readers(self) -> int:
        return len(self._senders)

    def start(self) -> None:
        """The value is present; pieces follow."""
        self._sealed = True
        if not self.decided.is_set():
            self.is_present = True
            self.decided.set()

    def absent(self) -> None:
        """The value is absent (nothing follows)."""
        self._sealed = True
        if not self.decided.is_set():
            self.decided.set()
        self.close()

    async def put(self, piece: Any) -> None:
        """Hand ``piece`` to every reader, waiting for room in each."""
        for send in self._senders:
            try:
                await send.send(piece)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                continue  # that reader stopped reading

    def close(self) -> None:
        self._sealed = True
        for send in self._senders:
            send.close()


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
