"""The harness runs the runtime through the engine's own connection: what the test sees of
it (every frame through the connection's frame tap, the start-up's frames, the wire's seq),
raw frames that stay raw, and the engine's answers where the protocol gives one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import cbor2
import pytest
from _runtime_cartridge import ECHO, build_runtime

from cartridge_runtime.protocol import FrameType, MessageId, frames
from cartridge_runtime.testing import CartridgeHarness


@pytest.mark.asyncio
async def test_received_holds_the_start_up_and_a_call_with_the_wire_seq() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        assert h.received[0].frame_type is FrameType.HELLO
        assert h.hello is not None and h.limits == h.hello.limits
        rid, xid = MessageId.new(), MessageId(7)
        call = await h.start_call(ECHO, [("media:", b"hi")], rid=rid, xid=xid)
        result = await call.result(10)
        assert result.ok and result.data == b"hi"
        assert [f.seq for f in result.frames] == list(range(len(result.frames)))
        assert all(f.id == rid and f.routing_id == xid for f in result.frames)
        # Every response frame went through the tap too, in the same order.
        tapped = [f for f in h.received if f.id == rid and f.frame_type is not FrameType.CREDIT]
        assert tapped == result.frames
        assert h.unrouted == [] and h.heartbeats == []


@pytest.mark.asyncio
async def test_an_answer_to_a_request_nobody_opened_is_unrouted() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        rid = MessageId.new()
        for frame in (
            frames.req(rid, ECHO),
            frames.stream_start(rid, "a", "media:"),
            frames.chunk(rid, "a", 0, cbor2.dumps(b"raw")),
            frames.stream_end(rid, "a", 1),
            frames.end(rid, response=False),
        ):
            await h.send_frame(frame)
        end = await h.wait_for(lambda f: f.id == rid and f.frame_type is FrameType.END)
        assert end in h.unrouted
        kinds = [f.frame_type for f in h.unrouted if f.id == rid]
        assert FrameType.STREAM_START in kinds and FrameType.CHUNK in kinds


@pytest.mark.asyncio
async def test_a_raw_heartbeat_is_answered_once_and_not_answered_back() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        hid = MessageId(77)
        await h.send_frame(frames.heartbeat(hid))
        reply = await h.wait_for(lambda f: f.id == hid)
        assert reply.frame_type is FrameType.HEARTBEAT
        # A call's round trip later, the reply still stands alone: the engine took it as a
        # probe's reply instead of a heartbeat to answer (which the cartridge would answer...).
        assert (await h.call(ECHO, [("media:", b"x")])).ok
        assert sum(1 for f in h.received if f.id == hid) == 1
        assert h.heartbeats == []


@pytest.mark.asyncio
async def test_raw_bytes_that_are_no_frame_end_the_runtime() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        await h.send_raw(b"\xff\xff\xff\xffnot a frame")
        status = await h.wait_exit()
        assert status not in (None, 0)


@pytest.mark.asyncio
async def test_closing_the_input_ends_the_runtime_with_status_0() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        await h.close_input()
        assert await h.wait_exit() == 0
    assert h.exit_status == 0


@pytest.mark.asyncio
async def test_handshake_false_enters_at_once_and_handshake_waits_for_the_start_up() -> None:
    async with CartridgeHarness(build_runtime(), handshake=False) as h:
        await h.handshake()
        assert h.hello is not None
        assert (await h.call(ECHO, [("media:", b"late")])).data == b"late"


@pytest.mark.asyncio
async def test_a_call_pending_when_the_cartridge_ends_stops_waiting_for_credit() -> None:
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"x" * 1024
            await anyio.lowlevel.checkpoint()

    async with CartridgeHarness(build_runtime()) as h:
        call = await h.start_call(ECHO, [], end=False)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call.send_inputs, [("media:", endless())])
                await anyio.lowlevel.checkpoint()
                await h.send_raw(b"\xff\xff\xff\xffnot a frame")
                await h.wait_exit()
        # send_inputs returned (no hang on credit that never comes); the runtime's last
        # words for the request, if any, are its result.
        result = await call.result(1) if call.finished else call.partial
        assert result.error is None or result.error.code
