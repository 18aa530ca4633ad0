"""Opening one call: route its cap (to a cartridge of this engine, else to a cartridge host),
start the cartridge when needed, fit the inputs to the cap's definition, wait for admission,
then start the call's state with its observers, output checks and activity watch.

The engine hands :meth:`CallOpener.open` to every :class:`~._response.CallContext`; it is the
only way a call of the engine's own reaches a cartridge.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..protocol import AttributionClass, ErrorCode
from ._arguments import plan_call_inputs
from ._call import CallState
from ._config import EngineConfig
from ._errors import CallError, EngineClosed, NoRoute
from ._hosts import Hosts
from ._life import EngineLife
from ._observe import CallObserver, observe_call
from ._output_check import OutputChecks
from ._replica_start import ReplicaStarter
from ._replicas import CartridgeSlot
from ._routing import CapRouter
from ._supervision._activity import activity_limit
from ._supervision._errors import CartridgeRetired
from ._supervision._watchdog import Watchdog

if TYPE_CHECKING:
    from ._relay._switch import HostCallLink

__all__ = ("CallOpener",)

log = logging.getLogger("cartridge_runtime.engine")

#: Times one call is routed again when the instance it was given stopped under it (retired
#: or idle-stopped between routing and sending).
_REROUTES = 4
#: Cap definitions whose activity timeout is remembered, at most.
_LIMITS_KEPT = 256


class CallOpener:
    """Opens the engine's calls (see the module's docstring). It holds the engine's parts it
    needs, never the engine."""

    def __init__(
        self,
        *,
        config: EngineConfig,
        life: EngineLife,
        slots: Mapping[str, CartridgeSlot],
        router: CapRouter,
        starter: ReplicaStarter,
        hosts: Hosts,
        watchdog: Watchdog,
        observers: list[CallObserver],
    ) -> None:
        self.config = config
        self._life = life
        self._slots = slots
        self._router = router
        self._starter = starter
        self._hosts = hosts
        self._watchdog = watchdog
        #: The engine's call observers (the engine's own list: ``add_observer`` appends).
        self._observers = observers
        #: Output checks by the media_defs list of a manifest (HST-24), and whether the
        #: application gave definitions of its own.
        self._checks: dict[int, tuple[tuple[Any, ...], OutputChecks]] = {}
        #: The activity timeout a cap definition's metadata gives, by definition (kept with
        #: it, so that a reused id never matches).
        self._limits: dict[int, tuple[Any, float | None]] = {}
        self._media = bool(config.media)
        # The config is frozen: what each call reads of it, read once.
        self._grace = config.cancel_grace
        self._max_logs = config.max_pending_logs
        self._activity = config.activity_timeout

    async def open(
        self, cap: str, inputs: list[tuple[str, Any]], activity_timeout: float | None = None
    ) -> CallState:
        """Route, admit and start one call to ``cap``.

        :raises EngineClosed: the engine was closed.
        :raises NoRoute: no cartridge of this engine or of a host serves ``cap``.
        :raises CallError: the cartridge chosen died, or cannot start.
        """
        if self._life.closed:
            raise EngineClosed()
        for _ in range(_REROUTES):
            hit = self._router.cache.get(cap)
            if hit is None and self._hosts.links:
                on_host = self._host_only(cap)
                if on_host is not None:
                    return self._open_on_host(cap, inputs, activity_timeout, *on_host)
            try:
                slot, handler = hit if hit is not None else await self._router.resolve(cap)
            except NoRoute as exc:
                on_host = self._hosts.link_for(cap)
                if on_host is None:
                    hosts = self._hosts.described()
                    if hosts:  # say why no host took it either
                        raise NoRoute(f"{exc.message}; {hosts}") from None
                    raise
                return self._open_on_host(cap, inputs, activity_timeout, *on_host)
            single = slot.single
            conn = single.conn if single is not None else None
            if conn is None or not conn.ready:
                try:
                    conn = await self._starter.connection(slot)
                except CartridgeRetired:
                    continue  # replaced or removed meanwhile: route again
            definition = conn.definition(handler)
            if definition is not None:  # before anything is sent, even the REQ
                inputs = plan_call_inputs(cap, definition, inputs)
            gate = conn.gate
            chain = gate.try_acquire(handler)  # a free slot: taken without a coroutine
            if chain is None:
                chain = await gate.acquire(handler)
            # A removed cartridge still serves, during its drain, the calls that waited for it;
            # a replaced one sends them to its new version.
            if conn.ready and not slot.replaced:
                break
            conn.gate.release(chain)
            replica = slot.replica_of(conn)
            if slot.retired or (replica is not None and replica.ending is not None):
                continue  # retired or stopped idle under the call: route again
            raise conn.death or CallError(
                ErrorCode.CARTRIDGE_DIED,
                AttributionClass.ENVIRONMENT,
                f"cartridge {slot.name} died",
            )
        else:
            raise CartridgeRetired(f"cartridge {slot.name} kept being retired under the call")
        return self._start(
            cap, inputs, activity_timeout, slot, single, handler, conn, definition, chain
        )

    def open_now(
        self, cap: str, inputs: list[tuple[str, Any]], activity_timeout: float | None = None
    ) -> CallState | None:
        """:meth:`open` without a coroutine when nothing must wait: ``cap`` routed already to
        a cartridge of one ready instance with a free pool slot. ``None``, with nothing done,
        otherwise: then :meth:`open` it.

        :raises ArgumentError: as :meth:`open` (the inputs do not fit the cap's definition).
        """
        hit = self._router.cache.get(cap)
        if hit is None or self._life.closed:
            return None
        slot, handler = hit
        single = slot.single
        conn = single.conn if single is not None else None
        if conn is None or not conn.ready or slot.replaced:
            return None
        definition = conn.definition(handler)
        if definition is not None:  # before anything is sent, even the REQ
            inputs = plan_call_inputs(cap, definition, inputs)
        chain = conn.gate.try_acquire(handler)
        if chain is None:
            return None
        return self._start(
            cap, inputs, activity_timeout, slot, single, handler, conn, definition, chain
        )

    def _start(
        self,
        cap: str,
        inputs: list[tuple[str, Any]],
        activity_timeout: float | None,
        slot: CartridgeSlot,
        single: Any,
        handler: str,
        conn: Any,
        definition: Any,
        chain: Any,
    ) -> CallState:
        """Start an admitted call on ``conn`` (of ``slot``'s only replica ``single``, or of
        one of its replicas) with its observers, output checks and activity watch."""
        state = CallState(
            conn,
            cap=cap,
            handler_cap=handler,
            inputs=inputs,
            chain=chain,
            cancel_grace=self._grace,
            max_pending_logs=self._max_logs,
        )
        if self._observers:
            state.observation = observe_call(self._observers, state, slot.name)
        if (self._media or conn.manifest_media) and slot.check_outputs:
            state.output_checks = self._output_checks(conn.manifest_media)
        state.start()
        replica = single if single is not None else slot.replica_of(conn)
        if replica is not None:
            replica.served += 1
        if activity_timeout is None:
            activity_timeout = slot.activity_timeout
        if activity_timeout is None and (definition is None or not definition.metadata):
            limit = self._activity  # the common case, without a call
        elif activity_timeout is None:  # the cap's own: the same for each call to it
            known = self._limits.get(id(definition))
            if known is not None and known[0] is definition:
                limit = known[1]
            else:
                limit = self.activity_limit(None, definition, slot.name)
                if len(self._limits) >= _LIMITS_KEPT:
                    self._limits.clear()
                self._limits[id(definition)] = (definition, limit)
        else:
            limit = self.activity_limit(activity_timeout, definition, slot.name)
        if limit is not None and not state.done:
            self._watchdog.watch(state, limit)
        return state

    def activity_limit(
        self, per_call: float | None, definition: Any, cartridge: str
    ) -> float | None:
        """The activity timeout of a call to ``definition``'s cap of ``cartridge``: the call's
        own, else the cap's metadata, else the engine's (a bad metadata value is logged and
        the engine's taken)."""
        metadata = definition.metadata if definition is not None else None
        try:
            return activity_limit(per_call, metadata, self.config.activity_timeout)
        except ValueError as exc:
            log.warning("cartridge %s: cap %s: %s", cartridge, definition.urn, exc)
            return self.config.activity_timeout

    def host_calls(self) -> Iterable[object]:
        """The calls in flight through hosts, for the activity watch."""
        return self._hosts.flows().values()

    def _output_checks(self, shipped: tuple[Any, ...]) -> OutputChecks | None:
        """The definitions a cartridge's outputs are held to: the application's, then those
        its manifest ships (kept per manifest list, which the cache holds alive)."""
        if not self.config.check_outputs:
            return None
        hit = self._checks.get(id(shipped))
        if hit is None or hit[0] is not shipped:
            hit = self._checks[id(shipped)] = (shipped, OutputChecks(self.config.media, shipped))
        return hit[1] or None

    def _host_only(self, cap: str) -> tuple[HostCallLink, str] | None:
        """Where ``cap`` goes among the hosts when no cartridge of this engine serves it and
        none could (every cartridge's caps are known): found without starting anything or
        raising :class:`NoRoute` first."""
        if any(slot.caps is None for slot in self._slots.values()):
            return None
        if self._router.lookup(cap) is not None:
            return None
        return self._hosts.link_for(cap)

    def _open_on_host(
        self,
        cap: str,
        inputs: list[tuple[str, Any]],
        activity_timeout: float | None,
        link: HostCallLink,
        handler: str,
    ) -> CallState:
        state = CallState(
            link,
            cap=cap,
            handler_cap=handler,
            inputs=inputs,
            chain=link.gate.chain(handler),
            cancel_grace=self.config.cancel_grace,
            max_pending_logs=self.config.max_pending_logs,
        )
        if self._observers:
            state.observation = observe_call(self._observers, state, link.name)
        state.start()
        limit = self.config.activity_timeout if activity_timeout is None else activity_timeout
        if limit is not None and limit != math.inf and not state.done:
            self._watchdog.watch(state, limit)
        return state
