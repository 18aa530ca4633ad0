"""Progress when the size is known: the engine puts a file input's byte size into its stream
meta and the handler reads it as ``InputStream.size``; ``progress(None, message)`` is
indeterminate on every path."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime.engine import Engine, Progress
from cartridge_runtime.protocol import BodyReceiver, FrameDecoder, MessageId, encode_frame, frames

SIZE = 'cap:in="media:";out="media:enc=utf-8";size'

CARTRIDGE = textwrap.dedent(
    f"""
    import json
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime

    runtime = CartridgeRuntime(Manifest.build(
        name="sizer", version="1.0.0", description="t",
        caps=[CapDef.simple({SIZE!r}, "Size", aliases="size")],
    ))

    @runtime.op({SIZE!r})
    async def size(req):
        stream = next(iter([s async for s in req.take_input()]))
        await req.output().progress(None, "reading")
        data = await stream.collect_bytes()
        await req.output().progress(0.5, "half")
        await req.output().progress(None, "still going")
        await req.output().emit_cbor(json.dumps({{"size": stream.size, "read": len(data)}}))

    if __name__ == "__main__":
        runtime.run()
    """
)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "sizer.py"
    path.write_text(CARTRIDGE)
    return path


@pytest.mark.asyncio
async def test_a_path_input_carries_its_size_and_bytes_do_not(script: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * 300_001)
    async with Engine() as e:
        e.add_cartridge(script)
        by_path = await e.call_bytes(SIZE, [("media:", data)])
        assert json.loads(by_path.data) == {"size": 300_001, "read": 300_001}
        by_bytes = await e.call_bytes(SIZE, [("media:", b"abc")])
        assert json.loads(by_bytes.data) == {"size": None, "read": 3}


@pytest.mark.asyncio
async def test_indeterminate_progress_reaches_the_engine_as_such(script: Path) -> None:
    async with Engine() as e:
        e.add_cartridge(script)
        result = await e.call_bytes(SIZE, [("media:", b"abc")])
    assert [(p.indeterminate, p.message) for p in result.progress] == [
        (True, "reading"),
        (False, "half"),
        (True, "still going"),
    ]
    # An indeterminate report repeats the last fraction: never a jump back to 0%.
    assert result.progress[2].progress == 0.5
    assert isinstance(result.progress[0], Progress)


def test_cli_call_sends_stdin_that_is_a_file_with_its_size(script: Path, tmp_path: Path) -> None:
    data = tmp_path / "in.bin"
    data.write_bytes(b"y" * 1234)
    with data.open("rb") as stdin:
        proc = subprocess.run(
            [sys.executable, "-m", "cartridge_runtime.cli", "call", str(script), "size"],
            stdin=stdin,
            capture_output=True,
            timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"size": 1234, "read": 1234}


def test_cli_call_sends_an_at_file_with_its_size(script: Path, tmp_path: Path) -> None:
    data = tmp_path / "in.bin"
    data.write_bytes(b"z" * 77)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cartridge_runtime.cli",
            "call",
            str(script),
            "size",
            "--arg",
            f"media:=@{data}",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"size": 77, "read": 77}


def test_cli_mode_prints_indeterminate_progress_without_a_percentage(script: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(script), "size"], input=b"abc", capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert "[PROGRESS] reading" in lines and "[PROGRESS 50%] half" in lines


def test_the_wire_form_stays_a_valid_progress_log() -> None:
    rid = MessageId.new()
    frame = frames.progress(rid, 0.25, "spinning", indeterminate=True)
    assert frame.meta is not None
    assert frame.meta["progress"] == 0.25 and frame.meta["indeterminate"] is True
    decoder = FrameDecoder()
    decoder.feed(encode_frame(frame))  # passes the LOG meta rules
    decoded = decoder.next_frame()
    assert decoded is not None
    receiver = BodyReceiver(rid, initial_credit=16, expect_req=False)
    (event,) = receiver.receive(decoded)
    assert event.indeterminate and event.message == "spinning"  # type: ignore[union-attr]
