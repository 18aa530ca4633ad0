"""The engine's hooks for test tools: a frame tap that sees every frame a connection sends
and receives (with the cartridge's seq), and raw bytes queued in order with the frames (in
process, over memory streams)."""

from __future__ import annotations

import anyio
import cbor2
import pytest
from _runtime_cartridge import ECHO, build_runtime

from cartridge_runtime.engine import CallError, Engine, EngineConfig, FrameTap, InProcess
from cartridge_runtime.engine._connection._shell import Connection
from cartridge_runtime.protocol import Frame, FrameType, MessageId, encode_frame, frames


class Recorder:
    """A tap keeping what it saw, by direction."""

    def __init__(self) -> None:
        self.received: list[tuple[str, Frame]] = []
        self.sent: list[tuple[str, Frame]] = []
        self.event = anyio.Event()

    def on_received(self, connection: str, frame: Frame) -> None:
        self.received.append((connection, frame))
        self.event.set()
        self.event = anyio.Event()

    def on_sent(self, connection: str, frame: Frame) -> None:
        self.sent.append((connection, frame))

    async def wait_received(self, rid: MessageId, ft: FrameType) -> Frame:
        with anyio.fail_after(10):
            while True:
                for _, f in self.received:
                    if f.id == rid and f.frame_type is ft:
                        return f
                await self.event.wait()


def connection(engine: Engine, name: str) -> Connection:
    conn = engine._slots[name].replicas[0].conn  # white-box: the connection's hooks
    assert conn is not None
    return conn


def test_a_recorder_is_a_frame_tap() -> None:
    tap: FrameTap = Recorder()  # mypy checks the protocol here
    assert EngineConfig(frame_tap=tap).frame_tap is tap
    assert EngineConfig().frame_tap is None


@pytest.mark.asyncio
async def test_the_tap_sees_the_start_up_and_a_call_both_ways_with_seq() -> None:
    tap = Recorder()
    async with Engine(heartbeat_interval=None, frame_tap=tap) as engine:
        name = engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        result = await engine.call(ECHO, [("media:", b"hi")])
        assert result.data == b"hi"
    assert {c for c, _ in tap.sent} == {name} and {c for c, _ in tap.received} == {name}
    sent = [f.frame_type for _, f in tap.sent]
    received = [f.frame_type for _, f in tap.received]
    # Start-up: our HELLO, its HELLO, the identity check and its echo, POLICY.
    assert sent[0] is FrameType.HELLO and received[0] is FrameType.HELLO
    assert FrameType.POLICY in sent
    reqs = [f for _, f in tap.sent if f.frame_type is FrameType.REQ and f.cap == ECHO]
    assert len(reqs) == 1
    rid = reqs[0].id
    answer = [f for _, f in tap.received if f.id == rid]
    kinds = [f.frame_type for f in answer]
    assert kinds[0] is FrameType.STREAM_START and kinds[-1] is FrameType.END
    assert FrameType.CHUNK in kinds
    # The cartridge numbers each response flow from 0: the tap sees the wire's seq.
    assert [f.seq for f in answer] == list(range(len(answer)))
    assert FrameType.END in received


@pytest.mark.asyncio
async def test_without_a_tap_the_connection_sends_through_the_plain_outbox() -> None:
    async with Engine(heartbeat_interval=None) as engine:
        name = engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        await engine.start(name)
        conn = connection(engine, name)
        # No wrapper per frame when nobody taps.
        assert conn.send == conn.outbox.push
        assert conn.send_numbered == conn.outbox.push_numbered


@pytest.mark.asyncio
async def test_raw_bytes_reach_the_cartridge_in_order_with_the_frames() -> None:
    tap = Recorder()
    async with Engine(heartbeat_interval=None, frame_tap=tap) as engine:
        name = engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        await engine.start(name)
        conn = connection(engine, name)
        rid = MessageId.new()
        request = [
            frames.req(rid, ECHO),
            frames.stream_start(rid, "a", "media:"),
            frames.chunk(rid, "a", 0, cbor2.dumps(b"raw")),
            frames.stream_end(rid, "a", 1),
            frames.end(rid, response=False),
        ]
        conn.send_raw(b"".join(encode_frame(f, seq=i) for i, f in enumerate(request)))
        end = await tap.wait_received(rid, FrameType.END)
        assert end.id == rid
        chunks = [f for _, f in tap.received if f.id == rid and f.frame_type is FrameType.CHUNK]
        assert b"".join(cbor2.loads(f.payload or b"") for f in chunks) == b"raw"
        # Nobody in the engine asked: its answer has no route (counted, not lost silently).
        assert engine.stats().no_route >= 1
        # Raw bytes are not frames the engine sent: the tap saw none of them.
        assert not any(f.id == rid for _, f in tap.sent)


@pytest.mark.asyncio
async def test_bytes_that_are_no_frame_end_the_cartridge_with_a_reason() -> None:
    async with Engine(heartbeat_interval=None) as engine:
        name = engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        await engine.start(name)
        conn = connection(engine, name)
        conn.send_raw(b"\xff\xff\xff\xffnot a frame")
        with anyio.fail_after(10):
            await conn.dead.wait()
        assert conn.death is not None
        assert conn.exit_description != "still running"


@pytest.mark.asyncio
async def test_raw_bytes_after_the_connection_closed_are_dropped_and_counted() -> None:
    async with Engine(heartbeat_interval=None) as engine:
        name = engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        await engine.start(name)
        conn = connection(engine, name)
        await engine.stop(name)
        drops = conn.counters.drops
        conn.send_raw(b"late")
        assert conn.counters.drops == drops + 1


@pytest.mark.asyncio
async def test_no_policy_sends_no_policy_frame() -> None:
    tap = Recorder()
    async with Engine(heartbeat_interval=None, policy=None, frame_tap=tap) as engine:
        name = engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        await engine.start(name)
        # The runtime holds a cartridge to the start-up's order: no REQ before POLICY.
        with pytest.raises(CallError) as info:
            await engine.call(ECHO, [("media:", b"x")])
        assert info.value.code == "PROTOCOL_VIOLATION" and "POLICY" in info.value.message
    assert not any(f.frame_type is FrameType.POLICY for _, f in tap.sent)
    assert EngineConfig(policy="full").policy == "full"


@pytest.mark.asyncio
async def test_in_process_without_the_setup_check_serves_an_undeclared_handler() -> None:
    from cartridge_runtime.engine import SpawnFailed
    from cartridge_runtime.runtime import Request

    undeclared = "cap:in=media:;op=not-declared;out=media:"

    def runtime() -> object:
        rt = build_runtime()

        @rt.op(undeclared)
        async def handler(req: Request) -> None:
            await req.take_input().collect_all_bytes()

        return rt

    async with Engine(heartbeat_interval=None) as engine:
        engine.add_cartridge("checked", placement=InProcess(runtime()))  # type: ignore[arg-type]
        with pytest.raises(SpawnFailed) as info:
            await engine.start("checked")
        assert info.value.step == "spawn" and "does not declare" in info.value.message
    async with Engine(heartbeat_interval=None) as engine:
        name = engine.add_cartridge(
            "as-is",
            placement=InProcess(runtime(), check=False),  # type: ignore[arg-type]
        )
        await engine.start(name)
        assert (await engine.call(ECHO, [("media:", b"ok")])).data == b"ok"
