"""What :meth:`Engine.status` and :meth:`Engine.stats` report: immutable snapshots."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ._replicas import CartridgeSlot, ReplicaStatus

__all__ = ("CartridgeStatus", "EngineStats", "cartridge_status")


@attrs.frozen(kw_only=True)
class CartridgeStatus:
    """A snapshot of one cartridge, as :meth:`Engine.status` reports it.

    ``state`` is ``stopped`` (never started or exited cleanly), ``starting``, ``running``,
    ``idle`` (stopped after its ``idle_timeout`` without calls; the next call starts it),
    ``failed`` (its start-up failed; see ``last_error``) or ``dead`` (it died; the next call
    respawns it).

    With several replicas, ``state`` is the best of theirs (running, starting, dead, failed,
    stopped, in that order), ``in_flight``, ``queued`` and ``starts`` are their sums, the
    other fields are those of the first replica in that state, and ``replicas`` has each one
    (``served`` and ``resident_memory`` are sums too).

    :ivar memory_limit: resident bytes past which an instance is killed (``None``: none).
    :ivar idle_timeout: seconds without a call after which an instance stops (``None``: never).
    :ivar activity_timeout: this cartridge's own activity timeout (``None``: its caps' or the
        engine's).
    """

    name: str
    command: tuple[str, ...]
    state: str
    pid: int | None
    healthy: bool
    caps: tuple[str, ...]
    in_flight: int
    queued: int
    starts: int
    last_error: str | None
    returncode: int | None
    stderr_tail: str
    log_path: str
    last_heartbeat: float | None
    remote_stats: Mapping[str, Any]
    pools: Mapping[str, Mapping[str, int]]
    #: Metric name -> the sum of the values its handlers reported (``req.metric``), over
    #: every process of this cartridge since it was added.
    metrics: Mapping[str, float] = attrs.field(factory=dict)
    replicas: tuple[ReplicaStatus, ...] = ()
    served: int = 0
    resident_memory: int | None = None
    memory_limit: int | None = None
    memory_enforcement: str | None = None
    idle_timeout: float | None = None
    activity_timeout: float | None = None
    last_exit: str | None = None
    #: The cartridge host serving it through the engine's relay switch (``add_host``);
    #: ``None`` for the engine's own cartridges. Its ``name`` is then ``HOST/CARTRIDGE``.
    host: str | None = None


@attrs.frozen(kw_only=True)
class EngineStats:
    """Protocol statistics over all cartridges of an engine.

    :ivar drops: frames dropped (sent to a dead cartridge, unexpected types, full queues).
    :ivar stragglers: frames of a flow that had already ended.
    :ivar no_route: frames whose request id nobody knows, and calls/peer calls with no cartridge.
    :ivar protocol_errors: protocol violations seen (bad frames, missing xid, bad responses).
    :ivar heartbeat_misses: health probes that got no reply in time.
    :ivar respawns: cartridges started again after a death.
    :ivar late_credits: CREDIT frames that arrived after their request ended (harmless).
    """

    drops: int
    stragglers: int
    no_route: int
    protocol_errors: int
    heartbeat_misses: int
    respawns: int
    late_credits: int


#: Cartridge states from best to worst, for a cartridge's state over its replicas.
_STATE_ORDER = ("running", "starting", "idle", "dead", "failed", "stopped")


def cartridge_status(slot: CartridgeSlot) -> CartridgeStatus:
    """The snapshot of one cartridge over its replicas (see :class:`CartridgeStatus`)."""
    replicas = tuple(r.status() for r in slot.replicas)
    state = min((r.state for r in replicas), key=_STATE_ORDER.index)
    first = next(r for r in replicas if r.state == state)
    conn = slot.replicas[first.index].conn
    return CartridgeStatus(
        name=slot.name,
        command=tuple(slot.command),
        state=state,
        pid=first.pid,
        healthy=all(r.healthy for r in replicas if r.state == "running")
        if state == "running"
        else state != "failed",
        caps=tuple(slot.caps or ()),
        in_flight=sum(r.in_flight for r in replicas),
        queued=sum(r.queued for r in replicas),
        starts=sum(r.starts for r in replicas),
        last_error=first.last_error,
        returncode=first.returncode,
        stderr_tail=conn.stderr_tail if conn is not None else "",
        log_path=str(conn.log_path) if conn is not None else "",
        last_heartbeat=conn.last_heartbeat if conn is not None else None,
        remote_stats=dict(conn.remote_stats) if conn is not None else {},
        pools=conn.gate.snapshot() if conn is not None else {},
        replicas=replicas,
        metrics=dict(slot.metric_totals),
        served=sum(r.served for r in replicas),
        resident_memory=_sum_known(r.resident_memory for r in replicas),
        memory_limit=slot.memory_limit,
        memory_enforcement=first.memory_enforcement,
        idle_timeout=slot.idle_timeout,
        activity_timeout=slot.activity_timeout,
        last_exit=first.last_exit,
    )


def _sum_known(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
