"""A file input is read in large blocks, in the event loop while the page cache holds it and
in a worker thread when the disk must be waited for; the bytes and the ``size`` meta are the
file's either way, and a pipe (not a regular file) still goes block by block without a size."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import anyio
import pytest
from _engine_helpers import INTEROP, interop_caps

from cartridge_runtime.engine import Engine, OutputData, _file_blocks

BYTES = "media:"
BLOCK = 4096


async def _collect(path: Path, block: int = BLOCK) -> list[bytes]:
    with path.open("rb") as f:
        return [bytes(view) async for view in _file_blocks.file_blocks(f.fileno(), block)]


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [0, 1, BLOCK - 1, BLOCK, 3 * BLOCK + 17])
async def test_blocks_are_the_file_s_bytes(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    blocks = await _collect(tmp_path / "f")
    assert b"".join(blocks) == data
    assert all(len(b) == BLOCK for b in blocks[:-1])
    assert len(blocks) == -(-size // BLOCK)


@pytest.mark.asyncio
async def test_each_block_is_its_own_buffer(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"a" * BLOCK + b"b" * BLOCK)
    with (tmp_path / "f").open("rb") as f:
        views = [view async for view in _file_blocks.file_blocks(f.fileno(), BLOCK)]
    assert [bytes(v[:1]) for v in views] == [b"a", b"b"]  # the first was not overwritten


@pytest.mark.asyncio
async def test_a_read_the_cache_refuses_goes_to_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(2 * BLOCK + 5)
    (tmp_path / "f").write_bytes(data)
    waited: list[int] = []
    real = _file_blocks._read_waiting

    def waiting(fd: int, buffer: bytearray, offset: int) -> int:
        waited.append(offset)
        return real(fd, buffer, offset)

    monkeypatch.setattr(_file_blocks, "_read_cached", lambda fd, buffer, offset: None)
    monkeypatch.setattr(_file_blocks, "_read_waiting", waiting)
    assert b"".join(await _collect(tmp_path / "f")) == data
    assert waited == [0, BLOCK, 2 * BLOCK, 2 * BLOCK + 5]


@pytest.mark.asyncio
async def test_a_cached_file_is_read_without_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if getattr(os, "RWF_NOWAIT", None) is None:
        pytest.skip("the system cannot ask the page cache alone")
    data = os.urandom(3 * BLOCK)
    (tmp_path / "f").write_bytes(data)  # just written: in the page cache

    def waiting(fd: int, buffer: bytearray, offset: int) -> int:
        raise AssertionError("a cached read went to a thread")

    monkeypatch.setattr(_file_blocks, "_read_waiting", waiting)
    try:
        got = b"".join(await _collect(tmp_path / "f"))
    except AssertionError:
        pytest.skip("this file system does not answer RWF_NOWAIT")
    assert got == data


@pytest.mark.asyncio
async def test_a_large_file_input_echoes_byte_for_byte(tmp_path: Path) -> None:
    data = os.urandom(_file_blocks.FILE_BLOCK * 3 + 12_345)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    echo, info = interop_caps()["echo"], interop_caps()["file-info"]
    async with Engine() as engine:
        engine.add_cartridge(INTEROP)
        digest, received = hashlib.sha256(), 0
        async with engine.call(echo, [(BYTES, path)]) as response:
            async for event in response:
                if isinstance(event, OutputData):
                    digest.update(event.value)
                    received += len(event.value)
        assert (received, digest.hexdigest()) == (len(data), hashlib.sha256(data).hexdigest())
        result = await engine.call_bytes(info, [(BYTES, path)])
        assert json.loads(result.data)["size"] == len(data)


@pytest.mark.asyncio
async def test_a_pipe_input_is_read_as_it_comes(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    data = os.urandom(200_000)

    def feed() -> None:
        with fifo.open("wb") as w:
            w.write(data)

    echo = interop_caps()["echo"]
    async with Engine() as engine, anyio.create_task_group() as tg:
        engine.add_cartridge(INTEROP)
        tg.start_soon(anyio.to_thread.run_sync, feed)
        result = await engine.call_bytes(echo, [(BYTES, fifo)])
    assert result.data == data
