"""The runtime's normal behaviour, in-process through serve() and the harness."""

from __future__ import annotations

import json
import math

import cbor2
import pytest
from _runtime_cartridge import (
    CONCAT,
    ECHO,
    EMPTY,
    META,
    MULTI,
    NET,
    OPTIONAL,
    PROGRESS,
    SECOND,
    SIDE,
    SINK,
    SYNC,
    UNBOUNDED,
    VALUE,
    WORDS,
    build_runtime,
)

from cartridge_runtime.protocol import FrameType, MessageId, _outgoing, frames
from cartridge_runtime.runtime import CartridgeRuntime, Request
from cartridge_runtime.testing import CartridgeHarness, call_sync, run_op


def types(result) -> list[str]:
    return [f.frame_type.name for f in result.frames]


@pytest.mark.asyncio
async def test_hello_carries_manifest_and_singleton_pools() -> None:
    rt = build_runtime()
    async with CartridgeHarness(rt) as h:
        hello = h.hello
        assert json.loads(hello.manifest)["name"] == "runtime-tests"
        pools = hello.pools
        assert "cap:effect=none" in pools and "cap:out=media:void" in pools
        assert 'cap:out="media:adapter-selection;fmt=json;record"' in pools
        assert list(pools)[-1] == "all"
        assert pools["cap:effect=none"] == {
            "declared": 0,
            "configured": 0,
            "active": 0,
            "queued": 0,
        }


@pytest.mark.asyncio
async def test_echo_small_frames_and_seq() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        xid = MessageId(7)
        r = await h.call(ECHO, [("media:", b"hello bifaci")], xid=xid)
    assert r.ok and r.main_bytes == b"hello bifaci"
    assert types(r) == ["STREAM_START", "CHUNK", "STREAM_END", "END"]
    assert [f.seq for f in r.frames] == [0, 1, 2, 3]
    assert all(f.routing_id == xid for f in r.frames)
    ss = r.frames[0]
    assert ss.media_urn == "media:" and ss.is_sequence is False and ss.output is None
    assert (
        ss.stream_id.startswith("resp-") and ss.stream_id.endswith("-0") and len(ss.stream_id) == 15
    )
    assert r.frames[1].payload == cbor2.dumps(b"hello bifaci")
    assert r.end == {"exit_code": 0, "progress": 1.0}


@pytest.mark.asyncio
async def test_large_echo_waits_for_credit_both_ways() -> None:
    data = bytes(range(256)) * (12 * 4096)  # 12 MiB: many windows of 32 chunks each way
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(ECHO, [("media:", data)])
        credits = [f for f in h.received if f.frame_type is FrameType.CREDIT]
    assert r.ok and r.main_bytes == data
    assert r.main.chunk_count == len(data) // (256 * 1024)
    assert credits and all(f.meta == {"credit_dir": "request"} for f in credits)


@pytest.mark.asyncio
async def test_sequence_output_with_item_meta() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(WORDS, [("media:enc=utf-8", b"alpha beta gamma")])
    assert r.ok
    main = r.main
    assert main.is_sequence and main.media_urn == "media:enc=utf-8;list"
    assert main.items == [("alpha", {"index": 0}), ("beta", {"index": 1}), ("gamma", {"index": 2})]
    assert main.chunk_count == 3


@pytest.mark.asyncio
async def test_void_cap_sends_end_only_and_empty_output_is_empty_stream() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        void = await h.call(SINK, [("media:", b"abc")])
        empty = await h.call(EMPTY, [("media:", b"abc")])
    assert types(void) == ["END"]
    assert types(empty) == ["STREAM_START", "STREAM_END", "END"]
    assert empty.frames[1].chunk_count == 0


@pytest.mark.asyncio
async def test_multi_output_key21_and_optional_skipped() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(MULTI, [("media:enc=utf-8", b"abc")])
    assert r.ok
    assert [s.output for s in r.streams] == [None, SIDE]
    assert r.streams[0].values == ["ABC"]
    assert json.loads(r.output(SIDE).values[0]) == {"length": 3}
    assert r.streams[1].stream_id.endswith("-1")
    assert OPTIONAL not in [s.output for s in r.streams]
    # main STREAM_END comes before the side output's end: outputs close main first
    ends = [f.stream_id for f in r.frames if f.frame_type is FrameType.STREAM_END]
    assert ends == [r.streams[0].stream_id, r.streams[1].stream_id]


@pytest.mark.asyncio
async def test_progress_log_and_finish_message() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(PROGRESS, [("media:", b"")])
    assert r.progress == [(0.25, "quarter"), (0.5, "half")]
    assert [(log.level, log.message, log.attribution_class) for log in r.logs] == [
        ("info", "halfway", "internal")
    ]
    assert r.end == {"exit_code": 0, "progress": 0.9, "message": "nearly"}
    assert types(r) == ["LOG", "LOG", "LOG", "STREAM_START", "CHUNK", "STREAM_END", "END"]


@pytest.mark.asyncio
async def test_emit_cbor_map_is_one_chunk_per_entry() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(VALUE, [("media:", b"")])
    assert r.main.values == [["a", 1], ["b", [1, 2]]]
    assert r.main.media_urn == "media:fmt=json;record"


@pytest.mark.asyncio
async def test_stream_meta_on_explicit_start() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(META, [("media:", b"")])
    assert r.main.meta == {"origin": "test"}


@pytest.mark.asyncio
async def test_two_inputs_by_media_urn() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(CONCAT, [(SECOND, b"two"), ("media:first", b"one")])
    assert r.main_bytes == b"onetwo"


@pytest.mark.asyncio
async def test_unbounded_output_has_no_chunk_count() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(UNBOUNDED, [("media:", b"abc")])
    ss = r.frames[0]
    assert ss.unbounded is True and ss.is_sequence is True
    se = next(f for f in r.frames if f.frame_type is FrameType.STREAM_END)
    assert se.chunk_count is None
    assert r.main.items == [(b"abc", None)]


@pytest.mark.asyncio
async def test_unbounded_input_read_incrementally_and_closed_by_close_stream() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        rid = MessageId.new()
        call = await h.start_call(UNBOUNDED, [], rid=rid, end=False)
        await h.send_frame(frames.stream_start(rid, "live", "media:", unbounded=True))
        for i in range(3):
            await h.send_frame(frames.chunk(rid, "live", i, cbor2.dumps(b"v%d" % i)))
        await h.wait_for(
            lambda f: f.id == rid and f.frame_type is FrameType.CHUNK and f.chunk_index == 2
        )
        await h.send_frame(frames.close_stream(rid))
        await h.send_frame(frames.stream_end(rid, "live", None))
        await h.send_frame(frames.end(rid, response=False))
        r = await h.result(call)
    assert [v for v, _ in r.main.items] == [b"v0", b"v1", b"v2"]
    assert r.ok


@pytest.mark.asyncio
async def test_coalescing_small_writes_into_one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pending bytes also go out once they are COALESCE_AGE (20 ms) old, which a loaded machine
    # can make a few of these writes: the age rule has its own test (test_request_state.py).
    monkeypatch.setattr(_outgoing, "COALESCE_AGE", math.inf)
    rt = build_runtime()

    @rt.op("cap:in=media:;op=many-small;out=media:")
    async def many_small(req: Request) -> None:
        for _ in range(100):
            await req.output().write(b"ab")

    async with CartridgeHarness(rt) as h:
        r = await h.call("cap:in=media:;op=many-small;out=media:", [("media:", b"")])
    assert r.main_bytes == b"ab" * 100
    assert r.main.chunk_count == 1  # 200 bytes < 4096: coalesced, flushed by close


@pytest.mark.asyncio
async def test_write_of_4096_or_more_goes_out_at_once() -> None:
    rt = build_runtime()

    @rt.op("cap:in=media:;op=big-writes;out=media:")
    async def big_writes(req: Request) -> None:
        await req.output().write(b"a" * 4096)
        await req.output().write(b"b" * 10)
        await req.output().flush()
        await req.output().write(b"c" * 10)

    async with CartridgeHarness(rt) as h:
        r = await h.call("cap:in=media:;op=big-writes;out=media:", [("media:", b"")])
    assert [len(v) for v in r.main.values] == [4096, 10, 10]


@pytest.mark.asyncio
async def test_sync_perform_runs_in_a_thread() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(SYNC, [("media:", b"shout")])
    assert r.ok and r.main_bytes == b"SHOUT"
    assert r.progress == [(0.5, "sync")]


@pytest.mark.asyncio
async def test_network_policy() -> None:
    async with CartridgeHarness(build_runtime(), policy="full") as h:
        ok = await h.call(NET, [("media:", b"")])
    async with CartridgeHarness(build_runtime(), policy="offline") as h:
        refused = await h.call(NET, [("media:", b"")])
    assert ok.main.values == ["allowed"]
    assert refused.error.code == "NETWORK_POLICY" and refused.error.attribution_class == "user"


@pytest.mark.asyncio
async def test_builtin_identity_discard_and_adapter_selection() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        ident = await h.call("cap:effect=none", [("media:", b"same")])
        discard = await h.call("cap:out=media:void", [("media:", b"gone")])
        adapter = await h.call(
            'cap:in="media:";out="media:adapter-selection;fmt=json;record"', [("media:", b"x")]
        )
    assert ident.main_bytes == b"same"
    assert types(discard) == ["END"]
    assert types(adapter) == ["STREAM_START", "STREAM_END", "END"]
    assert adapter.main.media_urn == "media:adapter-selection;fmt=json;record"


@pytest.mark.asyncio
async def test_decorator_and_run_op() -> None:
    rt = build_runtime()

    @rt.op("cap:in=media:;op=shout;out=media:")
    async def shout(req: Request) -> None:
        data = await req.take_input().collect_all_bytes()
        await req.output().write(data.upper())

    async with CartridgeHarness(rt) as h:
        r = await h.call("cap:in=media:;op=shout;out=media:", [("media:", b"hey")])
    assert r.main_bytes == b"HEY"

    from _runtime_cartridge import Echo

    r2 = await run_op(Echo, "cap:in=media:;op=solo;out=media:", [("media:", b"solo")])
    assert r2.main_bytes == b"solo"


def test_call_sync_and_trio_backend() -> None:
    for backend in ("asyncio", "trio"):
        r = call_sync(build_runtime(), ECHO, [("media:", b"x" * 300_000)], backend=backend)
        assert r.main_bytes == b"x" * 300_000


def test_trio_multi_output_and_sync_handler() -> None:
    import anyio

    async def main() -> None:
        async with CartridgeHarness(build_runtime()) as h:
            r = await h.call(MULTI, [("media:enc=utf-8", b"abc")])
            assert [s.output for s in r.streams] == [None, SIDE]
            s = await h.call(SYNC, [("media:", b"abc")])
            assert s.main_bytes == b"ABC"

    anyio.run(main, backend="trio")


def test_register_op_refuses_bad_urn_and_instances() -> None:
    rt = build_runtime()
    with pytest.raises(ValueError):
        rt.register_op("not a cap", lambda: None)  # type: ignore[arg-type,return-value]
    from _runtime_cartridge import Echo

    with pytest.raises(ValueError):
        rt.register_op(ECHO, Echo())  # type: ignore[arg-type]
    assert isinstance(rt, CartridgeRuntime)
