"""No ``repr``, ``str``, error message or log line shows an argument value or a meta value.

A recognisable secret goes through every public object of a call (harness and engine: inputs,
items, frames, events, results, errors) and through the error paths for malformed input; it
must appear in none of their texts. The values themselves still arrive intact.
"""

from __future__ import annotations

import logging
import subprocess
import sys

import anyio
import cbor2
import pytest
from _engine_helpers import INTEROP

from cartridge_runtime._item import Item
from cartridge_runtime.cli._call_inputs import UsageError, check_before_spawn, split_arg
from cartridge_runtime.engine import Engine
from cartridge_runtime.engine._inputs import normalize_inputs
from cartridge_runtime.manifest import CapDef, Manifest
from cartridge_runtime.protocol import FrameDecoder, MessageId, encode_frame, frames
from cartridge_runtime.runtime import CartridgeRuntime, InputItem, PeerData, Request
from cartridge_runtime.testing import CartridgeHarness, Input
from cartridge_runtime.testing._harness_call import as_input

SECRET = "hunter2-S3CRET-7f3a9c"
SECRET_B = SECRET.encode()
ITEMS = 'cap:in="media:enc=utf-8";out="media:enc=utf-8;list";items'


def texts(*objects: object) -> str:
    return "\n".join(f"{o!r}\n{o!s}" for o in objects)


def _runtime() -> CartridgeRuntime:
    runtime = CartridgeRuntime(
        Manifest.build(
            name="secrets",
            version="1.0.0",
            description="secrets",
            caps=[CapDef.simple(ITEMS, "Items", aliases="items", output_is_sequence=True)],
        )
    )

    @runtime.op(ITEMS)
    async def items(req: Request) -> None:
        out = req.output()
        async for stream in req.take_input():
            async for item in stream.items():
                assert SECRET not in texts(stream, item)
                await out.emit_list_item(item.value, meta={"token": SECRET, "n": 1})
        req.finish(1.0, "done")

    return runtime


@pytest.mark.asyncio
async def test_harness_objects_hide_values() -> None:
    arg = Input("media:enc=utf-8", [Item(SECRET, {"token": SECRET})], meta={"token": SECRET})
    async with CartridgeHarness(_runtime()) as h:
        result = await h.call(ITEMS, [arg])
    assert result.ok
    stream = result.main
    assert stream is not None and stream.items == [(SECRET, {"token": SECRET, "n": 1})]
    shown = texts(arg, arg.value[0], result, stream, *result.frames, *result.logs, result.end)
    assert SECRET not in shown
    assert "token" in shown  # meta keys are shown, their values are not


@pytest.mark.asyncio
async def test_engine_objects_hide_values(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echo = 'cap:echo;in="media:";out="media:"'
    async with Engine() as engine:
        engine.add_cartridge(str(INTEROP))
        seen = []
        async with engine.call(echo, [("media:", SECRET_B)]) as response:
            async for event in response:
                seen.append(event)
        result = await engine.call_bytes(echo, [("media:", SECRET_B)])
        words = await engine.call_bytes(
            'cap:in="media:enc=utf-8";out="media:enc=utf-8;list";words',
            [("media:enc=utf-8", f"{SECRET} {SECRET}".encode())],
        )
        status = engine.status()
        shown = texts(engine, response, *seen, result, *result.outputs.values(), words, *status)
    assert result.data == SECRET_B and words.items == [SECRET_B, SECRET_B]
    assert SECRET not in shown
    assert SECRET not in caplog.text


def test_value_objects_hide_values() -> None:
    objs = [
        Item(SECRET_B, {"k": SECRET}),
        InputItem(value=SECRET, meta={"k": SECRET}),
        PeerData(value=SECRET_B, meta={"k": SECRET}),
        frames.chunk(MessageId.new(), "s", 0, cbor2.dumps(SECRET), meta={"k": SECRET}),
        frames.stream_start(MessageId.new(), "s", "media:", meta={"k": SECRET}),
    ]
    assert SECRET not in texts(*objs)


def _message(exc: pytest.ExceptionInfo[BaseException]) -> str:
    return f"{exc.value!r} {exc.value!s}"


def test_error_paths_name_type_and_position_not_value() -> None:
    with pytest.raises(TypeError) as bad_input:
        normalize_inputs([("media:", b"ok"), SECRET])  # type: ignore[list-item]
    assert SECRET not in _message(bad_input) and "input 1" in _message(bad_input)
    with pytest.raises(TypeError) as bad_spec:
        as_input([SECRET])
    assert SECRET not in _message(bad_spec)
    with pytest.raises(ValueError) as bad_arg:
        split_arg(f"media:{SECRET}", [])
    assert SECRET not in _message(bad_arg)
    with pytest.raises(UsageError) as bad_cli:
        check_before_spawn(str(INTEROP), "echo", [f"nourn {SECRET}"])
    assert SECRET not in _message(bad_cli)


def test_decoder_error_names_the_key_not_the_value() -> None:
    frame = frames.end(MessageId.new())
    raw = bytearray(encode_frame(frame))
    body = cbor2.loads(bytes(raw[4:]))
    body[3] = SECRET  # seq (key 3) as text
    payload = cbor2.dumps(body)
    decoder = FrameDecoder()
    decoder.feed(len(payload).to_bytes(4, "big") + payload)
    with pytest.raises(Exception) as bad:
        list(decoder.frames())
    assert SECRET not in _message(bad) and "seq" in _message(bad)


def test_cli_mode_usage_errors_hide_values() -> None:
    out = subprocess.run(
        [sys.executable, str(INTEROP), "double", "1", SECRET], capture_output=True, timeout=60
    )
    assert out.returncode == 2
    assert SECRET_B not in out.stderr
    out = subprocess.run(
        [sys.executable, str(INTEROP), "manifest", SECRET], capture_output=True, timeout=60
    )
    assert out.returncode == 2 and SECRET_B not in out.stderr


def test_trio_backend_same_objects() -> None:
    """The harness objects print the same way under trio (no backend-specific repr)."""

    async def main() -> str:
        async with CartridgeHarness(_runtime()) as h:
            result = await h.call(ITEMS, [("media:enc=utf-8", [SECRET])])
        return texts(result, *result.frames)

    assert SECRET not in anyio.run(main, backend="trio")


def test_cli_mode_values_hide_values() -> None:
    from cartridge_runtime.runtime._cli._args import CliInput, ParsedTokens

    objs = [
        CliInput(media_urn="media:", arg_name="a", data=SECRET_B),
        CliInput(media_urn="media:", arg_name="a", items=(SECRET_B,)),
        ParsedTokens(flags={"--key": SECRET}, positionals=(SECRET,)),
    ]
    assert SECRET not in texts(*objs)
