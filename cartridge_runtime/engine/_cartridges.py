"""The engine's cartridges: adding, replacing and removing them, starting and stopping their
instances by hand (the part of :class:`~._engine.Engine` that manages what runs, as a base
class the engine builds on; routing and calls live in :mod:`._engine`).

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
    CartridgeRemoved,
    CartridgeReplaced,
    EventHub,
    Subscription,
)
from ._supervision._watchdog import Watchdog

if TYPE_CHECKING:
    from ..manifest import Manifest

__all__ = ("CartridgeAdmin", "default_placement")


class CartridgeAdmin:
    """What an engine does with its cartridges (see the module docstring); the engine sets
    the attributes declared here."""

    config: EngineConfig
    _slots: dict[str, CartridgeSlot]
    _draining: list[CartridgeSlot]
    _starter: ReplicaStarter
    _router: CapRouter
    _hub: EventHub
    _watchdog: Watchdog

    # -- cartridges ------------------------------------------------------------------------

    def add_cartridge(
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
        """Register a cartridge; returns its name (unique within the engine).

        :param target: for a subprocess (the default placement), a ``.py`` script (run with
            this interpreter), a ``.js`` script (run with ``node``), an executable (a bare
            name that exists in the current folder runs as ``./name``, else it is looked up
            on ``PATH``), or a command list; for
            ``InProcess(runtime)``, a name or the runtime. A ``CartridgeRuntime`` given
            without a placement runs in process.
        :param replicas: how many instances run it; each call goes to the least-loaded ready
            one, and each is respawned on its own after its death.
        :param placement: where the instances run: :class:`Subprocess` (the default, or
            ``EngineConfig.placement``), :class:`InProcess`.
        :param known_caps: its cap URNs, so calls route to it before it ever started.
        :param env: the process environment (default: inherit).
        :param eager: start its replicas as soon as the engine runs instead of at the first call.
        :param memory_limit: resident bytes (each instance's process tree) past which an
            instance is killed, its calls failing with ``OOM_KILLED`` (default
            ``EngineConfig.memory_limit``); the next call starts it again.
        :param idle_timeout: seconds without a call after which an instance is stopped
            gracefully, and started again by the next call (default
            ``EngineConfig.idle_timeout``: never).
        :param activity_timeout: seconds a call to it may go without a frame before it fails
            with ``TIMEOUT`` (``math.inf``: none); it wins over the caps' metadata
            ``activity_timeout_secs`` and ``EngineConfig.activity_timeout``, a call's own
            ``activity_timeout=`` over it.
        :param manifest: its manifest, when known without starting it (a discovery's cache
            gives it): planning and machine resolution read it instead of starting the
            cartridge, and its caps route calls as ``known_caps`` do. The manifest the
            cartridge sends at start-up takes its place.
        :param check_outputs: hold its calls' outputs to their media definitions (HST-24);
            ``False``: never for this cartridge.
        :raises CartridgeNotFound: the script or program does not exist (nothing is added).
        :raises TypeError: the placement cannot run this target, or ``placement`` is not one.
        :raises ValueError: ``replicas`` is not a whole number of at least 1, ``memory_limit``
            not a positive whole number of bytes, or ``idle_timeout`` or ``activity_timeout``
            not positive seconds.
        """
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
        self._caps_changed()
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

    async def replace_cartridge(
        self,
        name: str,
        target: str | os.PathLike[str] | Sequence[str] | object,
        *,
        drain: float = 30.0,
        placement: Placement | None = None,
        env: Mapping[str, str] | None = None,
        known_caps: Sequence[str] | None = None,
    ) -> None:
        """Upgrade cartridge ``name`` to ``target`` without losing a call: start the new
        version (every replica), route new calls to it at once, let calls in flight on the old
        one finish within ``drain`` seconds, then end the rest with ``CARTRIDGE_RETIRED`` and
        stop it. A call never sees a mix of versions. The new version keeps the name, the
        place in routing order, the replicas and the supervision options of the old.

        :raises SpawnFailed: the new version cannot start (the old one goes on serving).
        :raises EngineError: no such cartridge.
        """
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
        new.check_outputs = old.check_outputs
        try:
            await self._starter.each(new, self._starter.ensure_started)
        except BaseException:
            new.retired = True
            with anyio.CancelScope(shield=True):
                await retire(new, drain=0, grace=self.config.shutdown_grace)
            raise
        caps_before = old.caps or ()
        self._slots[name] = new  # the same key keeps its place in routing order
        self._caps_changed()
        old.retired = True
        self._watchdog.caps_changed(new, caps_before, new.caps or ())
        if self._hub.active:
            self._hub.emit(
                CartridgeReplaced(
                    cartridge=name, old_command=old.command, new_command=new.command, at=_now()
                )
            )
        await self._retire(old, drain)

    async def remove_cartridge(self, name: str, *, drain: float = 30.0) -> None:
        """Stop routing calls to cartridge ``name`` at once; let its calls in flight finish
        within ``drain`` seconds, then end the rest with ``CARTRIDGE_RETIRED`` and stop it.

        :raises EngineError: no such cartridge.
        """
        slot = self._slot(name)
        del self._slots[name]
        self._caps_changed()
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
            await retire(slot, drain=drain, grace=self.config.shutdown_grace)
        finally:
            self._draining.remove(slot)

    def subscribe(self, *, buffer: int = 1024) -> Subscription:
        """Events of this engine from now on: cartridges and caps added, replaced and
        removed; instances started, died, respawned, idle, OOM-killed, retired; calls stalled
        and retried. Use as ``async with engine.subscribe() as events: async for event in
        events``. A subscriber more than ``buffer`` events behind misses the newest
        (``Subscription.dropped`` counts them); the engine never waits for one.

        :raises ValueError: ``buffer`` is not a whole number of at least 1.
        """
        return self._hub.subscribe(buffer)

    def _supervised(self) -> list[CartridgeSlot]:
        """The cartridges with instances to watch: those added, and those draining."""
        return [*self._slots.values(), *self._draining]

    async def start(self, name: str) -> None:
        """Start a cartridge now, every replica of it (no-op for those running).

        :raises SpawnFailed: a start-up failed (the first replica's, in order).
        """
        await self._starter.each(self._slot(name), self._starter.ensure_started)

    async def restart(self, name: str) -> None:
        """Forget start-up failures and (re)start the cartridge's replicas, stopping those
        running first.

        :raises SpawnFailed: a start-up failed.
        """

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
        """Shut one cartridge down, every replica of it (a later call starts it again)."""
        slot = self._slot(name)
        async with anyio.create_task_group() as tg:
            for replica in slot.replicas:
                if replica.conn is not None:
                    tg.start_soon(replica.conn.close, self.config.shutdown_grace)

    def kill(self, name: str, *, replica: int | None = None) -> None:
        """Kill a cartridge's instances at once, or only replica ``replica`` (for tests and
        operators).

        :raises EngineError: no such cartridge or replica.
        """
        for one in self._replicas_of(self._slot(name), replica):
            if one.conn is not None:
                one.conn.kill("killed by the engine operator")

    def manifest(self, name: str) -> Any:
        """The :class:`~cartridge_runtime.manifest.Manifest` of a started cartridge, else the one
        given to :meth:`add_cartridge`, or ``None``."""
        return self._slot(name).manifest

    async def probe(self, name: str, *, replica: int = 0) -> bool:
        """Send one health probe now (to replica ``replica``, starting it if needed); returns
        whether it answered in time.

        :raises EngineError: no such cartridge or replica.
        :raises SpawnFailed: it cannot start.
        """
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

    def _caps_changed(self) -> None:
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
