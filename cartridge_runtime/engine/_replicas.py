"""Replicas: the instances of one added cartridge, and which of them takes the next call.

A cartridge added with ``replicas=N`` is a :class:`CartridgeSlot` holding N :class:`Replica`
records, each with its own connection, start-up failure, start count and lock: a replica
starts, fails, dies and is respawned on its own, and its pools (the capacities its cartridge
declares) admit its own calls.

Choosing a replica (:meth:`CartridgeSlot.least_loaded`) looks only at connections that are
ready: the one with the fewest requests in flight and queued takes the call (ties go to the
lower index). Starting replicas is the engine's part (:meth:`CartridgeSlot.startable` says
which could start now).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import attrs

from ..protocol import ConnState
from ._connection._shell import Connection
from ._errors import SpawnFailed
from ._placements._seam import Placement, Target
from ._supervision._memory import resident_bytes

__all__ = ("CartridgeSlot", "Replica", "ReplicaStatus", "replica_state")

#: Load added to a replica whose last health probe went unanswered: it takes calls only when
#: every replica is in that state.
_UNHEALTHY = 1 << 30


@attrs.frozen(kw_only=True)
class ReplicaStatus:
    """A snapshot of one replica of a cartridge (see :attr:`CartridgeStatus.replicas`).

    :ivar index: 0, 1, ... in the order the replicas were declared.
    :ivar state: ``stopped``, ``starting``, ``running``, ``idle`` (stopped for want of calls,
        ``idle_timeout``), ``failed`` or ``dead`` (as for the cartridge).
    :ivar placement_id: who runs it (``pid 1234``, ``in-process NAME/1``...), while it runs.
    :ivar pid: its process id, when it is a local process and runs.
    :ivar in_flight: requests it is serving (calls and peer calls).
    :ivar queued: calls waiting for one of its pools.
    :ivar starts: how many times it was started.
    :ivar healthy: whether its last health probe was answered.
    :ivar last_error: why it last failed to start or died.
    :ivar returncode: its last exit status, if it ended.
    :ivar served: calls routed to it since the cartridge was added (every start of it).
    :ivar resident_memory: the resident memory of its process tree at the last sample, bytes
        (sampled only for a cartridge with a ``memory_limit``; ``None``: no figure).
    :ivar memory_enforcement: how its memory limit is enforced: ``watchdog`` (the engine's
        samples), ``watchdog+rlimit_as`` (also the process's address-space limit), or
        ``None``: no limit, or an instance without a figure of its own (in process).
    :ivar last_exit: how its last instance ended (died, stopped, idle, OOM-killed, retired),
        in words; ``None`` before any ended.
    """

    index: int
    state: str
    placement_id: str | None
    pid: int | None
    in_flight: int
    queued: int
    starts: int
    healthy: bool
    last_error: str | None
    returncode: int | None
    served: int = 0
    resident_memory: int | None = None
    memory_enforcement: str | None = None
    last_exit: str | None = None


class Replica:
    """One instance slot of a cartridge: its current connection and start-up record."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.conn: Connection | None = None
        self.failure: SpawnFailed | None = None
        self.failed_at = 0.0
        self.starts = 0
        self.lock = anyio.Lock()
        #: Calls routed to it, over every start.
        self.served = 0
        #: Resident memory of its process tree at the last sample, bytes.
        self.resident: int | None = None
        #: How its memory limit is enforced now (see :class:`ReplicaStatus`).
        self.enforcement: str | None = None
        #: Whether it was stopped for want of calls (until its next start).
        self.idle = False
        #: How its last instance ended, in words.
        self.last_exit: str | None = None
        #: Why the engine is ending it, while it does (the state its end is reported as).
        self.ending: str | None = None

    def status(self) -> ReplicaStatus:
        """A snapshot for :meth:`Engine.status`."""
        conn = self.conn
        state = replica_state(self)
        live = conn is not None and state in ("running", "starting")
        last_error = None
        if self.failure is not None:
            last_error = self.failure.message
        elif conn is not None and conn.death is not None:
            last_error = conn.death.message
        return ReplicaStatus(
            index=self.index,
            state=state,
            placement_id=conn.placement_id if conn is not None and live else None,
            pid=conn.pid if conn is not None and live else None,
            in_flight=conn.in_flight if conn is not None else 0,
            queued=conn.gate.queued if conn is not None else 0,
            starts=self.starts,
            healthy=conn.healthy if conn is not None and state == "running" else state != "failed",
            last_error=last_error,
            returncode=conn.returncode if conn is not None else None,
            served=self.served,
            resident_memory=self._resident(conn) if live else None,
            memory_enforcement=self.enforcement,
            last_exit=self.last_exit,
        )

    def _resident(self, conn: Connection | None) -> int | None:
        # A local process is read now (a few /proc files); one elsewhere was sampled by the
        # watchdog, which asks it every memory interval.
        if conn is not None and conn.pid is not None:
            return resident_bytes(conn.pid)
        return self.resident


def replica_state(replica: Replica) -> str:
    """``stopped``, ``starting``, ``running``, ``idle``, ``failed`` or ``dead``."""
    conn = replica.conn
    if conn is None:
        return "failed" if replica.failure else "stopped"
    if replica.idle and conn.core.gone:
        return "idle"
    state = conn.state
    if state is ConnState.READY or state is ConnState.CLOSING:
        return "running"
    if state is ConnState.STARTING:
        return "starting"
    if state is ConnState.FAILED:
        return "failed"
    died = conn.returncode not in (0, None) or (
        conn.death is not None and "died" in conn.death.message
    )
    return "dead" if died else "stopped"


class CartridgeSlot:
    """One added cartridge: where it runs, its target, and its replicas."""

    def __init__(
        self,
        name: str,
        *,
        placement: Placement,
        target: Target,
        replicas: int,
        env: Mapping[str, str] | None,
        known_caps: Sequence[str] | None,
        eager: bool,
        known_manifest: Any = None,
        memory_limit: int | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        self.name = name
        self.placement = placement
        self.target = target
        self.env = env
        self.known_caps: list[str] | None = list(known_caps) if known_caps is not None else None
        self.eager = eager
        #: A manifest known before any start (read from a discovery's cache), or None.
        self.known_manifest = known_manifest
        self.replicas = tuple(Replica(i) for i in range(replicas))
        #: Resident bytes past which an instance is killed (``None``: no limit).
        self.memory_limit = memory_limit
        #: Seconds without a call after which an instance is stopped (``None``: never).
        self.idle_timeout = idle_timeout
        #: Seconds a call to it may go without a frame, when set for this cartridge.
        self.activity_timeout: float | None = None
        #: Whether its calls' outputs are held to their media definitions (HST-24).
        self.check_outputs = True
        #: Replaced or removed: it takes no new call and starts no instance.
        self.retired = False
        #: A new version that replace_cartridge is starting, not routed yet: its caps are
        #: reported when routing moves to it, not at its start-up.
        self.standby = False
        #: Replaced by a new version: calls still waiting for one of its start-ups go there.
        self.replaced = False
        #: Calls routed to it that wait for an instance to start (a removal drains them).
        self.waiting = 0
        #: Metric name -> the sum of every value its handlers reported (all replicas, across
        #: restarts).
        self.metric_totals: dict[str, float] = {}
        #: The only replica of a cartridge that has one (the fast path of routing), else None.
        self.single: Replica | None = self.replicas[0] if replicas == 1 else None

    @property
    def command(self) -> tuple[str, ...]:
        return self.target.command

    @property
    def caps(self) -> list[str] | None:
        """Its caps: a started replica's manifest, else ``known_caps``."""
        for replica in self.replicas:
            conn = replica.conn
            if conn is not None and conn.manifest is not None:
                return conn.caps
        return self.known_caps

    @property
    def manifest(self) -> Any:
        """The manifest of a started replica, else the one known before any start, or ``None``."""
        for replica in self.replicas:
            conn = replica.conn
            if conn is not None and conn.manifest is not None:
                return conn.manifest
        return self.known_manifest

    def replica_of(self, conn: Connection) -> Replica | None:
        """The replica whose current connection is ``conn``."""
        for replica in self.replicas:
            if replica.conn is conn:
                return replica
        return None

    def least_loaded(self) -> Connection | None:
        """The ready connection with the fewest requests in flight and queued (healthy ones
        first, the lowest index among equals), or ``None`` when no replica is ready."""
        best: Connection | None = None
        best_load = 0
        for replica in self.replicas:
            conn = replica.conn
            if conn is not None and conn.ready:
                load = conn.in_flight + conn.gate.queued + (0 if conn.healthy else _UNHEALTHY)
                if best is None or load < best_load:
                    best, best_load = conn, load
        return best

    def startable(self, now: float, retry_after: float | None) -> list[Replica]:
        """Replicas not running nor starting that may start now (never started, stopped or
        dead, or failed longer than ``retry_after`` ago)."""
        out = []
        for replica in self.replicas:
            conn = replica.conn
            if conn is not None and not conn.core.gone:
                continue
            if replica.failure is not None and (
                retry_after is None or now - replica.failed_at < retry_after
            ):
                continue
            if replica.lock.locked():
                continue
            out.append(replica)
        return out
