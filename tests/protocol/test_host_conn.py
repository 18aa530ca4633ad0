"""The host side of a connection, sans-IO (protocol/_host_startup.py, protocol/_host_conn.py):
start-up phases, connection states, routing by request id and health, all in memory without
IO (HSK-*, FLW-14)."""

from __future__ import annotations

import json
from typing import Any

import cbor2
import pytest

from cartridge_runtime.protocol import (
    CONN_TRANSITIONS,
    STARTUP_TRANSITIONS,
    ConnInput,
    ConnState,
    CreditDirection,
    Frame,
    FrameRefused,
    FrameType,
    HandshakeError,
    HostConnection,
    HostHandshake,
    IdentityCheck,
    IdentityCheckError,
    Limits,
    LocalProtocolError,
    MessageId,
    PeerRequest,
    ProbeAnswered,
    SendFrames,
    StartupInput,
    StartupPhase,
    StartupProgress,
    VersionMismatchError,
    frames,
)


class Counters:
    def __init__(self) -> None:
        self.drops = 0
        self.stragglers = 0
        self.late_credits = 0
        self.no_route = 0
        self.protocol_errors = 0
        self.heartbeat_misses = 0


class Flow:
    def __init__(self, xid: MessageId | None) -> None:
        self._xid = xid
        self.frames: list[Frame] = []

    @property
    def xid(self) -> MessageId | None:
        return self._xid

    def on_frame(self, frame: Frame) -> None:
        self.frames.append(frame)


class Origin:
    def __init__(self) -> None:
        self.frames: list[Frame] = []

    def on_requester_frame(self, frame: Frame) -> None:
        self.frames.append(frame)


def cartridge_hello(version: int = 6, **overrides: Any) -> Frame:
    meta: dict[str, Any] = Limits().to_meta()
    meta.update(version=version, manifest=b'{"name": "x"}', pools=b'{"all": {}}')
    meta.update(overrides)
    return Frame(frame_type=FrameType.HELLO, id=frames.policy("full").id, meta=meta)


def echo_of(request: list[Frame]) -> list[Frame]:
    """What a correct cartridge answers to the identity request: the nonce back."""
    rid = request[0].id
    payload = next(f.payload for f in request if f.frame_type is FrameType.CHUNK)
    assert payload is not None
    return [
        frames.stream_start(rid, "echo", "media:"),
        frames.chunk(rid, "echo", 0, payload),
        frames.stream_end(rid, "echo", 1),
        frames.end(rid),
    ]


def started(policy: str | None = "full") -> tuple[HostConnection[Flow, Origin], Counters]:
    counters = Counters()
    conn: HostConnection[Flow, Origin] = HostConnection(
        limits=Limits(), policy=policy, counters=counters, misses_to_kill=3
    )
    (hello,) = conn.start()
    assert hello.frame_type is FrameType.HELLO
    ev = conn.receive_frame(cartridge_hello())
    assert isinstance(ev, StartupProgress) and ev.phase is StartupPhase.IDENTITY
    assert ev.error is None and len(ev.frames) == 5
    assert conn.receive_frame(frames.heartbeat(MessageId.new())) is None  # not the echo
    for f in echo_of(list(ev.frames)):
        last = conn.receive_frame(f)
    assert last == StartupProgress(StartupPhase.MANIFEST)
    out = conn.accept_manifest()
    assert [f.frame_type for f in out] == ([FrameType.POLICY] if policy else [])
    conn.started()
    assert conn.state is ConnState.READY
    return conn, counters


# --------------------------------------------------------------------------- start-up


def test_handshake_walks_every_phase() -> None:
    hs = HostHandshake(Limits(max_chunk=1000), "offline")
    assert hs.phase is StartupPhase.NEW and not hs.reading
    (hello,) = hs.start()
    assert hello.meta is not None and hello.meta["version"] == 6
    assert hs.phase is StartupPhase.HELLO and hs.reading and hs.step == "hello"
    request = hs.receive(cartridge_hello())
    assert [f.frame_type for f in request] == [
        FrameType.REQ,
        FrameType.STREAM_START,
        FrameType.CHUNK,
        FrameType.STREAM_END,
        FrameType.END,
    ]
    assert hs.phase is StartupPhase.IDENTITY
    assert hs.limits.max_chunk == 1000 and hs.hello is not None
    assert hs.hello.pools == {"all": {}}
    # Frames of other requests during the echo are skipped.
    assert hs.receive(frames.heartbeat(MessageId.new())) == []
    for f in echo_of(request):
        assert hs.receive(f) == []
    assert hs.phase is StartupPhase.MANIFEST and not hs.reading
    (policy,) = hs.accept_manifest()
    assert policy.meta == {"network": "offline"}
    hs.delivered()
    assert hs.phase is StartupPhase.DONE


def test_handshake_without_policy_sends_none() -> None:
    hs = HostHandshake(Limits(), None)
    hs.start()
    for f in echo_of(hs.receive(cartridge_hello())):
        hs.receive(f)
    assert hs.accept_manifest() == []


@pytest.mark.parametrize(
    ("hello", "error"),
    [
        (cartridge_hello(version=5), VersionMismatchError),
        (cartridge_hello(manifest="not bytes"), HandshakeError),
        (cartridge_hello(pools=b"[1]"), HandshakeError),
        (frames.heartbeat(MessageId.new()), HandshakeError),
    ],
)
def test_a_bad_hello_fails_the_start_up(hello: Frame, error: type[Exception]) -> None:
    hs = HostHandshake(Limits(), "full")
    hs.start()
    with pytest.raises(error):
        hs.receive(hello)
    assert hs.phase is StartupPhase.FAILED and isinstance(hs.error, error)
    with pytest.raises(LocalProtocolError):
        hs.receive(cartridge_hello())


def test_a_wrong_echo_fails_the_start_up() -> None:
    hs = HostHandshake(Limits(), "full", IdentityCheck(nonce=b"n" * 32))
    hs.start()
    request = hs.receive(cartridge_hello())
    rid = request[0].id
    hs.receive(frames.stream_start(rid, "e", "media:"))
    hs.receive(frames.chunk(rid, "e", 0, cbor2.dumps(b"x" * 32)))
    hs.receive(frames.stream_end(rid, "e", 1))
    with pytest.raises(IdentityCheckError):
        hs.receive(frames.end(rid))
    assert hs.phase is StartupPhase.FAILED


@pytest.mark.parametrize("phase", list(StartupPhase))
@pytest.mark.parametrize("inp", list(StartupInput))
def test_every_startup_pair_moves_or_is_refused(phase: StartupPhase, inp: StartupInput) -> None:
    hs = HostHandshake(Limits(), "full")
    hs.phase = phase
    nxt = STARTUP_TRANSITIONS.get((phase, inp))
    if nxt is None:
        with pytest.raises(LocalProtocolError):
            hs._move(inp)
        assert hs.phase is phase
    else:
        hs._move(inp)
        assert hs.phase is nxt


def test_fail_is_a_no_op_once_done_or_failed() -> None:
    hs = HostHandshake(Limits(), "full")
    hs.fail()
    assert hs.phase is StartupPhase.FAILED
    hs.fail()
    hs.phase = StartupPhase.DONE
    hs.fail()
    assert hs.phase is StartupPhase.DONE


def test_start_up_failure_in_the_connection_is_an_event() -> None:
    counters = Counters()
    conn: HostConnection[Flow, Origin] = HostConnection(
        limits=Limits(), policy="full", counters=counters
    )
    conn.start()
    ev = conn.receive_frame(cartridge_hello(version=7))
    assert isinstance(ev, StartupProgress) and isinstance(ev.error, VersionMismatchError)
    conn.fail_startup()
    assert conn.state is ConnState.FAILED and conn.gone
    assert conn.ended() is ConnState.FAILED and conn.state is ConnState.FAILED


# --------------------------------------------------------------------------- life


@pytest.mark.parametrize("state", list(ConnState))
@pytest.mark.parametrize("inp", list(ConnInput))
def test_every_state_pair_moves_or_is_refused(state: ConnState, inp: ConnInput) -> None:
    conn: HostConnection[Flow, Origin] = HostConnection(
        limits=Limits(), policy=None, counters=Counters()
    )
    conn.state = state
    nxt = CONN_TRANSITIONS.get((state, inp))
    if nxt is None:
        with pytest.raises(LocalProtocolError):
            conn._move(inp)
        assert conn.state is state
    else:
        assert conn._move(inp) is state
        assert conn.state is nxt


def test_close_and_end() -> None:
    conn, _ = started()
    assert conn.begin_close() and conn.state is ConnState.CLOSING
    assert not conn.begin_close()
    assert conn.ended() is ConnState.CLOSING and conn.state is ConnState.DEAD
    assert conn.ended() is ConnState.DEAD


def test_frames_before_the_echo_belong_to_the_start_up() -> None:
    counters = Counters()
    conn: HostConnection[Flow, Origin] = HostConnection(
        limits=Limits(), policy="full", counters=counters
    )
    flow = Flow(None)
    rid = MessageId.new()
    conn.add_flow(rid, flow)
    conn.start()
    # A response frame before the cartridge's HELLO is not a HELLO: the start-up fails.
    ev = conn.receive_frame(frames.end(rid))
    assert isinstance(ev, StartupProgress) and ev.error is not None
    assert flow.frames == []


# --------------------------------------------------------------------------- routing


def test_response_frames_go_to_their_flow() -> None:
    conn, counters = started()
    xid = conn.next_xid()
    assert (xid.value, conn.next_xid().value) == (1, 2)
    rid = MessageId.new()
    flow = Flow(xid)
    conn.add_flow(rid, flow)
    for f in (frames.stream_start(rid, "s", "media:", xid=xid), frames.end(rid, xid=xid)):
        assert conn.receive_frame(f) is None
    assert [f.frame_type for f in flow.frames] == [FrameType.STREAM_START, FrameType.END]
    # CANCEL and CLOSE_STREAM are a requester's frames: never a response.
    assert conn.receive_frame(frames.cancel(rid, xid=xid)) is None
    assert counters.drops == 1 and len(flow.frames) == 2


def test_frames_of_a_flow_that_ended_are_late() -> None:
    conn, counters = started()
    rid = MessageId.new()
    conn.add_flow(rid, Flow(None))
    conn.forget(rid)
    conn.receive_frame(frames.credit(rid, 4, CreditDirection.REQUEST))
    conn.receive_frame(frames.end(rid))
    conn.receive_frame(frames.end(MessageId.new()))
    assert (counters.late_credits, counters.stragglers, counters.no_route) == (1, 1, 1)


def test_peer_calls_of_the_cartridge() -> None:
    conn, counters = started()
    rid = MessageId.new()
    req = frames.req(rid, "cap:in=media:;out=media:")
    ev = conn.receive_frame(req)
    assert ev == PeerRequest(req)
    origin = Origin()
    conn.add_origin(rid, origin)
    conn.receive_frame(frames.end(rid, response=False))
    conn.receive_frame(frames.cancel(rid))
    assert [f.frame_type for f in origin.frames] == [FrameType.END, FrameType.CANCEL]
    again = conn.receive_frame(req)
    assert isinstance(again, FrameRefused) and "second REQ" in again.reason
    assert counters.protocol_errors == 1
    flows, origins = conn.take_all()
    assert flows == [] and origins == [origin] and conn.origins == {}


def test_one_rid_both_ways_is_told_apart() -> None:
    # A cartridge calling itself reusing a rid: CREDIT by its direction, others by our xid.
    conn, _ = started()
    rid = MessageId.new()
    xid = conn.next_xid()
    flow, origin = Flow(xid), Origin()
    conn.add_flow(rid, flow)
    conn.add_origin(rid, origin)
    conn.receive_frame(frames.credit(rid, 1, CreditDirection.REQUEST))
    conn.receive_frame(frames.credit(rid, 1, CreditDirection.RESPONSE))
    conn.receive_frame(frames.end(rid, xid=xid))
    conn.receive_frame(frames.end(rid, response=False))
    conn.receive_frame(frames.cancel(rid, xid=xid))
    assert [f.frame_type for f in flow.frames] == [FrameType.CREDIT, FrameType.END]
    assert [f.frame_type for f in origin.frames] == [
        FrameType.CREDIT,
        FrameType.END,
        FrameType.CANCEL,
    ]


def test_frames_a_cartridge_may_not_send() -> None:
    conn, counters = started()
    ev = conn.receive_frame(frames.policy("offline"))
    assert isinstance(ev, FrameRefused) and "POLICY" in ev.reason
    assert (counters.drops, counters.protocol_errors) == (1, 1)
    # A second HELLO is dropped, not a protocol error of the host's counting.
    assert isinstance(conn.receive_frame(cartridge_hello()), FrameRefused)
    assert (counters.drops, counters.protocol_errors) == (2, 1)


# --------------------------------------------------------------------------- health


def test_the_cartridges_heartbeat_is_answered() -> None:
    conn, _ = started()
    hid = MessageId.new()
    assert conn.receive_frame(frames.heartbeat(hid)) == SendFrames((frames.heartbeat(hid),))


def test_a_probe_reply_is_matched_and_read() -> None:
    conn, counters = started()
    hid, probe = conn.probe()
    assert probe.frame_type is FrameType.HEARTBEAT and probe.id == hid
    reply = frames.heartbeat(hid, meta={"pools": json.dumps({"all": {}}).encode(), "rss": 7})
    assert conn.receive_frame(reply) == ProbeAnswered(hid, reply)
    report = conn.probe_answered(reply, 12.5, periodic=True)
    assert report.pools == {"all": {}} and report.stats == {"rss": 7} and report.refused is None
    assert conn.healthy and conn.last_heartbeat == 12.5 and conn.remote_stats == {"rss": 7}
    conn.probe_ended(hid)
    # A reply that comes after the probe ended is late: counted, never answered (answering
    # it would start a HEARTBEAT ping-pong with a cartridge that answers every HEARTBEAT).
    routed = counters.no_route
    assert conn.receive_frame(reply) is None
    assert conn.receive_frame(frames.heartbeat(hid)) is None  # bare, but the id was a probe
    assert counters.no_route == routed + 2
    bad = conn.read_reply(frames.heartbeat(hid, meta={"pools": b"not json"}))
    assert bad.pools is None and counters.protocol_errors == 1


def test_a_reply_shaped_heartbeat_of_an_unknown_id_is_not_answered() -> None:
    conn, counters = started()
    hid = MessageId.new()
    reply = frames.heartbeat(hid, meta={"pools": b"{}", "drops_total": 0})
    assert conn.receive_frame(reply) is None and counters.no_route == 1
    # A probe of the cartridge's own (no reply statistics) is still answered.
    other = MessageId.new()
    assert conn.receive_frame(frames.heartbeat(other)) == SendFrames((frames.heartbeat(other),))


def test_only_the_newest_ended_probes_are_remembered() -> None:
    conn, _ = started()
    first, _probe = conn.probe()
    conn.probe_ended(first)
    for _ in range(300):
        hid, _probe = conn.probe()
        conn.probe_ended(hid)
    # The oldest ended probe was forgotten: its bare HEARTBEAT counts as the cartridge's.
    assert conn.receive_frame(frames.heartbeat(first)) == SendFrames((frames.heartbeat(first),))
    assert conn.receive_frame(frames.heartbeat(hid)) is None


def test_a_refused_capacity_is_an_error_report() -> None:
    conn, _ = started()
    hid, _probe = conn.probe({"desired_capacities": b'{"nope": 1}'})
    err = frames.err(hid, "UNKNOWN_POOL", "no pool nope", "internal")
    assert conn.receive_frame(err) == ProbeAnswered(hid, err)
    report = conn.read_reply(err)
    assert report.refused is not None and report.refused.code == "UNKNOWN_POOL"


def test_periodic_misses_in_a_row_kill() -> None:
    conn, counters = started()
    assert not conn.probe_missed(periodic=False)  # a one-off probe never counts to the kill
    assert not conn.healthy and conn.misses == 0
    assert not conn.probe_missed(periodic=True)
    assert not conn.probe_missed(periodic=True)
    conn.probe_answered(frames.heartbeat(MessageId.new()), 1.0, periodic=True)
    assert conn.healthy and conn.misses == 0
    assert [conn.probe_missed(periodic=True) for _ in range(3)] == [False, False, True]
    assert counters.heartbeat_misses == 6
    conn.begin_close()
    assert not conn.probe_missed(periodic=True)  # only a ready cartridge is killed


def _counts(c: Counters) -> int:
    return c.drops + c.stragglers + c.late_credits + c.no_route + c.protocol_errors


@pytest.mark.parametrize("ft", list(FrameType))
@pytest.mark.parametrize("known", ["none", "flow", "origin", "ended"])
def test_no_frame_is_dropped_silently(ft: FrameType, known: str) -> None:
    # Whatever the frame and whoever knows its rid: it reaches an owner, comes back as an
    # event, or is counted.
    conn, counters = started()
    rid = MessageId.new()
    flow, origin = Flow(None), Origin()
    if known == "flow":
        conn.add_flow(rid, flow)
    elif known == "origin":
        conn.add_origin(rid, origin)
    elif known == "ended":
        conn.add_flow(rid, flow)
        conn.forget(rid)
    meta = {"network": "full"} if ft is FrameType.POLICY else None
    frame = Frame(frame_type=ft, id=rid, meta=meta)
    event = conn.receive_frame(frame)
    delivered = len(flow.frames) + len(origin.frames)
    assert delivered + (event is not None) + (_counts(counters) > 0) >= 1
    assert delivered <= 1
