"""The harness's fake peers and its results, named and shaped as the engine's.

A fake peer raising a typed error reaches the calling handler with its code, class and
``arg_urn``; a :class:`PeerReply` returns a sequence main output and further outputs; the
harness's :class:`CallResult` answers ``data``, ``items``, ``outputs`` as the engine's
:class:`Result` does, for the same cartridge and call.
"""

from __future__ import annotations

from typing import Any

import pytest
from _engine_helpers import INTEROP

from cartridge_runtime.engine import CallError, Engine, Item
from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import CartridgeRuntime, OpError, PeerCallError, Request
from cartridge_runtime.testing import CartridgeHarness, PeerReply

TEXT = "media:enc=utf-8"
SIDE = "media:fmt=json;record"
ASK = f'cap:in="{TEXT}";out="{TEXT}";ask'
REMOTE = f'cap:in="{TEXT}";out="{TEXT}";remote'


def _asking_runtime(seen: list[Any]) -> CartridgeRuntime:
    runtime = CartridgeRuntime(
        Manifest.build(
            name="asker",
            version="1.0.0",
            description="calls a peer",
            caps=[CapDef.simple(ASK, "Ask", aliases="ask")],
        )
    )

    @runtime.op(ASK)
    async def ask(req: Request) -> None:
        text = await req.take_input().require_stream_str(TEXT)
        response = await req.peer().call_with_bytes(REMOTE, [(TEXT, text.encode())])
        events = [event async for event in response]
        seen.extend(events)
        main = b"".join(
            e.value if isinstance(e.value, bytes) else repr(e.value).encode()
            for e in events
            if getattr(e, "output", "x") is None
        )
        await req.output().write(main)

    return runtime


@pytest.mark.asyncio
async def test_fake_peer_typed_error_arrives_intact() -> None:
    async def remote(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
        raise OpError("TOO_LONG", "the text is too long", "input", arg_urn=TEXT)

    async with CartridgeHarness(_asking_runtime([]), peers={REMOTE: remote}) as h:
        result = await h.call(ASK, [(TEXT, b"hello")])
    assert result.error is not None
    assert (result.error.code, result.error.attribution_class, result.error.arg_urn) == (
        "TOO_LONG",
        "input",
        TEXT,
    )
    assert result.error.message == "the text is too long"


@pytest.mark.asyncio
async def test_fake_peer_plain_exception_names_its_type() -> None:
    async def remote(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
        raise KeyError("k")

    async with CartridgeHarness(_asking_runtime([]), peers={REMOTE: remote}) as h:
        result = await h.call(ASK, [(TEXT, b"hello")])
    assert result.error is not None and result.error.code == "PEER_FAILED"
    assert result.error.message == "KeyError: 'k'"


@pytest.mark.asyncio
async def test_fake_peer_returns_every_output() -> None:
    async def remote(cap: str, inputs: list[tuple[str, bytes]]) -> PeerReply:
        return PeerReply(
            items=[Item(b"one", {"n": 1}), b"two"],
            outputs={SIDE: b'{"count": 2}', "media:list;enc=utf-8": ["x", "y"]},
            media_urn=f"{TEXT};list",
        )

    seen: list[Any] = []
    async with CartridgeHarness(_asking_runtime(seen), peers={REMOTE: remote}) as h:
        result = await h.call(ASK, [(TEXT, b"hello")])
    assert result.ok, result.error
    main = [(e.value, e.meta) for e in seen if e.output is None]
    assert main == [(b"one", {"n": 1}), (b"two", None)]
    side = [e.value for e in seen if e.output == SIDE]
    assert side == [b'{"count": 2}']
    listed = [e.value for e in seen if e.output == "media:list;enc=utf-8"]
    assert listed == ["x", "y"]


@pytest.mark.asyncio
async def test_peer_error_raised_by_handler_keeps_its_fields() -> None:
    """A PeerCallError a handler lets escape is the ERR of its own request, fields kept."""

    async def remote(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
        raise CallError("REMOTE_DOWN", "environment", "the remote is down", "media:x")

    async with CartridgeHarness(_asking_runtime([]), peers={REMOTE: remote}) as h:
        result = await h.call(ASK, [(TEXT, b"hello")])
    assert result.error is not None
    assert (result.error.code, result.error.attribution_class, result.error.arg_urn) == (
        "REMOTE_DOWN",
        "environment",
        "media:x",
    )
    assert issubclass(PeerCallError, Exception)


@pytest.mark.asyncio
async def test_harness_result_and_engine_result_share_names_and_shapes() -> None:
    import sys

    sys.path.insert(0, str(INTEROP.parent))
    try:
        from interop import build_runtime  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    split = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";split'
    words = 'cap:in="media:enc=utf-8";out="media:enc=utf-8;list";words'
    async with CartridgeHarness(build_runtime()) as h:
        h_split = await h.call(split, [(TEXT, b"Hello")])
        h_words = await h.call(words, [(TEXT, b"a b")])
    async with Engine() as engine:
        engine.add_cartridge(str(INTEROP))
        e_split = await engine.call_bytes(split, [(TEXT, b"Hello")])
        e_words = await engine.call_bytes(words, [(TEXT, b"a b")])
    assert h_split.data == e_split.data == b"HELLO"
    assert h_words.items == e_words.items == [b"a", b"b"]
    assert set(h_split.outputs) == set(e_split.outputs)
    for key, out in e_split.outputs.items():
        assert h_split.outputs[key].data == out.data
        assert h_split.outputs[key].media_urn == out.media_urn
    h_main, e_main = h_words.outputs[None], e_words.outputs[None]
    assert list(h_main.items) == list(e_main.items)  # Item(value, meta) on both sides
    assert all(isinstance(i, Item) for i in (*h_main.items, *e_main.items))
    assert h_words.message == e_words.message
