"""stdout belongs to the protocol: a ``print()`` in a handler goes to stderr, and an engine
that meets text instead of frames says so in words, quoting the text."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime.engine import Engine, SpawnFailed
from cartridge_runtime.engine._placements._command import describe_stray_bytes
from cartridge_runtime.protocol import DEFAULT_MAX_FRAME, MessageId, encode_frame, frames

CAP = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";chatty'

CARTRIDGE = textwrap.dedent(
    """
    import os, subprocess, sys
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime

    CAP = {cap!r}
    runtime = CartridgeRuntime(
        Manifest.build(name="chatty", version="1.0.0", description="prints",
                       caps=[CapDef.simple(CAP, "Chatty", aliases="chatty")])
    )

    @runtime.op(CAP)
    async def chatty(req):
        text = await req.take_input().require_stream_str("media:enc=utf-8")
        print("handler says hello", text, flush=True)
        os.write(1, b"raw bytes on fd 1\\n")
        subprocess.run([sys.executable, "-c", "print('child process output')"], check=True)
        await req.output().emit_cbor(text.upper())

    if __name__ == "__main__":
        {before}
        runtime.run()
    """
)


def _script(tmp_path: Path, before: str = "pass") -> Path:
    path = tmp_path / "chatty.py"
    path.write_text(CARTRIDGE.format(cap=CAP, before=before))
    return path


@pytest.mark.asyncio
async def test_prints_in_a_handler_go_to_stderr_and_the_call_works(tmp_path: Path) -> None:
    # Also text printed before run() and still in sys.stdout's buffer (a pipe's stdout is
    # block-buffered unless PYTHONUNBUFFERED says otherwise).
    script = _script(tmp_path, before="print('before run, buffered')")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    async with Engine(log_dir=tmp_path / "logs") as e:
        name = e.add_cartridge(script, env=env)
        for word in ("one", "two"):
            result = await e.call_bytes(CAP, [("media:enc=utf-8", word)])
            assert result.data == word.upper().encode()
        await e.stop(name)
    log = (tmp_path / "logs" / f"{name}.stderr.log").read_text()
    assert "handler says hello one" in log and "handler says hello two" in log
    assert "raw bytes on fd 1" in log and "child process output" in log
    assert "before run, buffered" in log


@pytest.mark.asyncio
async def test_text_flushed_to_stdout_before_run_is_named_and_quoted(tmp_path: Path) -> None:
    script = _script(tmp_path, before="print('Loading model weights...', flush=True)")
    async with Engine() as e:
        e.add_cartridge(script)
        with pytest.raises(SpawnFailed) as info:
            await e.call_bytes(CAP, [("media:enc=utf-8", "x")])
    message = info.value.message
    assert "instead of Bifaci frames" in message
    assert "'Loading model weights...'" in message
    assert "exceeds max_frame" not in message


@pytest.mark.asyncio
async def test_a_program_that_is_not_a_cartridge_is_named_and_quoted() -> None:
    program = [sys.executable, "-c", "print('usage: frobnicate FILE'); import time; time.sleep(5)"]
    async with Engine() as e:
        e.add_cartridge(program, known_caps=[CAP])
        with pytest.raises(SpawnFailed) as info:
            await e.call_bytes(CAP, [("media:enc=utf-8", "x")])
    assert "'usage: frobnicate FILE'" in info.value.message
    assert "not a cartridge" in info.value.message


def test_stray_text_after_valid_frames_is_quoted_from_where_it_starts() -> None:
    frame = encode_frame(frames.heartbeat(MessageId.new()))
    text = describe_stray_bytes(frame + b"oops: debug output\n", DEFAULT_MAX_FRAME)
    assert text is not None and "'oops: debug output'" in text


def test_binary_garbage_is_left_to_the_decoder_error() -> None:
    assert describe_stray_bytes(b"\xff\xff\xff\xff\x00\x01", DEFAULT_MAX_FRAME) is None
