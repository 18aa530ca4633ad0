"""The switch numbers the application's flow frames toward a host per (rid, xid), from the
REQ's 0, when the body is streamed after the REQ (RLY-8, TYP-5), as it does for a body sent
with the REQ; non-flow frames keep seq 0."""

from __future__ import annotations

from _relay_fakes import attach_healthy, new_req, record

from cartridge_runtime.protocol import Frame, frames
from cartridge_runtime.relay import SwitchCore, ToHost

CAP = "cap:op=x"


def _to_host(actions: list[object]) -> list[Frame]:
    return [a.frame for a in actions if isinstance(a, ToHost)]


def test_a_streamed_body_is_numbered_after_its_req() -> None:
    core = SwitchCore()
    attach_healthy(core, "h", record("c", [CAP]))
    req = new_req(CAP)
    rid = req.id
    sent = _to_host(core.send(req))
    for frame in (
        frames.stream_start(rid, "a", "media:"),  # made unnumbered (seq 0) by the caller
        frames.chunk(rid, "a", 0, b"\x41x"),
        frames.credit(rid, 4, "response", stream_id="r"),
        frames.chunk(rid, "a", 1, b"\x41y"),
        frames.stream_end(rid, "a", 2),
        frames.end(rid, response=False),
    ):
        sent += _to_host(core.send(frame))
    assert [f.seq for f in sent] == [0, 1, 2, 0, 3, 4, 5]  # the CREDIT is not a flow frame
    assert len({f.routing_id for f in sent}) == 1


def test_a_body_numbered_by_the_caller_keeps_its_numbers() -> None:
    core = SwitchCore()
    attach_healthy(core, "h", record("c", [CAP]))
    req = new_req(CAP)
    rid = req.id
    flow = [req, frames.stream_start(rid, "a", "media:"), frames.end(rid, response=False)]
    sent: list[Frame] = []
    for seq, frame in enumerate(flow):
        sent += _to_host(core.send(frame, seq=seq))
    assert [f.seq for f in sent] == [0, 1, 2]
