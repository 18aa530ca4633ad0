"""Input that is a regular file or ``/dev/null`` (a replayed capture, ``cart.py <
session.bin``): such files cannot be watched by the event loop, yet must be read to the end
like a pipe, with the tasks of the reader still getting their turns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from cartridge_runtime._plumbing import FdReceiveStream, FramePump
from cartridge_runtime.protocol import (
    FrameDecoder,
    FrameType,
    IdentityCheck,
    Limits,
    MessageId,
    encode_frame,
    frames,
)

HERE = Path(__file__).resolve().parents[1]
BACKENDS = ["asyncio", "trio"]


def _wire(n: int) -> bytes:
    rid = MessageId.new()
    return b"".join(
        encode_frame(frames.chunk(rid, "s", i, bytes([i % 251]) * 5000)) for i in range(n)
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_regular_file_is_pumped_to_the_end_with_turns_for_other_tasks(
    backend: str, tmp_path: Path
) -> None:
    path = tmp_path / "capture.bin"
    path.write_bytes(_wire(400))
    seen: list[int] = []
    ticks: list[int] = []

    async def main() -> None:
        fd = os.open(path, os.O_RDONLY)
        stream = FdReceiveStream(fd)
        pump = FramePump(FrameDecoder(), lambda f: seen.append(f.chunk_index or 0), read_size=8192)
        done = anyio.Event()

        async def ticker() -> None:
            while not done.is_set():
                ticks.append(len(seen))
                await anyio.lowlevel.checkpoint()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(ticker)
                await pump.run(stream)
                done.set()
        finally:
            stream.restore()
            os.close(fd)

    anyio.run(main, backend=backend)
    assert seen == list(range(400))
    # the ticker ran while the file was being read, not only before or after it
    assert any(0 < t < 400 for t in ticks), ticks[:5]


SCRIPT = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from _runtime_cartridge import build_runtime
build_runtime().run()
"""


def test_a_cartridge_replays_a_session_from_a_regular_file(tmp_path: Path) -> None:
    check = IdentityCheck()
    session = tmp_path / "session.bin"
    session.write_bytes(
        encode_frame(frames.hello(Limits()))
        + b"".join(encode_frame(f) for f in check.frames())
        + encode_frame(frames.policy("full"))
    )
    out = tmp_path / "out.bin"
    with session.open("rb") as stdin, out.open("wb") as stdout:
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr
    decoder = FrameDecoder()
    decoder.feed(out.read_bytes())
    decoder.feed(b"")
    types = [f.frame_type for f in decoder.frames()]
    assert types[0] is FrameType.HELLO and types[-1] is FrameType.END


def test_a_cartridge_with_dev_null_on_stdin_ends_without_a_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    assert len(proc.stderr.decode().strip().splitlines()) <= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_dev_null_reads_as_an_empty_input(backend: str) -> None:
    from cartridge_runtime._plumbing import read_fd

    blocks: list[bytes] = []

    async def main() -> None:
        fd = os.open(os.devnull, os.O_RDONLY)
        try:
            os.set_blocking(fd, False)

            async def never() -> None:
                raise AssertionError("no pause was asked for")

            def on_block(data: bytes | memoryview) -> bool:
                blocks.append(bytes(data))
                return True

            await read_fd(fd, memoryview(bytearray(64)), lambda: 64, on_block, never, lambda: False)
        finally:
            os.close(fd)

    anyio.run(main, backend=backend)
    assert blocks == [b""]
