"""What :meth:`Engine.status` and :meth:`Engine.stats` report: immutable snapshots."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._replicas import ReplicaStatus

__all__ = ("CartridgeStatus", "EngineStats")


@attrs.frozen(kw_only=True)
class CartridgeStatus:
    """A snapshot of one cartridge, as :meth:`Engine.status` reports it.

    ``state`` is ``stopped`` (never started or exited cleanly), ``starting``, ``running``,
    ``failed`` (its start-up failed; see ``last_error``) or ``dead`` (it died; the next call
    respawns it).

    With several replicas, ``state`` is the best of theirs (running, starting, dead, failed,
    stopped, in that order), ``in_flight``, ``queued`` and ``starts`` are their sums, the
    other fields are those of the first replica in that state, and ``replicas`` has each one.
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
