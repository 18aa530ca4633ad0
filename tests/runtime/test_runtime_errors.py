"""Bad input and failing handlers: every refusal is a precise ERR or a loud exit."""

from __future__ import annotations

import struct

import anyio
import cbor2
import pytest
from _runtime_cartridge import (
    BOOM,
    ECHO,
    FAIL,
    FAILAFTER,
    REQUIRE,
    SLOW,
    TWICE,
    UNDECLARED,
    build_runtime,
)

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.protocol import (
    ZERO_ID,
    Frame,
    FrameType,
    Limits,
    MessageId,
    encode_frame,
    frames,
)
from cartridge_runtime.runtime import EXIT_FAILURE, EXIT_OK, EXIT_PROTOCOL, CartridgeRuntime
from cartridge_runtime.testing import CartridgeHarness, memory_byte_pipe


def err_meta(result):
    e = result.error
    assert e is not None, result
    return (e.code, e.attribution_class)


@pytest.mark.asyncio
async def test_unknown_cap_is_no_handler_with_xid() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(
            "cap:in=media:;op=nothing-here;out=media:", [("media:", b"x")], xid=MessageId(3)
        )
    assert err_meta(r) == ("NO_HANDLER", "environment")
    assert (
        r.error.message == "No handler registered for cap: cap:in=media:;op=nothing-here;out=media:"
    )
    assert r.frames[0].routing_id == MessageId(3) and r.frames[0].seq == 0


@pytest.mark.asyncio
async def test_req_before_policy_is_protocol_violation_but_identity_works() -> None:
    async with CartridgeHarness(build_runtime(), policy=None) as h:
        r = await h.call(ECHO, [("media:", b"x")], xid=MessageId(1))
        ident = await h.call("cap:effect=none", [("media:", b"id")])
    assert err_meta(r) == ("PROTOCOL_VIOLATION", "internal")
    assert r.frames[0].routing_id == MessageId(1)
    assert ident.main_bytes == b"id"


@pytest.mark.asyncio
async def test_req_with_payload_and_req_without_cap() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        rid = MessageId.new()
        await h.send_frame(frames.req(rid, ECHO).replace(payload=b"\x01"))
        f = await h.wait_for(lambda f: f.id == rid)
        assert f.frame_type is FrameType.ERR and f.meta["code"] == "PROTOCOL_ERROR"
        rid2 = MessageId.new()
        await h.send_frame(
            Frame(frame_type=FrameType.REQ, id=rid2, payload=b"", routing_id=MessageId(9))
        )
        g = await h.wait_for(lambda f: f.id == rid2)
        assert (
            g.frame_type is FrameType.ERR
            and g.meta["code"] == "INVALID_REQUEST"
            and g.routing_id == MessageId(9)
        )


@pytest.mark.asyncio
async def test_bad_checksum_reaches_handler_as_stream_error() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        rid = MessageId.new()
        call = await h.start_call(ECHO, [], rid=rid, end=False)
        await h.send_frame(frames.stream_start(rid, "a", "media:"))
        bad = frames.chunk(rid, "a", 0, cbor2.dumps(b"data"))
        await h.send_frame(bad.replace(checksum=(bad.checksum or 0) ^ 1))
        r = await h.result(call)
    assert err_meta(r) == ("HANDLER_ERROR", "internal")
    assert "Checksum mismatch" in r.error.message


@pytest.mark.asyncio
async def test_chunk_beyond_credit_window() -> None:
    async with CartridgeHarness(build_runtime(), limits=Limits(initial_credit=2)) as h:
        rid = MessageId.new()
        call = await h.start_call(SLOW, [], rid=rid, end=False)  # never reads its input
        await h.send_frame(frames.stream_start(rid, "a", "media:"))
        for i in range(3):
            await h.send_frame(frames.chunk(rid, "a", i, cbor2.dumps(b"x")))
        r = await h.result(call)
    assert r.error.code == "CREDIT_VIOLATION"
    assert "beyond the granted window" in r.error.message


@pytest.mark.asyncio
async def test_stream_state_error_is_protocol_error_for_that_request() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        rid = MessageId.new()
        call = await h.start_call(ECHO, [], rid=rid, end=False)
        await h.send_frame(frames.chunk(rid, "never-started", 0, cbor2.dumps(b"x")))
        r = await h.result(call)
        ok = await h.call(ECHO, [("media:", b"still alive")])
    assert err_meta(r) == ("PROTOCOL_ERROR", "internal")
    assert ok.main_bytes == b"still alive"


@pytest.mark.asyncio
async def test_missing_input_second_take_undeclared_output() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        missing = await h.call(REQUIRE, [("media:other", b"x")])
        twice = await h.call(TWICE, [("media:", b"x")])
        undeclared = await h.call(UNDECLARED, [("media:", b"x")])
    assert err_meta(missing) == ("MISSING_INPUT", "input")
    assert (
        "media:wanted;enc=utf-8" in missing.error.message and "media:other" in missing.error.message
    )
    assert missing.error.arg_urn == "media:wanted;enc=utf-8"
    assert twice.error.code == "INPUT_ALREADY_TAKEN"
    assert undeclared.error.code == "UNKNOWN_OUTPUT" and "media:nope" in undeclared.error.message


@pytest.mark.asyncio
async def test_op_error_keeps_code_class_and_arg_urn() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(FAIL, [("media:", b"oops")])
    assert r.error.code == "PEER_BAD_INPUT"
    assert r.error.attribution_class == "input"
    assert r.error.arg_urn == "media:"
    assert r.error.message == "bad input: oops"
    assert [f.frame_type for f in r.frames] == [FrameType.ERR]


@pytest.mark.asyncio
async def test_plain_exception_is_handler_error(capsys: pytest.CaptureFixture[str]) -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(BOOM, [("media:", b"x")])
    assert err_meta(r) == ("HANDLER_ERROR", "internal") and r.error.message == "ValueError: kaboom"
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.asyncio
async def test_error_after_output_has_no_stream_end() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        r = await h.call(FAILAFTER, [("media:", b"")])
    assert [f.frame_type.name for f in r.frames] == ["STREAM_START", "CHUNK", "ERR"]
    assert err_meta(r) == ("BAD_PAGE", "input")
    assert [f.seq for f in r.frames] == [0, 1, 2]


@pytest.mark.asyncio
async def test_hello_after_handshake_is_err_id0() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        await h.send_frame(frames.hello(Limits()))
        f = await h.wait_for(lambda f: f.frame_type is FrameType.ERR and f.id == ZERO_ID)
        assert f.meta["code"] == "PROTOCOL_ERROR"
        r = await h.call(ECHO, [("media:", b"ok")])
        assert r.main_bytes == b"ok"


@pytest.mark.asyncio
async def test_relay_frame_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    async with CartridgeHarness(build_runtime()) as h:
        await h.send_frame(Frame(frame_type=FrameType.RELAY_STATE, id=ZERO_ID, payload=b"x"))
        assert await h.wait_exit() == EXIT_FAILURE
    assert "RELAY_STATE" in capsys.readouterr().err


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">I", 5) + b"\xff\xff\xff\xff\xff",  # bad CBOR
        struct.pack(">I", 20_000_000),  # over the hard cap
        struct.pack(">I", 100) + b"\xa1",  # truncated frame at EOF
    ],
)
async def test_untrustworthy_byte_stream_exits_65(
    garbage: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    async with CartridgeHarness(build_runtime()) as h:
        await h.send_raw(garbage)
        await h.close_input()
        assert await h.wait_exit() == EXIT_PROTOCOL
    err = capsys.readouterr().err
    assert err.count("cartridge: protocol error:") == 1 and "Traceback" not in err


@pytest.mark.asyncio
async def test_stdin_eof_exits_0_and_cancels_incomplete_requests() -> None:
    async with CartridgeHarness(build_runtime()) as h:
        rid = MessageId.new()
        call = await h.start_call(ECHO, [], rid=rid, end=False)
        await h.send_frame(frames.stream_start(rid, "a", "media:"))
        await h.close_input()
        assert await h.wait_exit() == EXIT_OK
        r = await h.result(call)
    assert r.error.code == "CANCELLED"


async def _raw_session(first: bytes) -> tuple[int, bytes]:
    to_c, c_in = memory_byte_pipe()
    c_out, from_c = memory_byte_pipe()
    await to_c.send(first)
    await to_c.aclose()
    status = await build_runtime().serve(c_in, c_out)
    await c_out.aclose()
    out = b""
    try:
        while True:
            out += await from_c.receive()
    except (anyio.EndOfStream, anyio.ClosedResourceError):
        pass
    return status, out


@pytest.mark.asyncio
async def test_version_mismatch_exits_1_writing_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    hello = frames.hello(Limits())
    bad = hello.replace(meta={**hello.meta, "version": 5})
    status, out = await _raw_session(encode_frame(bad))
    assert status == EXIT_FAILURE and out == b""
    assert "handshake failed" in capsys.readouterr().err
    status2, out2 = await _raw_session(encode_frame(frames.policy("full")))
    assert status2 == EXIT_FAILURE and out2 == b""


@pytest.mark.asyncio
async def test_eof_before_anything_is_clean() -> None:
    status, out = await _raw_session(b"")
    assert status == EXIT_OK and out == b""


@pytest.mark.asyncio
async def test_handler_error_names_the_exception_type() -> None:
    """``KeyError('x')`` reads ``KeyError: 'x'`` (its text alone, ``'x'``, says nothing)."""
    from cartridge_runtime.runtime import Request

    cap = 'cap:in="media:";out="media:";keyerr'
    runtime = CartridgeRuntime(
        Manifest.build(
            name="k", version="1.0.0", description="k", caps=[CapDef.simple(cap, "K", aliases="k")]
        )
    )

    @runtime.op(cap)
    async def keyerr(req: Request) -> None:
        raise KeyError("x")

    async with CartridgeHarness(runtime) as h:
        r = await h.call(cap, [("media:", b"")])
    assert r.error is not None and r.error.code == "HANDLER_ERROR"
    assert r.error.message == "KeyError: 'x'"


@pytest.mark.asyncio
async def test_a_broken_byte_stream_ends_every_open_request_with_protocol_error() -> None:
    # FRM-21: one request running, one queued behind it on a pool of one; then garbage.
    async with CartridgeHarness(build_runtime(capacities={SLOW: 1})) as h:
        running = MessageId.new()
        call1 = await h.start_call(SLOW, [("media:", b"")], rid=running)
        await h.wait_for(
            lambda f: f.id == running and f.frame_type is FrameType.LOG and f.meta is not None
        )
        queued = MessageId.new()
        call2 = await h.start_call(SLOW, [("media:", b"")], rid=queued)
        await h.wait_for(
            lambda f: (
                f.id == queued
                and f.frame_type is FrameType.LOG
                and (f.meta or {}).get("level") == "queued"
            )
        )
        await h.send_raw(struct.pack(">I", 5) + b"\xff\xff\xff\xff\xff")
        assert await h.wait_exit() == EXIT_PROTOCOL
        for call in (call1, call2):
            result = await h.result(call, timeout=10)
            assert result.error is not None
            assert result.error.code == "PROTOCOL_ERROR"
            assert result.error.attribution_class == "internal"
        zero = [f for f in h.received if f.id == ZERO_ID and f.frame_type is FrameType.ERR]
        assert len(zero) == 1 and (zero[0].meta or {}).get("code") == "PROTOCOL_ERROR"
