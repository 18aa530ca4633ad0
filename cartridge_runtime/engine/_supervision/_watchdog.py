"""The watchdog: the one engine task that looks at calls and instances on a timer and acts on
what the sans-IO judges decide (:mod:`._activity`, :mod:`._memory`, :mod:`._idle`).

Theory of operation
-------------------
The engine registers each call that has an activity timeout (:meth:`Watchdog.watch`) and tells
the watchdog when an instance starts or ends (:meth:`Watchdog.started`, :meth:`Watchdog.ended`).
The task sleeps until the earliest moment anything needs a look (a call's next quarter, the next
memory sample, an idle check), or until a registration needs an earlier look; then
:meth:`Watchdog.tick` judges everything due at ``now`` and acts: warns about or times out silent
calls, kills instances past their memory limit, stops idle ones. Nothing to watch, it sleeps
until woken. :meth:`tick` itself never waits, so it is tested with any ``now``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Sized
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc

from ..._report import ErrorCode
from ...protocol import trim_heap
from .._config import EngineConfig
from .._replicas import CartridgeSlot, Replica
from ._activity import Silence, Verdict, judge_silence
from ._errors import OutOfMemory
from ._idle import IdleRecord, judge_idle
from ._lifecycle import (
    CallStalled,
    CapsChanged,
    EventHub,
    InstanceChanged,
    InstanceState,
)
from ._memory import describe_bytes, memory_exceeded, resident_bytes, set_address_limit

if TYPE_CHECKING:
    from .._connection._shell import Connection

__all__ = ("Watchdog", "Watched")

log = logging.getLogger("cartridge_runtime.engine")

#: The shortest sleep between two looks, seconds: limits below it are looked at this often.
_MIN_STEP = 0.01


def _remote_figure(conn: Connection | None) -> Callable[[], Awaitable[int | None]] | None:
    """How an instance on another host reports its resident memory (``None``: it is local,
    in-process, or not running)."""
    if conn is None or conn.pid is not None:
        return None
    remote: Callable[[], Awaitable[int | None]] | None = getattr(
        conn.process, "resident_memory", None
    )
    return remote


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class Watched(Protocol):
    """What the activity watch needs of a call (an engine call, or a request relayed from a
    switch, served over a peer link)."""

    activity_limit: float | None
    silence: Any

    @property
    def frames(self) -> int:
        """Frames received for the call so far."""
        ...

    @property
    def events(self) -> Sized:
        """Events waiting unread by the caller."""
        ...

    @property
    def done(self) -> bool: ...

    @property
    def cap(self) -> str: ...

    @property
    def conn(self) -> _Named:
        """The connection serving the call (for its name)."""
        ...

    def expire_inactive(self, limit: float) -> None:
        """Cancel the call and fail it: silent for ``limit`` seconds."""
        ...


class Watchdog:
    """Activity, memory and idle supervision of one engine (see the module docstring).

    :param slots: the cartridges to supervise now (those added and those still draining).
    :param hub: where lifecycle events go.
    :param other_calls: calls in flight that no cartridge connection holds (those routed to
        a relay host), looked at for activity as well.
    """

    def __init__(
        self,
        *,
        config: EngineConfig,
        slots: Callable[[], Iterable[CartridgeSlot]],
        hub: EventHub,
        trim: Callable[[], object] = trim_heap,
        other_calls: Callable[[], Iterable[object]] = tuple,
    ) -> None:
        self.config = config
        self._slots = slots
        self._other_calls = other_calls
        self._hub = hub
        self._trim = trim
        #: Calls served (all replicas) at the last heap trim, and when the next is due.
        self._served_at_trim = 0
        self._next_trim = -math.inf
        #: An instance ended since the last trim (its buffers were freed).
        self._freed = False
        #: The shortest activity timeout of a call so far: calls are looked at each quarter
        #: of it (``inf``: no call had one yet).
        self._shortest = math.inf
        self._next_call_look = -math.inf
        self._idle: dict[Replica, IdleRecord] = {}
        #: Replicas whose remote memory figure is being asked for.
        self._asking: set[Replica] = set()
        self._next_sample = -math.inf
        #: When the task wakes next (``inf``: only when poked).
        self._wake = math.inf
        self._poke: anyio.Event | None = None
        #: Where stops run (the watchdog's own task group, while it runs).
        self._tg: anyio.abc.TaskGroup | None = None

    # -- registrations -----------------------------------------------------------------------

    def watch(self, state: Watched, limit: float) -> None:
        """Time ``state`` out after ``limit`` seconds without a frame. Nothing is registered:
        the looks find live calls in their connections; only a limit shorter than any seen
        before wakes the task, so that it looks often enough."""
        state.activity_limit = limit
        if limit < self._shortest:
            self._shortest = limit
            # The next look was planned at the old, longer step: look now, then at the new one.
            self._next_call_look = -math.inf
            self.poke()

    def poke(self) -> None:
        """Something may need a look sooner than planned: wake the task."""
        self._wake = -math.inf
        if self._poke is not None:
            self._poke.set()

    def started(self, slot: CartridgeSlot, replica: Replica, conn: Connection) -> None:
        """An instance of ``slot`` came up: limit its memory, report it."""
        replica.idle = False
        replica.ending = None
        limit = slot.memory_limit
        replica.enforcement = None
        pid = conn.pid
        measurable = pid is not None or hasattr(conn.process, "resident_memory")
        if limit is not None and measurable:  # an in-process instance has no figure of its own
            replica.enforcement = "watchdog"
            factor = self.config.memory_backstop
            if (
                factor is not None
                and pid is not None
                and set_address_limit(pid, int(limit * factor))
            ):
                replica.enforcement = "watchdog+rlimit_as"
            remote = getattr(conn.process, "limit_address_space", None)
            if factor is not None and pid is None and remote is not None and self._tg is not None:
                self._tg.start_soon(self._limit_remote, replica, conn, remote, int(limit * factor))
        now = anyio.current_time()
        if slot.idle_timeout is not None or limit is not None or _remote_figure(conn):
            self._idle.pop(replica, None)
        self.poke()  # at least the heap's trims now have something to look after
        state = InstanceState.STARTED if replica.starts == 1 else InstanceState.RESPAWNED
        self._emit_instance(slot, replica, state, conn.placement_id or "", now)

    def failed(self, slot: CartridgeSlot, replica: Replica, message: str) -> None:
        """A start-up of ``slot``'s instance failed."""
        self._emit_instance(
            slot, replica, InstanceState.FAILED, message.splitlines()[0], anyio.current_time()
        )

    def ended(self, slot: CartridgeSlot, replica: Replica, conn: Connection) -> None:
        """An instance of ``slot`` that had started ended: record and report how."""
        death = conn.death
        words = death.message.splitlines()[0] if death is not None else conn.exit_description
        ending = replica.ending
        replica.ending = None
        if ending is not None:
            state = InstanceState(ending)
            words = replica.last_exit or words
        elif (
            death is not None
            and death.code
            in (
                ErrorCode.CARTRIDGE_DIED,
                ErrorCode.CARTRIDGE_UNHEALTHY,
            )
            and " died " in death.message
        ):
            state = InstanceState.DIED
        else:
            state = InstanceState.STOPPED
        replica.last_exit = words
        replica.resident = None
        self._freed = True
        self._emit_instance(slot, replica, state, words, anyio.current_time())

    def caps_changed(
        self, slot: CartridgeSlot, before: Iterable[str], after: Iterable[str]
    ) -> None:
        """Report the caps ``slot`` gained and lost, if any."""
        if slot.standby:
            return
        old, new = list(before), list(after)
        added = tuple(c for c in new if c not in old)
        removed = tuple(c for c in old if c not in new)
        if (added or removed) and self._hub.active:
            self._hub.emit(
                CapsChanged(
                    cartridge=slot.name, added=added, removed=removed, at=anyio.current_time()
                )
            )

    def _emit_instance(
        self, slot: CartridgeSlot, replica: Replica, state: InstanceState, detail: str, now: float
    ) -> None:
        if self._hub.active:
            self._hub.emit(
                InstanceChanged(
                    cartridge=slot.name, replica=replica.index, state=state, detail=detail, at=now
                )
            )

    # -- the task ----------------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Look and act until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self._poke = anyio.Event()
            task_status.started()
            while True:
                wake = self.tick(anyio.current_time())
                self._wake = wake
                if not self._poke.is_set():
                    with anyio.CancelScope(deadline=wake):
                        await self._poke.wait()
                self._poke = anyio.Event()

    def tick(self, now: float) -> float:
        """Judge everything due at ``now`` and act; when the next look is due."""
        slots = list(self._slots())
        wake = self._look_at_calls(slots, now)
        if any(s.memory_limit is not None for s in slots) or any(
            _remote_figure(r.conn) is not None for s in slots for r in s.replicas
        ):
            if now >= self._next_sample:
                self._sample(slots)
                self._next_sample = now + self.config.memory_interval
            wake = min(wake, self._next_sample)
        for slot in slots:
            timeout = slot.idle_timeout
            if timeout is not None and not slot.retired:
                wake = min(wake, self._look_idle(slot, timeout, now))
        return min(wake, self._look_at_heap(slots, now))

    # -- the engine's own heap -----------------------------------------------------------------

    def _look_at_heap(self, slots: list[CartridgeSlot], now: float) -> float:
        """Trim this process's heap every ``heap_trim_interval`` after calls were served or an
        instance ended since the last trim; wake for it only while anything runs."""
        interval = self.config.heap_trim_interval
        if interval is None:
            return math.inf
        served = sum(r.served for s in slots for r in s.replicas)
        if now >= self._next_trim:
            if served != self._served_at_trim or self._freed:
                self._trim()
                self._served_at_trim, self._freed = served, False
            self._next_trim = now + interval
        running = any(
            r.conn is not None and not r.conn.core.gone for s in slots for r in s.replicas
        )
        return self._next_trim if running or self._freed else math.inf

    # -- calls ---------------------------------------------------------------------------------

    def _look_at_calls(self, slots: list[CartridgeSlot], now: float) -> float:
        if self._shortest == math.inf:
            return math.inf
        step = max(_MIN_STEP, self._shortest / 4)
        if now < self._next_call_look:
            return self._next_call_look
        self._next_call_look = now + step
        for slot in slots:
            for replica in slot.replicas:
                conn = replica.conn
                if conn is not None and conn.core.calls:
                    for flow in list(conn.core.calls.values()):
                        if getattr(flow, "activity_limit", None) is not None:
                            self._look_at_call(flow, now)  # type: ignore[arg-type]
        for call in list(self._other_calls()):
            if getattr(call, "activity_limit", None) is not None:
                self._look_at_call(call, now)  # type: ignore[arg-type]
        return self._next_call_look

    def _look_at_call(self, state: Watched, now: float) -> None:
        limit = state.activity_limit
        assert limit is not None
        record = state.silence
        if record is None:
            # First seen now, at most a look after it opened: timed out at most a look late.
            state.silence = Silence(limit=limit, frames=state.frames, since=now)
            return
        if state.done or now < record.next_look:
            return
        record, verdict = judge_silence(record, state.frames, bool(state.events), now)
        state.silence = record
        if verdict is Verdict.EXPIRE:
            log.warning(
                "%s: a call to %s sent no frame for %g s: timed out",
                state.conn.name,
                state.cap,
                record.limit,
            )
            state.expire_inactive(record.limit)
        elif verdict is Verdict.WARN and self._hub.active:
            self._hub.emit(
                CallStalled(
                    cartridge=state.conn.name,
                    cap=state.cap,
                    silent_for=record.silent_for(now),
                    limit=record.limit,
                    at=now,
                )
            )

    # -- memory --------------------------------------------------------------------------------

    def _sample(self, slots: list[CartridgeSlot]) -> None:
        # A local instance's figure is read when status() asks; one on another host (a Ray
        # actor) reads its own, so it is asked here for every such instance, limit or not.
        for slot in slots:
            limit = slot.memory_limit
            for replica in slot.replicas:
                conn = replica.conn
                if conn is None or conn.core.gone:
                    continue
                if conn.pid is None:
                    remote = _remote_figure(conn)
                    if remote is not None and self._tg is not None and replica not in self._asking:
                        self._asking.add(replica)
                        self._tg.start_soon(self._sample_remote, slot, replica, conn, remote)
                elif limit is not None:
                    self._judge_memory(slot, replica, conn, resident_bytes(conn.pid), limit)

    def _judge_memory(
        self,
        slot: CartridgeSlot,
        replica: Replica,
        conn: Connection,
        resident: int | None,
        limit: int,
    ) -> None:
        replica.resident = resident
        if memory_exceeded(resident, limit) and not conn.core.gone and replica.conn is conn:
            assert resident is not None
            self._kill_for_memory(slot, replica, conn, resident, limit)

    async def _sample_remote(
        self,
        slot: CartridgeSlot,
        replica: Replica,
        conn: Connection,
        remote: Callable[[], Awaitable[int | None]],
    ) -> None:
        try:
            resident = await remote()
        finally:
            self._asking.discard(replica)
        if slot.memory_limit is not None:
            self._judge_memory(slot, replica, conn, resident, slot.memory_limit)
        elif replica.conn is conn:
            replica.resident = resident

    async def _limit_remote(
        self,
        replica: Replica,
        conn: Connection,
        remote: Callable[[int], Awaitable[bool]],
        limit: int,
    ) -> None:
        if await remote(limit) and replica.conn is conn:
            replica.enforcement = "watchdog+rlimit_as"

    def _kill_for_memory(
        self, slot: CartridgeSlot, replica: Replica, conn: Connection, resident: int, limit: int
    ) -> None:
        message = (
            f"cartridge {slot.name} was killed: its memory ({describe_bytes(resident)} "
            f"resident) passed its limit of {describe_bytes(limit)}"
        )
        log.warning("%s", message)
        error = OutOfMemory(
            message, resident=resident, limit=limit, stderr_tail=conn.stderr_tail.strip()
        )
        # Out of routing now; its calls fail with OOM_KILLED before the kill, which would fail
        # them as a death.
        conn.core.begin_close()
        for flow in list(conn.core.calls.values()):
            flow.on_death(error)
        conn.gate.abort(error)
        replica.ending = InstanceState.OOM_KILLED
        replica.last_exit = message
        conn.kill(message)

    # -- idle ----------------------------------------------------------------------------------

    def _look_idle(self, slot: CartridgeSlot, timeout: float, now: float) -> float:
        wake = math.inf
        step = max(_MIN_STEP, timeout / 4)
        for replica in slot.replicas:
            conn = replica.conn
            if conn is None or not conn.ready:
                self._idle.pop(replica, None)
                continue
            record = self._idle.get(replica)
            if record is None:
                record = IdleRecord(served=replica.served, since=now)
            busy = conn.in_flight > 0 or conn.gate.queued > 0
            record, stop = judge_idle(record, replica.served, busy, now, timeout)
            if stop:
                self._idle.pop(replica, None)
                self._stop_idle(slot, replica, conn, timeout)
                continue
            self._idle[replica] = record
            wake = min(wake, now + step)
        return wake

    def _stop_idle(
        self, slot: CartridgeSlot, replica: Replica, conn: Connection, timeout: float
    ) -> None:
        replica.idle = True
        replica.ending = InstanceState.IDLE
        replica.last_exit = f"stopped after {timeout:g} s without a call"
        # Closing now, synchronously, takes it out of routing before any call can pick it.
        conn.core.begin_close()
        if self._tg is not None:
            self._tg.start_soon(conn.close, self.config.shutdown_grace)
