"""The host's side of a relay link without IO: POLICY before routing, RELAY_STATE kept, frames
in the wrong direction refused, requests and peer calls told apart."""

from __future__ import annotations

import pytest

from cartridge_runtime.protocol import (
    ErrorCode,
    FrameType,
    Limits,
    LocalProtocolError,
    MessageId,
    NetworkPolicy,
    frames,
)
from cartridge_runtime.relay import (
    Absorbed,
    ForPeerCall,
    ForRequest,
    HostLink,
    OpenRequest,
    PolicyChanged,
    Refuse,
    RelayProtocolError,
    StateKept,
    Unrouted,
    encode_inventory,
    read_relay_notify,
    relay_notify,
    relay_state,
)

ECHO = "cap:in=media:;op=echo;out=media:"


def test_a_req_before_any_policy_is_refused_with_protocol_violation() -> None:
    link = HostLink()
    req = frames.req(MessageId.new(), ECHO, xid=MessageId(7))
    event = link.receive(req)
    assert isinstance(event, Refuse)
    assert event.reply.frame_type is FrameType.ERR
    assert event.reply.meta["code"] == ErrorCode.PROTOCOL_VIOLATION
    assert event.reply.meta["attribution_class"] == "internal"
    assert event.reply.routing_id == MessageId(7)
    assert link.receive(frames.policy("full")) == PolicyChanged(NetworkPolicy.FULL)
    assert link.receive(req) == OpenRequest(req)


def test_relay_state_is_kept_and_never_forwarded() -> None:
    link = HostLink()
    assert link.receive(relay_state(b"\x01\x02")) == StateKept(b"\x01\x02")
    assert link.state == b"\x01\x02"


@pytest.mark.parametrize("frame", [frames.hello(Limits()), relay_notify(b"{}", Limits())])
def test_hello_and_relay_notify_from_the_switch_break_the_link(frame: object) -> None:
    with pytest.raises(RelayProtocolError, match="never travels to a host"):
        HostLink().receive(frame)  # type: ignore[arg-type]


@pytest.mark.parametrize("frame", [frames.policy("full"), relay_state(b""), frames.hello(Limits())])
def test_policy_relay_state_and_hello_never_go_toward_the_switch(frame: object) -> None:
    with pytest.raises(LocalProtocolError, match="never travels toward the switch"):
        HostLink().sending(frame)  # type: ignore[arg-type]


def test_heartbeat_and_log_from_the_switch_are_absorbed() -> None:
    link = HostLink()
    hb = frames.heartbeat(MessageId.new())
    assert link.receive(hb) == Absorbed(hb)


def test_requests_and_peer_calls_are_told_apart_and_stragglers_counted() -> None:
    link = HostLink()
    link.receive(frames.policy("offline"))
    req = frames.req(MessageId.new(), ECHO, xid=MessageId(1))
    link.receive(req)
    chunk = frames.chunk(req.id, "s", 0, b"x", xid=MessageId(1))
    assert link.receive(chunk) == ForRequest(chunk)
    again = link.receive(req)
    assert isinstance(again, Refuse)  # a second REQ with an open id
    link.sending(frames.end(req.id, xid=MessageId(1)))
    assert link.open_requests == 0
    late = link.receive(chunk)
    assert late == Unrouted(chunk, straggler=True)
    unknown = frames.chunk(MessageId.new(), "s", 0, b"x")
    assert link.receive(unknown) == Unrouted(unknown, straggler=False)
    assert (link.stragglers, link.drops) == (1, 1)
    peer = frames.req(MessageId.new(), "cap:op=other")
    link.sending(peer)
    reply = frames.end(peer.id, xid=MessageId(9))
    assert link.receive(reply) == ForPeerCall(reply)
    assert isinstance(link.receive(reply), Unrouted)  # ended by its terminal


def test_the_inventory_is_announced_again_only_when_it_changed() -> None:
    link = HostLink()
    manifest = encode_inventory([])
    first = link.announce(manifest, Limits())
    assert first is not None and first.frame_type is FrameType.RELAY_NOTIFY
    assert link.announce(manifest, Limits()) is None
    assert link.announce(manifest, Limits(max_chunk=1000)) is not None
    assert link.announce(manifest, Limits(max_chunk=1000), force=True) is not None
    inventory, limits = read_relay_notify(first)
    assert inventory.records == () and limits == Limits()


def test_relay_notify_bytes_match_the_reference_layout() -> None:
    frame = relay_notify(b'{"installed_cartridges": []}', Limits())
    assert list(frame.meta) == [
        "manifest",
        "max_frame",
        "max_chunk",
        "max_reorder_buffer",
        "initial_credit",
    ]
    assert frame.id == MessageId(0) and frame.seq == 0


def _recorded_notifies() -> list[bytes]:
    from _frame_vectors import load, vector_files

    found = []
    for path in vector_files():
        for vf in load(path):
            if vf.type == "RELAY_NOTIFY" and vf.raw is not None:
                found.append(vf.raw)
    return found


def test_every_recorded_relay_notify_reads_and_is_rebuilt_byte_for_byte() -> None:
    from cartridge_runtime.protocol import decode_frame, encode_frame

    recorded = _recorded_notifies()
    assert len(recorded) >= 3
    for raw in recorded:
        frame = decode_frame(raw)
        inventory, limits = read_relay_notify(frame)
        assert inventory.records and inventory.records[0].id == "peer-vectors"
        assert "cap:peer-echo" in inventory.caps
        rebuilt = relay_notify(frame.meta["manifest"], limits)
        assert encode_frame(rebuilt) == raw
