"""Seq numbering is the connection cores' rule: each core numbers what its side sends, per
(rid, xid) flow, and refuses (and counts) a flow frame after the flow's terminal."""

from __future__ import annotations

from cartridge_runtime.protocol import (
    DEFAULT_LIMITS,
    CartridgeConnection,
    Frame,
    HostConnection,
    MessageId,
    frames,
)


class _Counters:
    def __init__(self) -> None:
        self.drops = 0
        self.stragglers = 0
        self.late_credits = 0
        self.no_route = 0
        self.protocol_errors = 0
        self.heartbeat_misses = 0


def _response(rid: MessageId, xid: MessageId | None = None) -> list[Frame]:
    return [
        frames.stream_start(rid, "s", "media:", xid=xid),
        frames.chunk(rid, "s", 0, b"x", xid=xid),
        frames.stream_end(rid, "s", 1, xid=xid),
        frames.end(rid, xid=xid),
    ]


def test_the_host_core_numbers_per_flow_and_counts_its_stragglers() -> None:
    counters = _Counters()
    core: HostConnection[object, object] = HostConnection(  # type: ignore[type-var]
        limits=DEFAULT_LIMITS, policy=None, counters=counters
    )
    a, b = MessageId.new(), MessageId.new()
    numbers = [
        core.seq.number(f) for pair in zip(_response(a), _response(b), strict=True) for f in pair
    ]
    assert numbers == [0, 0, 1, 1, 2, 2, 3, 3]
    assert core.seq.number(frames.chunk(a, "s", 2, b"late")) is None
    assert counters.stragglers == 1
    assert core.seq.number(frames.heartbeat(MessageId.new())) == 0


def test_the_cartridge_core_numbers_per_rid_and_xid() -> None:
    conn: CartridgeConnection[str] = CartridgeConnection(
        limits=DEFAULT_LIMITS,
        handlers=None,  # type: ignore[arg-type]
        pools=None,  # type: ignore[arg-type]
        manifest=b"{}",
        max_open_requests=1,
    )
    rid = MessageId.new()
    one, two = MessageId(1), MessageId(2)
    assert [conn.seq.number(f) for f in _response(rid, one)] == [0, 1, 2, 3]
    assert [conn.seq.number(f) for f in _response(rid, two)] == [0, 1, 2, 3]
    assert conn.seq.number(frames.end(rid, xid=one)) is None
    assert conn.seq.stragglers == 1
