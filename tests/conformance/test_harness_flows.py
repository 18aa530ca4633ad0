"""The harness releases each call's flow on the engine's connection once the call ends (END,
ERR) or is abandoned: flows do not pile up for the length of a test, and frames that come for
a finished call are late (counted by the connection as the engine counts them), never
gathered into its result."""

from __future__ import annotations

import cbor2
import pytest
from _runtime_cartridge import ECHO, FAIL, PEER, build_runtime

from cartridge_runtime.protocol import FrameType, MessageId, frames
from cartridge_runtime.testing import CartridgeHarness


@pytest.mark.asyncio
async def test_no_flow_of_finished_calls_stays_routed() -> None:
    async with CartridgeHarness(build_runtime(), peers={ECHO: _echo_peer}) as h:
        calls = [await h.start_call(ECHO, [("media:", b"x" * n)]) for n in range(1, 9)]
        assert h.connection.in_flight > 0
        for n, call in enumerate(calls, 1):
            assert (await call.result(10)).data == b"x" * n
        failed = await h.call(FAIL, [("media:", b"boom")])
        assert failed.error is not None  # an ERR ends the call as well as END
        assert (await h.call(PEER, [("media:", b"via peer")])).ok
        assert h.connection.in_flight == 0


async def _echo_peer(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
    return b"".join(value for _, value in inputs)


@pytest.mark.asyncio
async def test_an_abandoned_call_is_released() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        with pytest.raises(TypeError, match="unsupported value type"):
            await h.start_call(ECHO, [("media:", object())])
        assert h.connection.in_flight == 0
        # The connection still serves calls afterwards.
        assert (await h.call(ECHO, [("media:", b"next")])).data == b"next"
        assert h.connection.in_flight == 0


@pytest.mark.asyncio
async def test_a_frame_after_the_end_of_a_call_is_late_and_not_gathered() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        rid = MessageId.new()
        call = await h.start_call(ECHO, [("media:", b"first")], rid=rid)
        result = await call.result(10)
        assert result.data == b"first"
        gathered = list(result.frames)
        first_end = gathered[-1]
        assert first_end.frame_type is FrameType.END
        counters = h.connection.counters
        stragglers, late_credits = counters.stragglers, counters.late_credits
        # The same request id again, raw, under another routing id (the runtime's writer ends
        # a (rid, xid) flow at its terminal): the runtime answers it, and for the harness's
        # connection every frame of that answer comes for a call that already ended.
        xid = MessageId(9)
        for frame in (
            frames.req(rid, ECHO, xid=xid),
            frames.stream_start(rid, "a", "media:", xid=xid),
            frames.chunk(rid, "a", 0, cbor2.dumps(b"late"), xid=xid),
            frames.stream_end(rid, "a", 1, xid=xid),
            frames.end(rid, response=False, xid=xid),
        ):
            await h.send_frame(frame)
        second_end = await h.wait_for(
            lambda f: f.id == rid and f.frame_type is FrameType.END and f is not first_end
        )
        late = [f for f in h.received[h.received.index(first_end) + 1 :] if f.id == rid]
        assert second_end in late and any(f.frame_type is FrameType.CHUNK for f in late)
        # Nothing reached the finished call; the connection counted every late frame.
        assert call.partial.frames == gathered and call.partial.data == b"first"
        assert (counters.stragglers - stragglers) + (counters.late_credits - late_credits) == len(
            late
        )
        assert counters.stragglers - stragglers == sum(
            1 for f in late if f.frame_type is not FrameType.CREDIT
        )
        # They belong to a request the harness opened: late, not unrouted.
        assert h.unrouted == []
        assert h.connection.in_flight == 0
