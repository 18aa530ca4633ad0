"""Control frames: CANCEL, HEARTBEAT, pools, force_kill, peer calls."""

from __future__ import annotations

import json

import anyio
import pytest
from _runtime_cartridge import ECHO, PEER, SLOW, SYNC, build_runtime

from cartridge_runtime.protocol import FrameType, MessageId, frames
from cartridge_runtime.runtime import EXIT_FORCE_KILLED, Request
from cartridge_runtime.testing import CartridgeHarness


def started(rid: MessageId):
    return lambda f: (
        f.id == rid and f.frame_type is FrameType.LOG and f.meta.get("message") == "started"
    )


async def _start_slow(h: CartridgeHarness, xid: MessageId | None = None):
    rid = MessageId.new()
    call = await h.start_call(SLOW, [("media:", b"")], rid=rid, xid=xid)
    await h.wait_for(started(rid))
    return rid, call


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"code": "CANCELLED", "attribution_class": "user", "message": "Cancelled by user"},
            ("CANCELLED", "user", "Cancelled by user"),
        ),
        ({}, ("CANCELLED", "internal", "Request cancelled")),
        (
            {"code": "ABORTED", "attribution_class": "resource", "message": "disk full"},
            ("ABORTED", "resource", "Request aborted by the host: disk full"),
        ),
        (
            {
                "code": "ABORTED_COLLATERAL",
                "attribution_class": "environment",
                "message": "sibling died",
            },
            (
                "ABORTED_COLLATERAL",
                "environment",
                "Request aborted as collateral of a failure elsewhere in the run: sibling died",
            ),
        ),
        ({"code": "OTHER", "message": "custom"}, ("OTHER", "internal", "custom")),
    ],
)
async def test_cancel_running_maps_reason(
    kwargs: dict[str, str], expected: tuple[str, str, str]
) -> None:
    async with CartridgeHarness(build_runtime()) as h:
        xid = MessageId(5)
        rid, call = await _start_slow(h, xid)
        await h.send_frame(frames.cancel(rid, xid=xid, **kwargs))
        r = await h.result(call)
        assert (r.error.code, r.error.attribution_class, r.error.message) == expected
        err = r.frames[-1]
        assert err.routing_id == xid and err.seq == 1  # after the progress LOG (seq 0)
        # a second cancel, and a cancel for an unknown request, are ignored
        await h.send_frame(frames.cancel(rid))
        await h.send_frame(frames.cancel(MessageId.new()))
        ok = await h.call(ECHO, [("media:", b"alive")])
        assert ok.main_bytes == b"alive"
        assert [f for f in h.received if f.id == rid and f.frame_type is FrameType.ERR] == [err]


@pytest.mark.asyncio
async def test_cancel_queued_request_and_queue_logs() -> None:
    async with CartridgeHarness(build_runtime(capacities={SLOW: 1})) as h:
        rid1, call1 = await _start_slow(h)
        rid2 = MessageId.new()
        call2 = await h.start_call(SLOW, [("media:", b"")], rid=rid2)
        queued = await h.wait_for(lambda f: f.id == rid2 and f.frame_type is FrameType.LOG)
        assert queued.meta["level"] == "queued"
        assert queued.meta["message"] == "Request queued (position 1 on pool 'cap:op=slow')"
        hb = await h.heartbeat()
        pools = json.loads(hb.meta["pools"])
        assert (
            pools["cap:op=slow"]["active"] == 1
            and pools["cap:op=slow"]["queued"] == 1
            and pools["cap:op=slow"]["declared"] == 1
        )
        await h.send_frame(
            frames.cancel(
                rid2, code="CANCELLED", attribution_class="user", message="Cancelled by user"
            )
        )
        r2 = await h.result(call2)
        assert r2.error.message == "Cancelled by user (while queued)"
        # a third request waits, then starts when the first is cancelled
        rid3 = MessageId.new()
        call3 = await h.start_call(SLOW, [("media:", b"")], rid=rid3)
        await h.wait_for(lambda f: f.id == rid3 and f.frame_type is FrameType.LOG)
        await h.send_frame(frames.cancel(rid1))
        await h.result(call1)
        await h.wait_for(
            lambda f: (
                f.id == rid3 and f.frame_type is FrameType.LOG and f.meta["level"] == "dequeued"
            )
        )
        await h.wait_for(started(rid3))
        await h.send_frame(frames.cancel(rid3))
        r3 = await h.result(call3)
        assert r3.error.code == "CANCELLED"


@pytest.mark.asyncio
async def test_heartbeat_during_running_request_and_capacities() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        rid, call = await _start_slow(h)
        hid = MessageId(42)
        reply = await h.heartbeat(hid=hid)
        assert (
            reply.frame_type is FrameType.HEARTBEAT and reply.id == hid and reply.routing_id is None
        )
        meta = reply.meta
        assert list(meta) == ["drops_total", "stragglers_total", "overruns_total", "pools"]
        assert json.loads(meta["pools"])["cap:op=slow"]["active"] == 1
        desired = json.dumps({"cap:op=slow": 3}).encode()
        reply2 = await h.heartbeat({"desired_capacities": desired})
        assert json.loads(reply2.meta["pools"])["cap:op=slow"]["configured"] == 3
        bad = await h.heartbeat(
            {"desired_capacities": json.dumps({"no-such-pool": 1}).encode()}, hid=MessageId(43)
        )
        assert (
            bad.frame_type is FrameType.ERR
            and bad.meta["code"] == "UNKNOWN_POOL"
            and bad.id == MessageId(43)
        )
        await h.send_frame(frames.cancel(rid))
        await h.result(call)


@pytest.mark.asyncio
async def test_force_kill_sends_err_then_ends_process() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        rid, call = await _start_slow(h)
        await h.send_frame(frames.cancel(rid, force_kill=True))
        r = await h.result(call)
        assert r.error.code == "CANCELLED"
        assert await h.wait_exit() == EXIT_FORCE_KILLED


@pytest.mark.asyncio
async def test_cancel_of_sync_handler_blocked_on_input() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        rid = MessageId.new()
        call = await h.start_call(SYNC, [], rid=rid, end=False)
        await h.send_frame(frames.stream_start(rid, "a", "media:"))
        await anyio.sleep(0.05)
        await h.send_frame(frames.cancel(rid))
        r = await h.result(call)
    assert r.error.code == "CANCELLED"


@pytest.mark.asyncio
async def test_peer_call_round_trip_and_progress_range() -> None:
    async def echo_peer(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
        return b"".join(d for _, d in inputs)

    async with CartridgeHarness(build_runtime(), peers={ECHO: echo_peer}) as h:
        r = await h.call(PEER, [("media:", b"via peer" * 50_000)])
        req = [f for f in h.received if f.frame_type is FrameType.REQ]
    assert r.ok and r.main_bytes == b"via peer" * 50_000
    assert len(req) == 1 and req[0].cap == ECHO and req[0].routing_id is None


@pytest.mark.asyncio
async def test_peer_error_keeps_code() -> None:
    async with CartridgeHarness(build_runtime()) as h:  # no peers: the host answers NO_HANDLER
        r = await h.call(PEER, [("media:", b"x")])
    assert r.error.code == "NO_HANDLER" and r.error.attribution_class == "environment"


@pytest.mark.asyncio
async def test_cancel_propagates_to_peer_calls() -> None:
    never = anyio.Event()

    async def stuck_peer(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
        await never.wait()
        return b""

    rt = build_runtime()

    @rt.op("cap:in=media:;op=peer-stuck;out=media:")
    async def peer_stuck(req: Request) -> None:
        await req.take_input().collect_all_bytes()
        resp = await req.peer().call_with_bytes(ECHO, [("media:", b"x")])
        await resp.collect_bytes()

    async with CartridgeHarness(rt, peers={ECHO: stuck_peer}) as h:
        rid = MessageId.new()
        call = await h.start_call(
            "cap:in=media:;op=peer-stuck;out=media:", [("media:", b"")], rid=rid
        )
        peer_req = await h.wait_for(lambda f: f.frame_type is FrameType.REQ)
        await h.wait_for(lambda f: f.id == peer_req.id and f.frame_type is FrameType.END)
        await h.send_frame(
            frames.cancel(rid, code="CANCELLED", attribution_class="user", message="stop")
        )
        r = await h.result(call)
        peer_cancel = await h.wait_for(
            lambda f: f.frame_type is FrameType.CANCEL and f.id == peer_req.id
        )
        never.set()
    assert r.error.code == "CANCELLED"
    assert peer_cancel.meta == {"code": "CANCELLED", "attribution_class": "user", "message": "stop"}


@pytest.mark.asyncio
async def test_a_peer_call_left_open_is_cancelled_when_its_request_ends() -> None:
    """The handler returns without reading a peer response that never comes: after the
    request's END the call gets a CANCEL, and the peer's late answer is ignored."""
    late = anyio.Event()

    async def slow_peer(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
        await late.wait()
        return b"late"

    rt = build_runtime()

    @rt.op("cap:in=media:;op=peer-leave;out=media:")
    async def peer_leave(req: Request) -> None:
        await req.take_input().collect_all_bytes()
        await req.peer().call_with_bytes(ECHO, [("media:", b"x")])
        await req.output().write(b"done")

    async with CartridgeHarness(rt, peers={ECHO: slow_peer}) as h:
        r = await h.call("cap:in=media:;op=peer-leave;out=media:", [("media:", b"")])
        peer_req = await h.wait_for(lambda f: f.frame_type is FrameType.REQ)
        peer_cancel = await h.wait_for(
            lambda f: f.frame_type is FrameType.CANCEL and f.id == peer_req.id
        )
        late.set()  # the peer answers after all: a straggler for the cartridge
        again = await h.call("cap:in=media:;op=peer-leave;out=media:", [("media:", b"")])
        late_frames = [f for f in h.received if f.id == peer_req.id]
    assert r.ok and r.main_bytes == b"done" and again.ok
    assert peer_cancel.meta in (None, {})
    assert [f.frame_type for f in late_frames].count(FrameType.CANCEL) == 1
