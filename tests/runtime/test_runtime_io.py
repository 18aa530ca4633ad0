"""Input API details, EOF handling, and CBOR mode on real stdio (subprocess)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
from _runtime_cartridge import ECHO, build_runtime

from cartridge_runtime.protocol import FrameDecoder, FrameType, Limits, encode_frame, frames
from cartridge_runtime.runtime import (
    InputDecodeError,
    InputPackage,
    InputStream,
    InputStreamError,
    MissingInput,
    Request,
)
from cartridge_runtime.runtime._input import StreamFeed
from cartridge_runtime.runtime._input_package import PackageFeed, package_from_bytes
from cartridge_runtime.testing import CartridgeHarness

HERE = Path(__file__).resolve().parents[1]  # tests/, where the helper modules are


@pytest.mark.asyncio
async def test_input_package_lookups() -> None:
    pkg = package_from_bytes([("media:a;enc=utf-8", "héllo".encode()), ("media:b", b"\xff\xfe")])
    assert await pkg.find_stream("media:enc=utf-8;a") == "héllo".encode()
    assert await pkg.find_stream_str("media:a;enc=utf-8") == "héllo"
    assert await pkg.find_stream("media:a") is None  # equivalence, not subsumption
    with pytest.raises(InputDecodeError):
        await pkg.require_stream_str("media:b")
    with pytest.raises(MissingInput) as info:
        await pkg.require_stream("media:c")
    assert info.value.wanted == "media:c" and info.value.arrived == ("media:a;enc=utf-8", "media:b")
    assert await pkg.collect_all_bytes() == "héllo".encode() + b"\xff\xfe"


@pytest.mark.asyncio
async def test_input_stream_read_and_collectors() -> None:
    s = InputStream("s", "media:")
    feed = StreamFeed(s)
    for piece in (b"abc", b"defg", "hi"):
        feed.push_data(piece)
    feed.push_end()
    assert await s.read(2) == b"ab"
    assert await s.read(5) == b"c"
    assert await s.read(-1) == b"defghi"
    assert await s.read(1) == b""
    u = InputStream("u", "media:", unbounded=True)
    with pytest.raises(InputDecodeError):
        await u.collect_bytes()
    with pytest.raises(InputDecodeError):
        await u.collect_value()
    seq = InputStream("q", "media:list", is_sequence=True)
    seq_feed = StreamFeed(seq)
    seq_feed.push_item({"k": 1}, {"m": 1}, 1)
    seq_feed.push_item(2, None, 1)
    seq_feed.push_end()
    assert await seq.collect_value() == [{"k": 1}, 2]
    pkg = InputPackage([s, seq], complete=True)
    assert [x.stream_id async for x in pkg] == ["s", "q"]


@pytest.mark.asyncio
async def test_complete_request_finishes_after_eof() -> None:
    rt = build_runtime()
    async with CartridgeHarness(rt) as h:
        call = await h.start_call(ECHO, [("media:", b"x" * 100_000)])
        await h.close_input()
        r = await h.result(call)
        assert r.ok and r.main_bytes == b"x" * 100_000
        assert await h.wait_exit() == 0


@pytest.mark.asyncio
async def test_input_meta_and_items_reach_handler() -> None:
    rt = build_runtime()
    seen: list[object] = []

    @rt.op("cap:in=media:;op=inspect;out=media:")
    async def inspect(req: Request) -> None:
        async for stream in req.take_input():
            seen.append((stream.media_urn, stream.is_sequence, stream.meta))
            async for item in stream.items():
                seen.append((item.value, item.meta))

    async with CartridgeHarness(rt) as h:
        from cartridge_runtime.protocol import MessageId

        rid = MessageId.new()
        call = await h.start_call("cap:in=media:;op=inspect;out=media:", [], rid=rid, end=False)
        await h.send_frame(
            frames.stream_start(rid, "s", "media:list", is_sequence=True, meta={"p": 1})
        )
        import cbor2

        await h.send_frame(frames.chunk(rid, "s", 0, cbor2.dumps("one"), meta={"i": 0}))
        await h.send_frame(frames.chunk(rid, "s", 1, cbor2.dumps("two")))
        await h.send_frame(frames.stream_end(rid, "s", 2))
        await h.send_frame(frames.end(rid, response=False))
        r = await h.result(call)
    assert r.ok
    assert seen == [("media:list", True, {"p": 1}), ("one", {"i": 0}), ("two", None)]


SCRIPT = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from _runtime_cartridge import build_runtime
build_runtime().run()
"""


def _spawn(stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], input=stdin, capture_output=True, timeout=60, check=False
    )


def _session_bytes() -> bytes:
    from cartridge_runtime.protocol import IdentityCheck

    check = IdentityCheck()
    return encode_frame(frames.hello(Limits())) + b"".join(encode_frame(f) for f in check.frames())


def test_stdio_session_eof_exits_0() -> None:
    proc = _spawn(_session_bytes() + encode_frame(frames.policy("full")))
    assert proc.returncode == 0, proc.stderr
    dec = FrameDecoder()
    dec.feed(proc.stdout)
    dec.feed(b"")
    types = [f.frame_type for f in dec.frames()]
    assert types[0] is FrameType.HELLO and types[-1] is FrameType.END


def test_stdio_garbage_exits_65_with_one_line() -> None:
    proc = _spawn(_session_bytes() + struct.pack(">I", 3) + b"\xff\xff\xff")
    assert proc.returncode == 65
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cartridge: protocol error:")


def test_stdio_version_mismatch_exits_1_silently() -> None:
    hello = frames.hello(Limits())
    proc = _spawn(encode_frame(hello.replace(meta={**hello.meta, "version": 4})))
    assert proc.returncode == 1 and proc.stdout == b""
    assert "handshake failed" in proc.stderr.decode()


@pytest.mark.asyncio
async def test_sync_handler_keepalive_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from cartridge_runtime.runtime import _sync

    monkeypatch.setattr(_sync, "KEEPALIVE_INTERVAL", 0.01)
    rt = build_runtime()
    release = []

    @rt.op("cap:in=media:;op=sync-quiet;out=media:")
    def quiet(req: Request) -> None:
        req.progress(0.3, "begun")
        deadline = time.monotonic() + 10
        while not release and time.monotonic() < deadline:
            time.sleep(0.005)

    async with CartridgeHarness(rt) as h:
        from cartridge_runtime.protocol import MessageId

        rid = MessageId.new()
        call = await h.start_call(
            "cap:in=media:;op=sync-quiet;out=media:", [("media:", b"")], rid=rid
        )
        await h.wait_for(
            lambda f: (
                f.id == rid
                and f.frame_type is FrameType.LOG
                and f.meta["message"] == "working"
                and f.meta["progress"] == 0.3
            )
        )
        release.append(True)
        r = await h.result(call)
    assert r.ok and (0.3, "working") in r.progress


@pytest.mark.asyncio
async def test_a_package_feed_adds_ends_and_fails_what_the_handler_reads() -> None:
    blocked: list[str] = []

    async def before_block() -> None:
        blocked.append("package")

    feed = PackageFeed(before_block=before_block)
    package = feed.package
    first = InputStream("a", "media:")
    feed.add(first)
    StreamFeed(first).push_data(b"x")
    StreamFeed(first).push_end()
    second = InputStream("b", "media:")
    feed.add(second)
    feed.end()
    assert [s.stream_id async for s in package] == ["a", "b"] and blocked == []
    assert await first.collect_bytes() == b"x"
    feed.fail(RuntimeError("gone"))
    with pytest.raises(InputStreamError, match="gone"):
        await second.collect_bytes()
    assert await first.read() == b""  # a stream read to its end stays ended

    waiting = PackageFeed(before_block=before_block)
    waiting.detach()
    waiting.fail(RuntimeError("broken"))
    with pytest.raises(InputStreamError, match="broken"):
        await waiting.package.streams()
    assert blocked == []
