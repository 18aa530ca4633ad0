"""``read_blocks``: every byte in order, EOF last, and reads sized by ``next_size``."""

from __future__ import annotations

import os
import threading

import anyio
import pytest

from cartridge_runtime._plumbing import FdReader, make_pipe, read_blocks
from cartridge_runtime.protocol import FrameDecoder, MessageId, encode_frame, frames

BACKENDS = ["asyncio", "trio"]


def _wire(n_frames: int, size: int) -> tuple[bytes, list[bytes]]:
    rid = MessageId.new()
    payloads = [bytes([i % 251]) * size for i in range(n_frames)]
    wire = b"".join(encode_frame(frames.chunk(rid, "s", i, p)) for i, p in enumerate(payloads))
    return wire, payloads


async def _read_all(reader: FdReader, *args: object) -> None:
    try:
        await read_blocks(reader, *args)  # type: ignore[arg-type]
    finally:
        reader.close()


def _feed_in_thread(fd: int, data: bytes, piece: int) -> threading.Thread:
    def run() -> None:
        view = memoryview(data)
        try:
            while view:
                n = os.write(fd, view[:piece])
                view = view[n:]
        finally:
            os.close(fd)

    os.set_blocking(fd, True)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_follow_next_size_and_end_on_frame_boundaries(backend: str) -> None:
    # Frames of ~300 KB written in 700 KB pieces: a fixed 1 MiB read would cut them anywhere.
    wire, payloads = _wire(12, 300_000)
    r, w = make_pipe()
    thread = _feed_in_thread(w, wire, 700_000)
    decoder = FrameDecoder()
    blocks: list[int] = []
    asked: list[int] = []
    boundaries: list[bool] = []
    got: list[bytes] = []

    def next_size() -> int:
        size = 1 << 20 if decoder.at_frame_boundary else decoder.bytes_wanted
        asked.append(size)
        return size

    def on_data(data: bytes) -> None:
        blocks.append(len(data))
        decoder.feed(data)
        while (f := decoder.next_frame()) is not None:
            got.append(f.payload)
        boundaries.append(decoder.at_frame_boundary)

    try:
        anyio.run(_read_all, FdReader(r), 1 << 20, on_data, next_size, backend=backend)
    finally:
        thread.join(10)
    assert [p[-300_000:] for p in got] == payloads
    assert blocks[-1] == 0  # EOF is reported last, once
    assert len(asked) == len(blocks)  # every read was sized by next_size
    assert any(a < (1 << 20) for a in asked)  # some asked for just the rest of a frame
    assert all(n <= a for n, a in zip(blocks, asked, strict=True))
    # A read asked for just the rest of a frame leaves the decoder on a boundary unless the
    # pipe had less than that.
    for size, n, boundary in zip(asked, blocks, boundaries, strict=True):
        if size < (1 << 20) and n == size:
            assert boundary


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_next_size_every_read_asks_for_the_block_size(backend: str) -> None:
    data = os.urandom(3 * 65536 + 17)
    r, w = make_pipe()
    thread = _feed_in_thread(w, data, 50_000)
    parts: list[bytes] = []
    try:
        anyio.run(_read_all, FdReader(r), 4096, parts.append, backend=backend)
    finally:
        thread.join(10)
    assert b"".join(parts) == data
    assert parts[-1] == b""
    assert max(len(p) for p in parts) <= 4096


def test_with_a_buffer_every_read_lands_in_it_and_views_are_handed_over() -> None:
    """On asyncio, ``buffer`` makes each read a view of that one buffer (no allocation per
    read); the data is complete and in order when the callback copies what it keeps."""
    data = os.urandom(5 * 65536 + 123)
    r, w = make_pipe()
    thread = _feed_in_thread(w, data, 40_000)
    buffer = bytearray(16384)
    parts: list[bytes] = []
    kinds: set[type] = set()

    def on_data(block: bytes | memoryview) -> None:
        kinds.add(type(block))
        if block:
            assert isinstance(block, memoryview) and block.obj is buffer
            assert len(block) <= len(buffer)
        parts.append(bytes(block))

    try:
        anyio.run(_read_all, FdReader(r), 1 << 20, on_data, None, buffer, backend="asyncio")
    finally:
        thread.join(10)
    assert b"".join(parts) == data
    assert parts[-1] == b""
    assert memoryview in kinds
