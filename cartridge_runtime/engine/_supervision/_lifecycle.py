"""What happens to an engine's cartridges, as events an application can follow
(``Engine.subscribe()``): cartridges and caps added, replaced and removed, instances started,
dead, respawned, idle or OOM-killed, calls stalled and retried.

Every event is an immutable value with the event loop's time it happened at (``at``). A
subscriber has a bounded buffer: when it falls that far behind, the newest events are dropped
for it and counted (:attr:`Subscription.dropped`), never blocking the engine.
"""

from __future__ import annotations

import enum
from types import TracebackType

import anyio
import attrs
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = (
    "CallRetried",
    "CallStalled",
    "CapsChanged",
    "CartridgeAdded",
    "CartridgeDrained",
    "CartridgeRemoved",
    "CartridgeReplaced",
    "EngineEvent",
    "HostLinkChanged",
    "EventHub",
    "InstanceChanged",
    "InstanceState",
    "Subscription",
)

#: Events a subscriber may fall behind by before the newest are dropped for it.
DEFAULT_BUFFER = 1024


class InstanceState(enum.StrEnum):
    """What happened to one instance (:class:`InstanceChanged`)."""

    STARTED = "started"  #: its first start-up succeeded
    RESPAWNED = "respawned"  #: a later start-up succeeded (after a death, idle stop, restart)
    FAILED = "failed"  #: a start-up failed
    DIED = "died"  #: it ended on its own, or was killed
    STOPPED = "stopped"  #: it was shut down (engine shutdown, ``stop()``, retirement)
    IDLE = "idle"  #: it had no call for its ``idle_timeout`` and was stopped
    OOM_KILLED = "oom_killed"  #: it passed its memory limit and was killed
    RETIRED = "retired"  #: its cartridge was replaced or removed; it was drained and stopped


@attrs.frozen(kw_only=True)
class CartridgeAdded:
    """A cartridge was added (``add_cartridge``); ``caps`` are those known so far."""

    cartridge: str
    caps: tuple[str, ...]
    at: float


@attrs.frozen(kw_only=True)
class CartridgeReplaced:
    """A cartridge's new version takes new calls (``replace_cartridge``)."""

    cartridge: str
    old_command: tuple[str, ...]
    new_command: tuple[str, ...]
    at: float


@attrs.frozen(kw_only=True)
class CartridgeRemoved:
    """A cartridge takes no more calls (``remove_cartridge``); its instances drain."""

    cartridge: str
    at: float


@attrs.frozen(kw_only=True)
class CartridgeDrained:
    """A replaced or removed cartridge's drain is over: it took ``seconds`` of the ``limit``
    allowed, and ``ended`` calls still running at the limit failed with
    ``CARTRIDGE_RETIRED``; its instances have stopped."""

    cartridge: str
    seconds: float
    limit: float
    ended: int
    at: float


@attrs.frozen(kw_only=True)
class CapsChanged:
    """The caps a cartridge serves changed (its manifest became known, a new version, its
    removal): ``added`` and ``removed`` cap URNs."""

    cartridge: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    at: float


@attrs.frozen(kw_only=True)
class InstanceChanged:
    """One instance of a cartridge changed state; ``detail`` says why or how, in words."""

    cartridge: str
    replica: int
    state: InstanceState
    detail: str
    at: float


@attrs.frozen(kw_only=True)
class CallStalled:
    """A call received no frame for ``silent_for`` seconds (a warning each quarter of its
    activity timeout ``limit``; at the limit it fails with ``TIMEOUT``)."""

    cartridge: str
    cap: str
    silent_for: float
    limit: float
    at: float


@attrs.frozen(kw_only=True)
class CallRetried:
    """Attempt ``attempt`` of a call failed with ``code``; the next starts after ``delay``."""

    cap: str
    attempt: int
    delay: float
    code: str
    message: str
    at: float


@attrs.frozen(kw_only=True)
class HostLinkChanged:
    """A cartridge host attached to the engine's relay switch changed ``state``
    (``probing``, ``healthy``, ``unhealthy``, ``detached``); ``detail`` says why."""

    host: str
    state: str
    detail: str
    at: float


EngineEvent = (
    CartridgeAdded
    | CartridgeReplaced
    | CartridgeRemoved
    | CartridgeDrained
    | CapsChanged
    | InstanceChanged
    | CallStalled
    | CallRetried
    | HostLinkChanged
)


class Subscription:
    """The events of one ``engine.subscribe()``: iterate it (``async for event in sub``),
    preferably as ``async with engine.subscribe() as sub``, which unsubscribes at the end."""

    def __init__(
        self,
        hub: EventHub,
        send: MemoryObjectSendStream[EngineEvent],
        receive: MemoryObjectReceiveStream[EngineEvent],
    ) -> None:
        self._hub = hub
        self._send = send
        self._receive = receive
        #: Events dropped because this subscriber fell a whole buffer behind.
        self.dropped = 0

    def offer(self, event: EngineEvent) -> bool:
        """Queue ``event`` for this subscriber (the hub's part); ``False`` once it closed."""
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True

    def pending(self) -> list[EngineEvent]:
        """The events queued now, without waiting."""
        out: list[EngineEvent] = []
        while True:
            try:
                out.append(self._receive.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return out

    def close(self) -> None:
        """Unsubscribe; iteration ends after the events already queued."""
        self._hub.forget(self)
        self._send.close()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> EngineEvent:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        self._receive.close()


class EventHub:
    """The engine's event fan-out: :meth:`emit` from anywhere, synchronously."""

    def __init__(self) -> None:
        self._subscribers: list[Subscription] = []

    @property
    def active(self) -> bool:
        """Whether anyone listens (events need not be made otherwise)."""
        return bool(self._subscribers)

    def subscribe(self, buffer: int = DEFAULT_BUFFER) -> Subscription:
        """A new subscriber receiving every event from now on.

        :raises ValueError: ``buffer`` is not a whole number of at least 1.
        """
        if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
            raise ValueError(f"buffer must be a whole number of at least 1, not {buffer!r}")
        send, receive = anyio.create_memory_object_stream[EngineEvent](buffer)
        sub = Subscription(self, send, receive)
        self._subscribers.append(sub)
        return sub

    def forget(self, sub: Subscription) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    def emit(self, event: EngineEvent) -> None:
        """Hand ``event`` to every subscriber."""
        for sub in list(self._subscribers):
            if not sub.offer(event):
                self.forget(sub)
