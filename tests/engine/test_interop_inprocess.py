"""``cartridges/interop.py`` served in-process by our own harness: the caps the reference host
cannot exercise (it never forwards CANCEL, and a peer call needs an engine that answers it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from cartridge_runtime.protocol import MessageId, frames
from cartridge_runtime.testing import CartridgeHarness

SCRIPT = Path(__file__).resolve().parents[2] / "cartridges" / "interop.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("interop_cartridge_inproc", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INTEROP = _load()
URNS: dict[str, str] = INTEROP.URNS


@pytest.mark.asyncio
async def test_peer_echo_calls_echo_through_the_host() -> None:
    seen: list[tuple[str, list[tuple[str, bytes]]]] = []

    async def echo(cap: str, inputs: list[tuple[str, bytes]]) -> bytes:
        seen.append((cap, inputs))
        return b"".join(data for _, data in inputs)

    async with CartridgeHarness(INTEROP.build_runtime(), peers={URNS["echo"]: echo}) as h:
        result = await h.call(URNS["peer-echo"], [("media:", b"round trip")], timeout=10)
    result.raise_for_error()
    assert result.main_bytes == b"round trip"
    assert seen == [("cap:echo", [("media:", b"round trip")])]


@pytest.mark.asyncio
async def test_sleep_is_cancellable() -> None:
    async with CartridgeHarness(INTEROP.build_runtime()) as h:
        rid = MessageId.new()
        call = await h.start_call(
            URNS["sleep"], [("media:fmt=json;record", b'{"ms": 60000}')], rid=rid
        )
        await h.send_frame(frames.cancel(rid))
        result = await h.result(call, timeout=10)
    assert result.error is not None
    assert result.error.code == "CANCELLED"
    assert result.end is None


@pytest.mark.asyncio
async def test_sleep_short_completes() -> None:
    async with CartridgeHarness(INTEROP.build_runtime()) as h:
        result = await h.call(URNS["sleep"], [("media:fmt=json;record", b'{"ms": 1}')], timeout=10)
    result.raise_for_error()
    assert result.main_bytes == b"slept-1"


@pytest.mark.asyncio
async def test_generate_and_echo_large() -> None:
    size = 3 * 1024 * 1024 + 5
    async with CartridgeHarness(INTEROP.build_runtime()) as h:
        generated = await h.call(
            URNS["generate"], [("media:fmt=json;record", f'{{"size": {size}}}'.encode())]
        )
        generated.raise_for_error()
        data = generated.main_bytes
        assert data == (b"ABCDEFGH" * (size // 8 + 1))[:size]
        echoed = await h.call(URNS["echo"], [("media:", data)])
    assert echoed.raise_for_error().main_bytes == data
