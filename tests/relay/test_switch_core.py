"""The switch core without IO: the reference's relay scenarios, frames in and frames out."""

from __future__ import annotations

import cbor2
import pytest
from _relay_fakes import attach_healthy, echo_probe, new_req, notify, record

from cartridge_runtime.protocol import (
    IDENTITY_CAP,
    ErrorCode,
    Frame,
    FrameType,
    Limits,
    MessageId,
    NetworkPolicy,
    frames,
)
from cartridge_runtime.relay import (
    HOST_TRANSITIONS,
    HostAttachError,
    HostChanged,
    HostInput,
    HostState,
    RelayProtocolError,
    SwitchCore,
    ToApp,
    ToHost,
    relay_state,
)

ECHO = "cap:in=media:;op=echo;out=media:"


def host_frames(actions: list[object], host: str) -> list[Frame]:
    return [a.frame for a in actions if isinstance(a, ToHost) and a.host == host]


def app_frames(actions: list[object]) -> list[Frame]:
    return [a.frame for a in actions if isinstance(a, ToApp)]


# -- attach, POLICY first, the identity probe ----------------------------------------------------


def test_attach_sends_policy_first_then_the_identity_probe() -> None:
    core = SwitchCore(policy="no_telemetry")
    sent = core.attach("h1", notify(record("c", [ECHO])), 0.0)
    out = host_frames(sent, "h1")
    assert out[0].frame_type is FrameType.POLICY
    assert out[0].meta == {"network": "no_telemetry"}
    kinds = [f.frame_type for f in out[1:]]
    assert kinds == [
        FrameType.REQ,
        FrameType.STREAM_START,
        FrameType.CHUNK,
        FrameType.STREAM_END,
        FrameType.END,
    ]
    assert out[1].cap == IDENTITY_CAP
    assert isinstance(cbor2.loads(out[3].payload or b""), bytes)
    assert core.hosts()[0].state is HostState.PROBING


def test_caps_are_held_back_until_the_probe_passes() -> None:
    core = SwitchCore()
    sent = core.attach("h1", notify(record("c", [ECHO])), 0.0)
    refused = core.send(new_req(ECHO))
    assert app_frames(refused)[0].meta["code"] == ErrorCode.NO_HANDLER
    changes = echo_probe(core, "h1", sent)
    assert HostChanged("h1", HostState.HEALTHY) in changes
    routed = core.send(new_req(ECHO))
    assert [f.frame_type for f in host_frames(routed, "h1")] == [FrameType.REQ]


def test_a_host_without_caps_is_healthy_at_once_and_probed_when_caps_appear() -> None:
    core = SwitchCore()
    sent = core.attach("h1", notify(), 0.0)
    assert [f.frame_type for f in host_frames(sent, "h1")] == [FrameType.POLICY]
    assert core.hosts()[0].state is HostState.HEALTHY
    more = core.receive("h1", notify(record("c", [ECHO])), 1.0)
    assert core.hosts()[0].state is HostState.PROBING
    assert host_frames(more, "h1")[0].cap == IDENTITY_CAP
    echo_probe(core, "h1", more)
    assert core.hosts()[0].state is HostState.HEALTHY


@pytest.mark.parametrize("how", ["err", "mismatch", "timeout", "unexpected"])
def test_a_failed_probe_leaves_the_host_attached_but_unhealthy(how: str) -> None:
    core = SwitchCore()
    sent = core.attach("h1", notify(record("c", [ECHO])), 0.0)
    req = host_frames(sent, "h1")[1]
    rid, xid = req.id, req.routing_id
    if how == "err":
        out = core.receive("h1", frames.err(rid, "NO_HANDLER", "none", xid=xid))
    elif how == "mismatch":
        core.receive("h1", frames.chunk(rid, "o", 0, cbor2.dumps(b"other"), xid=xid))
        out = core.receive("h1", frames.end(rid, xid=xid))
    elif how == "timeout":
        assert core.next_deadline() == pytest.approx(10.0)
        assert core.handle_timer(5.0) == []
        out = core.handle_timer(10.0)
    else:
        out = core.receive("h1", frames.req(rid, ECHO, xid=xid))
    (changed,) = [a for a in out if isinstance(a, HostChanged)]
    assert changed.state is HostState.UNHEALTHY and changed.error
    view = core.hosts()[0]
    assert view.state is HostState.UNHEALTHY
    assert view.inventory.records[0].id == "c"  # the inventory is still shown
    assert app_frames(core.send(new_req(ECHO)))[0].meta["code"] == ErrorCode.NO_HANDLER
    assert not core.accepts_attach("h1")  # unhealthy, yet attached


def test_a_duplicate_id_is_refused_while_attached_and_reattached_in_place_after() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    with pytest.raises(HostAttachError, match="already attached"):
        core.attach("h1", notify(record("c", [ECHO])), 0.0)
    core.host_lost("h1")
    assert core.accepts_attach("h1")
    attach_healthy(core, "h1", record("c2", [ECHO]))
    (view,) = core.hosts()  # the same slot, not a second one
    assert view.attaches == 2 and view.state is HostState.HEALTHY
    assert view.inventory.records[0].id == "c2"


def test_a_relay_notify_that_cannot_be_read_is_refused() -> None:
    core = SwitchCore()
    meta = {"manifest": b"{", **Limits().to_meta()}
    bad = Frame(frame_type=FrameType.RELAY_NOTIFY, id=MessageId(0), meta=meta)
    with pytest.raises(RelayProtocolError, match="not JSON"):
        core.attach("h1", bad, 0.0)
    with pytest.raises(RelayProtocolError, match="expected RELAY_NOTIFY"):
        core.attach("h1", frames.policy("full"), 0.0)
    no_limits = Frame(frame_type=FrameType.RELAY_NOTIFY, id=MessageId(0), meta={"manifest": b"{}"})
    with pytest.raises(RelayProtocolError, match="limits"):
        core.attach("h1", no_limits, 0.0)
    channel = record("c", [ECHO])
    channel["channel"] = "beta"
    with pytest.raises(RelayProtocolError, match="channel"):
        core.attach("h1", notify(channel), 0.0)


# -- routing ---------------------------------------------------------------------------------


def test_routing_by_specificity_across_hosts_and_a_routing_id_per_request() -> None:
    core = SwitchCore()
    attach_healthy(core, "broad", record("b", ["cap:op=convert"]))
    attach_healthy(core, "exact", record("e", ["cap:op=convert;target=pdf"]))
    first = core.send(new_req("cap:op=convert;target=pdf"))
    second = core.send(new_req("cap:op=convert;target=pdf"))
    (a,) = host_frames(first, "exact")
    (b,) = host_frames(second, "exact")
    assert a.routing_id is not None and b.routing_id is not None
    assert a.routing_id != b.routing_id  # one routing id per routed request
    broad = core.send(new_req("cap:op=convert"))
    assert host_frames(broad, "broad")


def test_continuations_follow_the_route_and_responses_come_back_without_the_xid() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    req = new_req(ECHO)
    (sent,) = host_frames(core.send(req), "h1")
    xid = sent.routing_id
    body = core.send(frames.stream_start(req.id, "s", "media:"))
    assert host_frames(body, "h1")[0].routing_id == xid
    back = core.receive("h1", frames.stream_start(req.id, "o", "media:", xid=xid))
    assert app_frames(back)[0].routing_id is None
    # a response without the xid (a host's own ERR) finds its request by rid
    done = core.receive("h1", frames.err(req.id, "CARTRIDGE_DIED", "gone"))
    assert app_frames(done)[0].meta["code"] == "CARTRIDGE_DIED"
    assert core.live_requests == 0


def test_a_peer_call_crosses_hosts_and_its_response_returns_to_the_caller() -> None:
    core = SwitchCore()
    attach_healthy(core, "a", record("ca", ["cap:op=first"]))
    attach_healthy(core, "b", record("cb", ["cap:op=second"]))
    peer = frames.req(MessageId.new(), "cap:op=second")
    out = core.receive("a", peer)
    (forwarded,) = host_frames(out, "b")
    xid = forwarded.routing_id
    assert xid is not None
    body = core.receive("a", frames.stream_start(peer.id, "s", "media:"))
    assert host_frames(body, "b")[0].routing_id == xid
    assert forwarded.id != peer.id  # a fresh rid toward the destination
    reply = core.receive("b", frames.end(forwarded.id, xid=xid))
    (back,) = host_frames(reply, "a")
    assert back.frame_type is FrameType.END and back.id == peer.id
    assert app_frames(reply) == []


def test_stragglers_are_counted_apart_from_drops() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    req = new_req(ECHO)
    (sent,) = host_frames(core.send(req), "h1")
    core.receive("h1", frames.end(req.id, xid=sent.routing_id))
    assert core.receive("h1", frames.credit(req.id, 1, "request", xid=sent.routing_id)) == []
    assert core.send(frames.end(req.id, response=False)) == []
    assert core.stragglers == {"CREDIT": 1, "END": 1}
    core.receive("h1", frames.chunk(MessageId.new(), "s", 0, b"x", xid=MessageId(999)))
    assert core.drops == {"CHUNK": 1}


def test_a_cartridge_not_running_gets_one_call_at_a_time() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO], running=False))
    first, second = new_req(ECHO), new_req(ECHO)
    assert host_frames(core.send(first), "h1")
    assert core.send(second) == []  # held for admission
    assert core.send(frames.stream_start(second.id, "s", "media:")) == []
    xid = host_frames(core.send(frames.end(first.id, response=False)), "h1")[0].routing_id
    released = core.receive("h1", frames.end(first.id, xid=xid))
    kinds = [f.frame_type for f in host_frames(released, "h1")]
    assert kinds == [FrameType.REQ, FrameType.STREAM_START]
    assert app_frames(released)[0].frame_type is FrameType.END


def test_admission_holds_a_bounded_pool_and_a_held_cancel_ends_at_once() -> None:
    core = SwitchCore()
    caps = [IDENTITY_CAP, "cap:op=echo"]  # pools are named by canonical cap URNs
    pools = {c: {"declared": 1, "configured": 1, "active": 0, "queued": 0} for c in caps}
    pools["all"] = {"declared": 0, "configured": 0, "active": 0, "queued": 0, "caps": caps}
    attach_healthy(core, "h1", record("c", [ECHO], pools=pools))
    first, second = new_req(ECHO), new_req(ECHO)
    core.send(first)
    assert core.send(second) == []
    assert core.admitted("h1") == {"cap:op=echo": 1, "all": 1}
    out = core.send(frames.cancel(second.id, code="CANCELLED", message="stop"))
    assert app_frames(out)[0].meta["code"] == "CANCELLED"
    assert core.live_requests == 1


def test_a_pool_map_that_does_not_cover_the_cap_refuses_the_call() -> None:
    core = SwitchCore()
    pools = {"all": {"declared": 0, "configured": 0, "active": 0, "queued": 0, "caps": []}}
    attach_healthy(core, "h1", record("c", [ECHO], pools=pools))
    (err,) = app_frames(core.send(new_req(ECHO)))
    assert err.meta["code"] == ErrorCode.PROTOCOL_ERROR
    assert "no pool" in err.meta["message"]


def test_a_dead_host_ends_its_calls_with_a_typed_error_and_cancels_its_peer_calls() -> None:
    core = SwitchCore()
    attach_healthy(core, "a", record("ca", ["cap:op=first"]))
    attach_healthy(core, "b", record("cb", [ECHO]))
    call = new_req(ECHO)
    core.send(call)
    peer = frames.req(MessageId.new(), ECHO)
    core.receive("a", peer)
    out = core.host_lost("b")
    (err,) = app_frames(out)
    assert err.id == call.id
    assert err.meta["code"] == ErrorCode.MASTER_DIED
    assert err.meta["attribution_class"] == "environment"
    assert host_frames(out, "a")[0].meta["code"] == ErrorCode.MASTER_DIED
    assert HostChanged("b", HostState.DETACHED, "connection closed") in out
    # the caller's host going away cancels what it asked of others
    attach_healthy(core, "b", record("cb", [ECHO]))
    peer2 = frames.req(MessageId.new(), ECHO)
    core.receive("a", peer2)
    gone = core.host_lost("a")
    assert host_frames(gone, "b")[0].frame_type is FrameType.CANCEL
    assert core.live_requests == 0


# -- frames in the wrong direction -------------------------------------------------------------


@pytest.mark.parametrize(
    "frame", [frames.policy("full"), relay_state(b"x"), frames.hello(Limits())]
)
def test_frames_that_never_travel_toward_the_switch_are_refused(frame: Frame) -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    with pytest.raises(RelayProtocolError, match="never travels toward the switch"):
        core.receive("h1", frame)


def test_the_application_cannot_send_relay_frames() -> None:
    core = SwitchCore()
    with pytest.raises(RelayProtocolError):
        core.send(notify())


def test_policy_changes_reach_every_attached_host_once() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    attach_healthy(core, "h2")
    out = core.set_policy(NetworkPolicy.FULL)
    assert sorted(a.host for a in out if isinstance(a, ToHost)) == ["h1", "h2"]
    assert core.set_policy("full") == []


def test_every_state_and_input_pair_moves_or_is_ignored() -> None:
    for state in HostState:
        for what in HostInput:
            nxt = HOST_TRANSITIONS.get((state, what))
            assert nxt is None or isinstance(nxt, HostState)
    # every attached state can lose its link
    for state in (HostState.PROBING, HostState.HEALTHY, HostState.UNHEALTHY):
        assert HOST_TRANSITIONS[(state, HostInput.LINK_LOST)] is HostState.DETACHED


def test_the_applications_own_routing_id_does_not_misroute_its_body() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    req = frames.req(MessageId.new(), ECHO, xid=MessageId(1))
    (sent,) = host_frames(core.send(req), "h1")
    body = core.send(frames.stream_start(req.id, "s", "media:", xid=MessageId(1)))
    assert host_frames(body, "h1")[0].routing_id == sent.routing_id


def test_a_host_calling_itself_through_the_switch_keeps_both_directions_apart() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO, "cap:op=outer"]))
    peer = frames.req(MessageId.new(), ECHO)
    (sent,) = host_frames(core.receive("h1", peer), "h1")
    xid = sent.routing_id
    body_end = core.receive("h1", frames.end(peer.id, response=False))
    assert host_frames(body_end, "h1")[0].routing_id == xid
    assert core.live_requests == 1  # the body's END does not end the request
    assert sent.id != peer.id
    reply = core.receive("h1", frames.end(sent.id, xid=xid))
    (back,) = host_frames(reply, "h1")
    assert back.frame_type is FrameType.END and back.id == peer.id
    assert core.live_requests == 0


def test_a_cartridge_not_running_is_freed_by_its_first_answer_or_its_own_peer_call() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO, "cap:op=outer"], running=False))
    outer, second = new_req("cap:op=outer"), new_req(ECHO)
    assert host_frames(core.send(outer), "h1")
    assert core.send(second) == []  # held: one call at a time
    peer = frames.req(MessageId.new(), ECHO)
    out = core.receive("h1", peer)  # its peer call proves it runs: nothing waits any more
    routed = [f.id for f in host_frames(out, "h1") if f.frame_type is FrameType.REQ]
    assert len(routed) == 2 and second.id in routed  # the held call and the peer call


# -- the remembered routes follow every change of the hosts ------------------------------------


def where(core: SwitchCore, cap: str) -> tuple[str, str] | None:
    found = core.route(cap)
    return None if found is None else (found[0], found[2])


def test_a_remembered_route_follows_a_new_inventory_a_new_host_and_a_lost_one() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    assert where(core, ECHO) == ("h1", "c")  # asked twice: the second from memory
    assert where(core, ECHO) == ("h1", "c")
    core.receive("h1", notify(record("c", ["cap:in=media:;op=other;out=media:"])))
    assert where(core, ECHO) is None  # the new inventory no longer offers it
    core.receive("h1", notify(record("c", [ECHO])))
    assert where(core, ECHO) == ("h1", "c")
    wanted = "cap:in=media:;op=echo;out=media:;x=1"
    assert where(core, wanted) is None  # remembered as unroutable...
    attach_healthy(core, "h2", record("d", [wanted]))
    assert where(core, wanted) == ("h2", "d")  # ...until a host offering it attaches
    core.host_lost("h2")
    assert where(core, wanted) is None
    core.host_lost("h1")
    assert where(core, ECHO) is None


def test_a_frame_sent_with_its_number_goes_out_numbered_with_its_routing_id() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    req = new_req(ECHO)
    (out_req,) = host_frames(core.send(req, seq=0), "h1")
    body = frames.stream_start(req.id, "s", "media:")
    (out_body,) = host_frames(core.send(body, seq=1), "h1")
    assert (out_req.seq, out_body.seq) == (0, 1)
    assert out_req.routing_id is not None and out_body.routing_id == out_req.routing_id
    assert out_body.id == req.id and out_body.stream_id == "s"
    (unnumbered,) = host_frames(core.send(frames.end(req.id, seq=7)), "h1")
    assert unnumbered.seq == 2  # without seq=, a flow frame takes its flow's next number
