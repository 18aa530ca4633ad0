"""The call API: ``await engine.call(...)`` is the whole Result,
``async with engine.call(...)`` streams, every call API takes ``timeout=``, and
``str(CallError)`` is the one-line form with the code."""

from __future__ import annotations

import anyio
import pytest
from _engine_helpers import INTEROP, RAW, interop_caps, raw_env

from cartridge_runtime.engine import (
    CallError,
    CallTimeout,
    CartridgeDied,
    Engine,
    EngineError,
    OutputData,
    Result,
)

BYTES = "media:"
JSON = "media:fmt=json;record"
TEXT = "media:enc=utf-8"


def cap(alias: str) -> str:
    return interop_caps()[alias]


@pytest.mark.asyncio
async def test_awaiting_a_call_returns_the_whole_result() -> None:
    async with Engine() as e:
        e.add_cartridge(INTEROP)
        result = await e.call(cap("echo"), [(BYTES, b"whole")])
        assert isinstance(result, Result) and result.data == b"whole"
        alias = await e.call_bytes(cap("echo"), [(BYTES, b"whole")])
        assert alias.data == result.data


@pytest.mark.asyncio
async def test_the_same_call_streams_as_a_context() -> None:
    async with Engine() as e:
        e.add_cartridge(INTEROP)
        async with e.call(cap("echo"), [(BYTES, b"streamed")]) as response:
            data = b"".join([ev.value async for ev in response if isinstance(ev, OutputData)])
        assert data == b"streamed"


@pytest.mark.asyncio
async def test_a_call_runs_once() -> None:
    async with Engine() as e:
        e.add_cartridge(INTEROP)
        call = e.call(cap("echo"), [(BYTES, b"x")])
        assert (await call).data == b"x"
        with pytest.raises(EngineError, match="runs once"):
            await call


@pytest.mark.asyncio
async def test_an_awaited_call_raises_the_call_error() -> None:
    async with Engine() as e:
        e.add_cartridge(INTEROP)
        with pytest.raises(CallError) as info:
            await e.call(cap("fail"), [(TEXT, "nope")])
    err = info.value
    assert str(err) == err.one_line()
    assert str(err).startswith(f"{err.code} ({err.attribution_class}): ")
    assert "\n" not in str(err)


def test_str_of_a_call_error_is_one_line_with_the_code() -> None:
    err = CartridgeDied("cartridge x died (exit status 3); it closed its stdout. stderr:\nboom")
    assert str(err) == "CARTRIDGE_DIED (environment): cartridge x died (exit status 3); " + (
        "it closed its stdout. stderr:"
    )
    assert "boom" in err.message  # the whole text stays on .message
    assert repr(err).startswith("CartridgeDied(")


@pytest.mark.asyncio
@pytest.mark.parametrize("form", ["await", "call_bytes", "stream"])
async def test_a_timeout_cancels_the_call_and_fails_it_typed(form: str) -> None:
    async with Engine() as e:
        e.add_cartridge(INTEROP)
        await e.call(cap("echo"), [(BYTES, b"started")])
        inputs = [(JSON, b'{"ms": 60000}')]
        with anyio.fail_after(60), pytest.raises(CallTimeout) as info:
            if form == "await":
                await e.call(cap("sleep"), inputs, timeout=0.2)
            elif form == "call_bytes":
                await e.call_bytes(cap("sleep"), inputs, timeout=0.2)
            else:
                async with e.call(cap("sleep"), inputs, timeout=0.2) as response:
                    async for _ in response:
                        pass
        err = info.value
        assert err.code == "TIMEOUT" and err.attribution_class == "resource" and err.retryable
        assert "timeout of 0.2 s" in err.message
        # The cartridge was told (CANCEL) and keeps serving.
        assert (await e.call(cap("echo"), [(BYTES, b"after")], timeout=30)).data == b"after"
        (status,) = e.status()
        assert status.starts == 1


@pytest.mark.asyncio
async def test_a_timeout_covers_the_start_up() -> None:
    async with Engine(step_timeout=30) as e:
        e.add_cartridge(RAW, env=raw_env("silent"), known_caps=["cap:echo"])
        with anyio.fail_after(60), pytest.raises(CallTimeout) as info:
            await e.call("cap:echo", [(BYTES, b"x")], timeout=0.3)
        assert "could not start" in info.value.message


@pytest.mark.asyncio
async def test_a_call_that_finishes_in_time_is_not_touched_by_its_timeout() -> None:
    async with Engine() as e:
        e.add_cartridge(INTEROP)
        result = await e.call(cap("echo"), [(BYTES, b"x" * 1_000_000)], timeout=60)
        assert result.data == b"x" * 1_000_000


PEER_SLOW = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";never-answers'
ASKS = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";asks'


@pytest.mark.asyncio
async def test_a_peer_call_takes_a_timeout_too() -> None:
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime, Request
    from cartridge_runtime.testing import CartridgeHarness

    rt = CartridgeRuntime(
        Manifest.build(
            name="asker",
            version="1.0.0",
            description="t",
            caps=[CapDef.simple(ASKS, "A", aliases="a")],
        )
    )

    @rt.op(ASKS)
    async def asks(req: Request) -> None:
        text = await req.take_input().require_stream_str(TEXT)
        response = await req.peer().call_with_bytes(PEER_SLOW, [(TEXT, text.encode())], timeout=0.2)
        await req.output().emit_cbor(await response.collect_bytes())

    async def never(cap: str, inputs: object) -> bytes:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with CartridgeHarness(rt, peers={PEER_SLOW: never}) as h:
        result = await h.call(ASKS, [(TEXT, b"x")], timeout=30)
    assert result.error is not None
    assert (result.error.code, result.error.attribution_class) == ("TIMEOUT", "resource")
    assert "timeout of 0.2 s" in result.error.message


def test_await_and_timeout_on_trio() -> None:
    async def main() -> None:
        async with Engine() as e:
            e.add_cartridge(INTEROP)
            assert (await e.call(cap("echo"), [(BYTES, b"trio")], timeout=30)).data == b"trio"
            with pytest.raises(CallTimeout):
                await e.call(cap("sleep"), [(JSON, b'{"ms": 60000}')], timeout=0.2)
            assert (await e.call(cap("echo"), [(BYTES, b"again")])).data == b"again"

    anyio.run(main, backend="trio")
