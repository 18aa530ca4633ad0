"""The engine's cartridges: adding, replacing and removing them, starting and stopping their
instances by hand. :class:`Cartridges` is the part of :class:`~._engine.Engine` that manages
what runs; the engine holds one and hands it the shared parts (the slots, the starter, the
router, the event hub, the watchdog) through its constructor. Routing and calls live in
:mod:`._engine`, which forwards its cartridge methods here.

Replacing and removing a cartridge drain its calls in flight before its instances retire
(:mod:`._supervision._drain`): routing moves first, so a call never sees a mix of versions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ..protocol import ConnState
from ._config import EngineConfig
from ._connection._shell import Connection
from ._errors import EngineError
from ._placements._seam import Placement
from ._placements._subprocess import Subprocess
from ._replica_start import ReplicaStarter
from ._replicas import CartridgeSlot, Replica
from ._routing import CapRouter
from ._supervision._activity import check_limit
from ._supervision._drain import retire
from ._supervision._lifecycle import (
    CapsChanged,
    CartridgeAdded,
    CartridgeDrained,
    CartridgeRemoved,
    CartridgeReplaced,
    EventHub,
    Subscription,
)
from ._supervision._watchdog import Watchdog

if TYPE_CHECKING:
    from ..manifest import Manifest

__all__ = ("Cartridges", "default_placement")


class Cartridges:
    """What an engine does with its cartridges (see the module docstring). Each public
    method is documented where users call it, on :class:`~._engine.Engine`.

    :param slots: the engine's cartridges by name, in routing order (shared with the router).
    :param draining: the replaced or removed cartridges whose calls still drain.
    """

    def __init__(
        self,
        *,
        config: EngineConfig,
        slots: dict[str, CartridgeSlot],
        draining: list[CartridgeSlot],
        starter: ReplicaStarter,
        router: CapRouter,
        hub: EventHub,
        watchdog: Watchdog,
    ) -> None:
        self.config = config
        self._slots = slots
        self._draining = draining
        self._starter = starter
        self._router = router
        self._hub = hub
        self._watchdog = watchdog

    # -- cartridges ------------------------------------------------------------------------

    def add(
        self,
        target: str | os.PathLike[str] | Sequence[str] | object,
        *,
        replicas: int = 1,
        placement: Placement | None = None,
        known_caps: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        eager: bool = False,
        name: str | None = None,
        memory_limit: int | None = None,
        idle_timeout: float | None = None,
        activity_timeout: float | None = None,
        manifest: Manifest | None = None,
        check_outputs: bool = True,
    ) -> str:
        """See :meth:`Engine.add_cartridge <._engine.Engine.add_cartridge>`."""
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise ValueError(f"replicas must be a whole number of at least 1, not {replicas!r}")
        memory_limit = _check_bytes(
            self.config.memory_limit if memory_limit is None else memory_limit
        )
        idle_timeout = check_limit(
            self.config.idle_timeout if idle_timeout is None else idle_timeout, "idle_timeout"
        )
        activity_timeout = check_limit(activity_timeout, "activity_timeout")
        if placement is None:
            placement = self.config.placement or default_placement(target)
        elif not isinstance(placement, Placement):
            raise TypeError(
                "placement must be a placement such as Subprocess() or InProcess(runtime), "
                f"not {type(placement).__name__}"
            )
        resolved = placement.resolve(target)
        if name is None:
            name = resolved.label
        unique, n = name, 2
        while unique in self._slots:
            unique, n = f"{name}#{n}", n + 1
        slot = CartridgeSlot(
            unique,
            placement=placement,
            target=resolved,
            replicas=replicas,
            env=env,
            known_caps=known_caps
            if known_caps is not None or manifest is None
            else [cap.urn for cap in manifest.iter_caps()],
            eager=eager,
            known_manifest=manifest,
            memory_limit=memory_limit,
            idle_timeout=idle_timeout,
        )
        slot.activity_timeout = activity_timeout
        slot.check_outputs = bool(check_outputs)
        self._slots[unique] = slot
        self.caps_changed()
        if self._hub.active:
            now = _now()
            self._hub.emit(CartridgeAdded(cartridge=unique, caps=tuple(slot.caps or ()), at=now))
            if slot.caps:
                self._hub.emit(
                    CapsChanged(cartridge=unique, added=tuple(slot.caps), removed=(), at=now)
                )
        if memory_limit is not None or idle_timeout is not None:
            self._watchdog.poke()
        if eager:
            for replica in slot.replicas:
                self._starter.start_soon(slot, replica)
        return unique

    async def replace(
        self,
        name: str,
        target: str | os.PathLike[str] | Sequence[str] | object,
        *,
        drain: float = 30.0,
        placement: Placement | None = None,
        env: Mapping[str, str] | None = None,
        known_caps: Sequence[str] | None = None,
    ) -> None:
        """See :meth:`Engine.replace_cartridge <._engine.Engine.replace_cartridge>`."""
        old = self._slot(name)
        placement = placement or old.placement
        new = CartridgeSlot(
            name,
            placement=placement,
            target=placement.resolve(target),
            replicas=len(old.replicas),
            env=old.env if env is None else env,
            known_caps=known_caps,
            eager=old.eager,
            memory_limit=old.memory_limit,
            idle_timeout=old.idle_timeout,
        )
        new.activity_timeout = old.activity_timeout
        new.standby = True
        new.check_outputs = old.check_outputs
        try:
            await self._starter.each(new, self._starter.ensure_started)
        except BaseException:
            new.retired = True
            with anyio.CancelScope(shield=True):
                await retire(new, drain=0, grace=self.config.shutdown_grace)
            raise
        caps_before = old.caps or ()
        new.standby = False
        self._slots[name] = new  # the same key keeps its place in routing order
        self.caps_changed()
        old.replaced = True
        old.retired = True
        self._watchdog.caps_changed(new, caps_before, new.caps or ())
        if self._hub.active:
            self._hub.emit(
                CartridgeReplaced(
                    cartridge=name, old_command=old.command, new_command=new.command, at=_now()
                )
            )
        await self._retire(old, drain)

    async def remove(self, name: str, *, drain: float = 30.0) -> None:
        """See :meth:`Engine.remove_cartridge <._engine.Engine.remove_cartridge>`."""
        slot = self._slot(name)
        del self._slots[name]
        self.caps_changed()
        slot.retired = True
        if self._hub.active:
            self._hub.emit(CartridgeRemoved(cartridge=name, at=_now()))
        self._watchdog.caps_changed(slot, slot.caps or (), ())
        await self._retire(slot, drain)

    async def _retire(self, slot: CartridgeSlot, drain: float) -> None:
        if isinstance(drain, bool) or not isinstance(drain, int | float) or drain < 0:
            raise ValueError(f"drain must be a number of seconds of 0 or more, not {drain!r}")
        self._draining.append(slot)
        try:
            drained = await retire(slot, drain=drain, grace=self.config.shutdown_grace)
        finally:
            self._draining.remove(slot)
        if self._hub.active:
            self._hub.emit(
                CartridgeDrained(
                    cartridge=slot.name,
                    seconds=drained.seconds,
                    limit=drained.limit,
                    ended=drained.ended,
                    at=_now(),
                )
            )

    def subscribe(self, *, buffer: int = 1024) -> Subscription:
        """See :meth:`Engine.subscribe <._engine.Engine.subscribe>`."""
        return self._hub.subscribe(buffer)

    def supervised(self) -> list[CartridgeSlot]:
        """The cartridges with instances to watch: those added, and those draining."""
        return [*self._slots.values(), *self._draining]

    async def start(self, name: str) -> None:
        """See :meth:`Engine.start <._engine.Engine.start>`."""
        await self._starter.each(self._slot(name), self._starter.ensure_started)

    async def restart(self, name: str) -> None:
        """See :meth:`Engine.restart <._engine.Engine.restart>`."""

        async def restart(slot: CartridgeSlot, replica: Replica) -> Connection:
            replica.failure = None
            if replica.conn is not None and replica.conn.state in (
                ConnState.READY,
                ConnState.STARTING,
            ):
                await replica.conn.close(self.config.shutdown_grace)
            return await self._starter.ensure_started(slot, replica)

        await self._starter.each(self._slot(name), restart)

    async def stop(self, name: str) -> None:
        """See :meth:`Engine.stop <._engine.Engine.stop>`."""
        slot = self._slot(name)
        async with anyio.create_task_group() as tg:
            for replica in slot.replicas:
                if replica.conn is not None:
                    tg.start_soon(replica.conn.close, self.config.shutdown_grace)

    def kill(self, name: str, *, replica: int | None = None) -> None:
        """See :meth:`Engine.kill <._engine.Engine.kill>`."""
        for one in self._replicas_of(self._slot(name), replica):
            if one.conn is not None:
                one.conn.kill("killed by the engine operator")

    def manifest(self, name: str) -> Any:
        """See :meth:`Engine.manifest <._engine.Engine.manifest>`."""
        return self._slot(name).manifest

    async def probe(self, name: str, *, replica: int = 0) -> bool:
        """See :meth:`Engine.probe <._engine.Engine.probe>`."""
        slot = self._slot(name)
        (one,) = self._replicas_of(slot, replica)
        conn = await self._starter.ensure_started(slot, one)
        return await conn.probe()

    def _replicas_of(self, slot: CartridgeSlot, index: int | None) -> tuple[Replica, ...]:
        if index is None:
            return slot.replicas
        if (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not (0 <= index < len(slot.replicas))
        ):
            raise EngineError(
                f"cartridge {slot.name} has no replica {index!r} "
                f"(it has {len(slot.replicas)}: 0 to {len(slot.replicas) - 1})"
            )
        return (slot.replicas[index],)

    def _slot(self, name: str) -> CartridgeSlot:
        try:
            return self._slots[name]
        except KeyError:
            raise EngineError(
                f"no cartridge named {name!r}; known: {', '.join(self._slots) or 'none'}"
            ) from None

    def caps_changed(self) -> None:
        """The routing table changed (a cartridge added, or its manifest became known)."""
        self._router.changed()


def _now() -> float:
    return anyio.current_time()


def _check_bytes(value: int | None) -> int | None:
    """``value`` if it is ``None`` or a positive whole number of bytes.

    :raises ValueError: otherwise.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"memory_limit must be a positive whole number of bytes, not {value!r}")
    return value


def default_placement(target: object) -> Placement:
    """A runtime object runs in process; anything else as a subprocess."""
    if callable(getattr(target, "serve", None)):
        from ._placements._inprocess import InProcess

        return InProcess(target)  # type: ignore[arg-type]
    return Subprocess()
