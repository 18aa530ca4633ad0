"""The switch core's fast path for responses (``SwitchCore.response_for_app``): it passes a
frame exactly when :meth:`SwitchCore.receive` would hand that frame to the application and
do nothing else, and refuses every other case, which then goes through ``receive``."""

from __future__ import annotations

import attrs
from _relay_fakes import attach_healthy, new_req, record

from cartridge_runtime.protocol import Frame, FrameType, MessageId, frames
from cartridge_runtime.relay import SwitchCore, ToApp, ToHost

ECHO = "cap:in=media:;op=echo;out=media:"


def _routed(core: SwitchCore, host: str = "h1") -> tuple[MessageId, MessageId]:
    req = new_req(ECHO)
    (sent,) = [a.frame for a in core.send(req) if isinstance(a, ToHost) and a.host == host]
    assert sent.routing_id is not None
    return req.id, sent.routing_id


def _response(rid: MessageId, xid: MessageId | None) -> list[Frame]:
    return [
        frames.stream_start(rid, "o", "media:", xid=xid),
        frames.chunk(rid, "o", 0, b"x", xid=xid, seq=1),
        frames.stream_end(rid, "o", 1, xid=xid, seq=2),
        frames.log(rid, "info", "note", xid=xid, seq=3),
        frames.end(rid, xid=xid, seq=4),
    ]


def _agrees(core: SwitchCore, host: str, frame: Frame) -> Frame | None:
    """``response_for_app`` (which changes nothing), checked against ``receive`` after it."""
    fast = core.response_for_app(host, frame)
    actions = core.receive(host, frame)
    if fast is not None:
        assert fast is frame  # untouched: the routing id is still the link's
        assert actions == [ToApp(attrs.evolve(frame, routing_id=None))]
    return fast


def test_after_the_first_answer_a_response_before_its_end_takes_the_fast_path() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    rid, xid = _routed(core)
    first = [_agrees(core, "h1", f) for f in _response(rid, xid)]
    # the cartridge's first answer of all goes through receive (it ends the start-up rule)
    assert first[0] is None and all(f is not None for f in first[1:4])
    assert first[4] is None  # the last frame ends the route: receive
    rid, xid = _routed(core)
    again = [_agrees(core, "h1", f) for f in _response(rid, xid)]
    assert [f is not None for f in again] == [True, True, True, True, False]
    assert core.live_requests == 0


def test_anything_else_is_left_to_receive() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    attach_healthy(core, "h2", record("d", ["cap:op=other"]))
    rid, xid = _routed(core)
    for frame in _response(rid, xid)[:1]:
        core.receive("h1", frame)  # answered
    chunk = frames.chunk(rid, "o", 0, b"x", xid=xid, seq=1)
    assert core.response_for_app("h1", chunk) is chunk
    assert core.response_for_app("h2", chunk) is None  # another host
    assert core.response_for_app("h1", attrs.evolve(chunk, routing_id=None)) is None
    assert core.response_for_app("h1", attrs.evolve(chunk, routing_id=MessageId(999))) is None
    assert core.response_for_app("h1", frames.end(rid, xid=xid)) is None  # the last frame
    assert core.response_for_app("h1", frames.cancel(rid, xid=xid)) is None
    assert core.response_for_app("h1", frames.req(MessageId.new(), ECHO, xid=xid)) is None
    stray = frames.chunk(MessageId.new(), "o", 0, b"x", xid=xid)
    assert core.response_for_app("h1", stray) is None
    core.host_lost("h1", "gone")
    assert core.response_for_app("h1", chunk) is None


def test_a_peer_calls_response_is_left_to_receive() -> None:
    core = SwitchCore()
    attach_healthy(core, "h1", record("c", [ECHO]))
    peer = frames.req(MessageId.new(), ECHO, xid=MessageId(5))
    (routed,) = [a.frame for a in core.receive("h1", peer) if isinstance(a, ToHost)]
    assert routed.frame_type is FrameType.REQ and routed.routing_id is not None
    for frame in _response(routed.id, routed.routing_id)[:4]:
        # source is a host, not the application: never the fast path
        assert core.response_for_app("h1", frame) is None
        core.receive("h1", frame)
