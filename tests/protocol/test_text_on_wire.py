"""Text on the wire (REQ-38): ``emit_text`` sends UTF-8 in CBOR byte strings,
and the engine sends a ``str`` input the same way, inline or streamed."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.runtime import BlockingRequest, CartridgeRuntime, Request
from cartridge_runtime.testing import call_sync

TEXT = "media:enc=utf-8"
SAY = 'cap:in="media:enc=utf-8";op=say;out="media:enc=utf-8"'
SAY_SYNC = 'cap:in="media:enc=utf-8";op=say-sync;out="media:enc=utf-8"'
LIST = 'cap:in="media:enc=utf-8";op=say-list;out="media:enc=utf-8;list"'


def _runtime() -> CartridgeRuntime:
    runtime = CartridgeRuntime(
        Manifest.build(
            name="say",
            version="1.0.0",
            description="say",
            caps=[
                CapDef.simple(SAY, "Say", aliases="say"),
                CapDef.simple(SAY_SYNC, "Say sync", aliases="say-sync"),
                CapDef.simple(LIST, "Say list", aliases="say-list", output_is_sequence=True),
            ],
        )
    )

    @runtime.op(SAY)
    async def say(req: Request) -> None:
        text = await req.take_input().require_stream_str(TEXT)
        await req.output().emit_text("é" * 200_000 + text)
        with pytest.raises(TypeError):
            await req.output().emit_text(b"bytes")  # type: ignore[arg-type]

    @runtime.op(SAY_SYNC)
    def say_sync(req: BlockingRequest) -> None:
        req.output().emit_text("ünï")

    @runtime.op(LIST)
    async def say_list(req: Request) -> None:
        out = req.output()
        await out.emit_text("a")  # a declared sequence output: one item
        await out.emit_text("β", meta={"n": 2})

    return runtime


def test_emit_text_sends_utf8_byte_strings() -> None:
    result = call_sync(_runtime(), SAY, [(TEXT, b"!")])
    assert result.ok, result.error
    assert result.main is not None
    assert len(result.main.values) > 1  # cut at the chunk size, on byte boundaries
    assert all(isinstance(v, bytes) for v in result.main.values)
    assert result.main.text == "é" * 200_000 + "!"


def test_emit_text_from_a_blocking_handler() -> None:
    result = call_sync(_runtime(), SAY_SYNC, [(TEXT, b"")])
    assert result.main is not None and result.main.values == ["ünï".encode()]


def test_emit_text_on_a_sequence_output_is_one_item_each() -> None:
    result = call_sync(_runtime(), LIST, [(TEXT, b"")])
    assert result.main is not None and result.main.is_sequence
    assert result.main.items == [(b"a", None), ("β".encode(), {"n": 2})]


_PROBE = textwrap.dedent(
    """
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime, Request

    CAP = 'cap:in="media:enc=utf-8";op=probe;out="media:fmt=json;record"'
    runtime = CartridgeRuntime(
        Manifest.build(name="probe", version="1.0.0", description="probe",
                       caps=[CapDef.simple(CAP, "Probe", aliases="probe")])
    )

    @runtime.op(CAP)
    async def probe(req: Request) -> None:
        stream = await req.take_input().open_stream("media:enc=utf-8")
        kinds, size = set(), 0
        async for value in stream.values():
            kinds.add(type(value).__name__)
            size += len(value)
        await req.output().emit_text(f'{{"kinds": {sorted(kinds)!r}, "size": {size}}}'.replace("'", '"'))

    if __name__ == "__main__":
        runtime.run()
    """
)


@pytest.mark.asyncio
@pytest.mark.parametrize("length", [10, 3_000_000])  # inline, then streamed past INLINE_MAX
async def test_the_engine_sends_str_inputs_as_utf8_bytes(tmp_path: Path, length: int) -> None:
    import json

    from cartridge_runtime.engine import Engine

    script = tmp_path / "probe.py"
    script.write_text(_PROBE)
    cap = 'cap:in="media:enc=utf-8";op=probe;out="media:fmt=json;record"'
    async with Engine() as engine:
        engine.add_cartridge([sys.executable, str(script)])
        result = await engine.call(cap, [(TEXT, "ü" * length)], timeout=120)
    answer = json.loads(result.data)
    assert answer == {"kinds": ["bytes"], "size": 2 * length}
