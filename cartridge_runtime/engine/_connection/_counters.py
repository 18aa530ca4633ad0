"""The protocol statistics of an engine: one :class:`Counters`, shared by its connections."""

from __future__ import annotations


class Counters:
    """Protocol statistics, shared by all connections of one engine."""

    __slots__ = (
        "drops",
        "heartbeat_misses",
        "late_credits",
        "no_route",
        "protocol_errors",
        "respawns",
        "stragglers",
    )

    def __init__(self) -> None:
        self.drops = 0
        self.stragglers = 0
        self.no_route = 0
        self.protocol_errors = 0
        self.heartbeat_misses = 0
        self.respawns = 0
        self.late_credits = 0
