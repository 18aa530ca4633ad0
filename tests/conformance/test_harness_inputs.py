"""The in-process harness's argument shapes, pending-call cancel and peer matching."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.protocol import FrameType, MessageId
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, WetContext
from cartridge_runtime.testing import (
    CartridgeHarness,
    HarnessCall,
    Input,
    Item,
    run_op,
)

INTEROP_PATH = Path(__file__).resolve().parents[2] / "cartridges" / "interop.py"


def _load_interop() -> Any:
    spec = importlib.util.spec_from_file_location("_harness_interop", INTEROP_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


INTEROP = _load_interop()
URNS = INTEROP.URNS
ITEMS_CAP = "cap:in=media:;op=items;out=media:"
LIVE_CAP = "cap:in=media:;op=live;out=media:"
ASK_CAP = "cap:in=media:;op=ask;out=media:"


class EchoItems(Op):
    """Every input value back as a sequence item ``[is_sequence, value]`` with its item meta."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        out = wet.request.output()
        await out.start(is_sequence=True)
        async for stream in wet.request.take_input():
            async for item in stream.items():
                await out.emit_list_item([stream.is_sequence, item.value], item.meta)


class Live(Op):
    """Echoes each piece of an input as an item as soon as it arrives (incremental read)."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        out = wet.request.output()
        await out.start(is_sequence=True)
        async for stream in wet.request.take_input():
            async for chunk in stream:
                await out.emit_list_item(chunk, {"unbounded": stream.is_unbounded})


class Ask(Op):
    """Sends its input to the host's ``cap:op=up`` (spelt long-hand) and returns the answer."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        data = await (await anext(aiter(wet.request.take_input()))).collect_bytes()
        response = await wet.request.peer().call_with_bytes(
            "cap:in=media:;op=up;out=media:", [("media:", data)]
        )
        await wet.request.output().write(await response.collect_bytes())


def _runtime(cap: str, op: type[Op]) -> CartridgeRuntime:
    manifest = Manifest.build(
        name="harness-inputs",
        version="0.0.0",
        description="harness input tests",
        caps=[CapDef.simple(cap, "Under test", aliases="under-test")],
    )
    runtime = CartridgeRuntime(manifest)
    runtime.register_op(cap, op)
    return runtime


# -- sequences ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_sequence_items_with_meta_reach_the_handler() -> None:
    from cartridge_runtime.engine import Item as EngineItem

    items = [
        Item(b"a", {"page": 1}),
        "b",
        (3, {"k": "v"}),
        (b"d", None),
        EngineItem(value=[1, 2], meta={"e": True}),
    ]
    r = await run_op(EchoItems, ITEMS_CAP, [("media:", items)])
    assert r.ok, r.error
    ss = next(f for f in r.frames if f.frame_type is FrameType.STREAM_START)
    assert ss.is_sequence is True
    assert r.main is not None
    assert r.main.items == [
        ([True, b"a"], {"page": 1}),
        ([True, "b"], None),
        ([True, 3], {"k": "v"}),
        ([True, b"d"], None),
        ([True, [1, 2]], {"e": True}),
    ]


@pytest.mark.asyncio
async def test_input_forces_sequence_and_text_is_utf8() -> None:
    async with CartridgeHarness(_runtime(ITEMS_CAP, EchoItems)) as h:
        r = await h.call(
            ITEMS_CAP,
            [Input("media:", b"one", is_sequence=True), ("media:enc=utf-8", "héllo")],
        )
    assert r.ok, r.error
    assert r.main is not None
    assert r.main.items == [([True, b"one"], None), ([False, "héllo".encode()], None)]


@pytest.mark.asyncio
async def test_bad_input_shapes_raise_type_error() -> None:
    async with CartridgeHarness(_runtime(ITEMS_CAP, EchoItems)) as h:
        with pytest.raises(TypeError):
            await h.start_call(ITEMS_CAP, [("media:", 12.5)])
        with pytest.raises(TypeError):
            await h.start_call(ITEMS_CAP, [Input("media:", [b"x"], is_sequence=False)])
        with pytest.raises(TypeError):
            await h.start_call(ITEMS_CAP, [b"no media"])  # type: ignore[list-item]


# -- streamed and unbounded --------------------------------------------------------------------


@pytest.mark.asyncio
async def test_async_iterable_input_streams_mebibytes_through_sha256() -> None:
    block = bytes(range(256)) * 256  # 64 KiB
    pieces = 48  # 3 MiB
    expected = hashlib.sha256(block * pieces).hexdigest()

    async def source() -> AsyncIterator[bytes]:
        for _ in range(pieces):
            yield block

    async with CartridgeHarness(INTEROP.build_runtime()) as h:
        rid = MessageId.new()
        call = await h.start_call(URNS["sha256"], [("media:", source())], rid=rid)
        r = await call.result(timeout=60)
        sent_chunks = sum(s.chunks_sent for s in call.args.values())
        credits = [f for f in h.received if f.id == rid and f.frame_type is FrameType.CREDIT]
    assert r.ok, r.error
    assert r.main_bytes.decode() == expected
    # More CHUNKs went out than the initial window: the sender waited for CREDIT.
    assert sent_chunks > h.limits.initial_credit
    assert credits


@pytest.mark.asyncio
async def test_unbounded_input_is_read_piece_by_piece() -> None:
    async with CartridgeHarness(_runtime(LIVE_CAP, Live)) as h:
        rid = MessageId.new()

        async def live() -> AsyncIterator[bytes]:
            for i in range(3):
                yield b"piece-%d" % i
                # The next piece only once the handler echoed this one: proves it streams.
                await h.wait_for(
                    lambda f, i=i: (
                        f.id == rid and f.frame_type is FrameType.CHUNK and f.chunk_index == i
                    )
                )

        call = await h.start_call(LIVE_CAP, [Input("media:", live(), unbounded=True)], rid=rid)
        r = await call.result()
    assert r.ok, r.error
    sent = [f for f in call.partial.frames if f.frame_type is FrameType.STREAM_START]
    assert sent and r.main is not None
    assert r.main.items == [(b"piece-%d" % i, {"unbounded": True}) for i in range(3)]


# -- pending calls and cancel ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cancel_running_sleep_with_a_user_reason() -> None:
    async with CartridgeHarness(INTEROP.build_runtime()) as h:
        call = await h.start_call(URNS["sleep"], [(INTEROP.JSON_RECORD, b'{"ms": 60000}')])
        assert isinstance(call, HarnessCall) and not call.finished
        await call.cancel(code="CANCELLED", attribution_class="user", message="stop now")
        r = await call.result(timeout=10)
    assert r.error is not None and r.end is None
    assert (r.error.code, r.error.attribution_class) == ("CANCELLED", "user")
    assert r.error.message == "stop now"


@pytest.mark.asyncio
async def test_cancel_without_reason_and_aborted_mapping() -> None:
    async with CartridgeHarness(INTEROP.build_runtime()) as h:
        plain = await h.start_call(URNS["sleep"], [(INTEROP.JSON_RECORD, b'{"ms": 60000}')])
        aborted = await h.start_call(URNS["sleep"], [(INTEROP.JSON_RECORD, b'{"ms": 60000}')])
        await plain.cancel()
        await aborted.cancel(code="ABORTED", attribution_class="environment", message="shutdown")
        r1 = await plain.result(timeout=10)
        r2 = await aborted.result(timeout=10)
    assert r1.error is not None and r2.error is not None
    assert (r1.error.code, r1.error.attribution_class) == ("CANCELLED", "internal")
    assert r1.error.message == "Request cancelled"
    assert (r2.error.code, r2.error.attribution_class) == ("ABORTED", "environment")
    assert r2.error.message == "Request aborted by the host: shutdown"


# -- peers -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_peer_callback_matched_by_equivalent_spelling() -> None:
    seen: list[str] = []

    async def up(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
        seen.append(cap)
        return b"".join(data for _, data in inputs).upper()

    peers = {'cap:out="media:";op=up;in="media:"': up}
    async with CartridgeHarness(_runtime(ASK_CAP, Ask), peers=peers) as h:
        r = await h.call(ASK_CAP, [("media:", b"shout")])
    assert r.ok, r.error
    assert r.main_bytes == b"SHOUT"
    assert len(seen) == 1


@pytest.mark.asyncio
async def test_peer_exact_text_wins_and_unknown_cap_is_no_handler() -> None:
    async def exact(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
        return b"exact"

    async def general(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
        return b"general"

    async with CartridgeHarness(
        INTEROP.build_runtime(), peers={"cap:": general, URNS["echo"]: exact}
    ) as h:
        r = await h.call(URNS["peer-echo"], [("media:", b"x")])
    assert r.ok, r.error
    assert r.main_bytes == b"exact"

    async with CartridgeHarness(INTEROP.build_runtime(), peers={"cap:op=other": exact}) as h:
        r = await h.call(URNS["peer-echo"], [("media:", b"x")])
    assert r.error is not None
