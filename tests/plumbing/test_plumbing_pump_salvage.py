"""The pump serves the frames a block completes before a bad length prefix in that block,
in order, then raises: through :meth:`FramePump.on_block` and through the first-frame read
(:meth:`FramePump.next_frame`, then :meth:`FramePump.run`)."""

from __future__ import annotations

import struct

import anyio
import anyio.abc
import pytest

from cartridge_runtime._plumbing import FramePump, StreamSource
from cartridge_runtime._plumbing._pump import frames_before_error
from cartridge_runtime.protocol import (
    DEFAULT_MAX_FRAME,
    Frame,
    FrameDecoder,
    FrameTooLargeError,
    MessageId,
    encode_frame,
    frames,
)

BAD = struct.pack(">I", 1 << 30)


def _frames(n: int) -> tuple[list[MessageId], bytes]:
    ids = [MessageId.new() for _ in range(n)]
    return ids, b"".join(encode_frame(frames.heartbeat(i)) for i in ids)


@pytest.mark.parametrize("as_view", [False, True])
def test_frames_before_a_bad_prefix_in_one_block_are_dispatched_first(as_view: bool) -> None:
    ids, good = _frames(3)
    seen: list[Frame] = []
    errors: list[Exception] = []
    pump = FramePump(FrameDecoder(), seen.append, on_error=lambda _d, e: errors.append(e))
    block = good + BAD + b"\x00" * 10
    with pytest.raises(FrameTooLargeError):
        pump.on_block(memoryview(bytearray(block)) if as_view else block)
    assert [f.id for f in seen] == ids
    assert len(errors) == 1


def test_a_bad_prefix_after_a_partial_frame_salvages_nothing_it_cannot_trust() -> None:
    # a block that does not start on a frame boundary is not walked for frames
    _, good = _frames(2)
    seen: list[Frame] = []
    pump = FramePump(FrameDecoder(), seen.append)
    pump.on_block(good[:5])
    with pytest.raises(FrameTooLargeError):
        pump.on_block(good[5:] + BAD)
    assert seen == []  # the decoder had a partial frame: nothing salvaged


class _OneBlock(anyio.abc.ByteReceiveStream):
    def __init__(self, data: bytes) -> None:
        self.data = data

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()
        if not self.data:
            raise anyio.EndOfStream
        block, self.data = self.data, b""
        return block

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_first_frame_read_hands_out_the_salvaged_frames_in_order(backend: str) -> None:
    ids, good = _frames(3)
    seen: list[Frame] = []

    async def main() -> None:
        source = _OneBlock(good + BAD)
        pump = FramePump(FrameDecoder(), seen.append)
        first = await pump.next_frame(source)
        assert first is not None and first.id == ids[0]
        with pytest.raises(FrameTooLargeError):
            await pump.run(StreamSource(source))

    anyio.run(main, backend=backend)
    assert [f.id for f in seen] == ids[1:]


def test_frames_before_error_stops_at_an_undecodable_body() -> None:
    ids, good = _frames(2)
    junk = struct.pack(">I", 3) + b"\xff\xff\xff"
    assert [f.id for f in frames_before_error(good + junk + good, DEFAULT_MAX_FRAME)] == ids


@pytest.mark.parametrize("cut", [0, 3, 4, 9, -1])
def test_whole_frames_then_a_tail_over_reused_buffers_come_out_once_in_order(cut: int) -> None:
    # A block of whole frames is taken in one step; a tail it ends with is fed and completed
    # by the next block, though the first buffer is reused in between.
    ids, good = _frames(4)
    last = len(encode_frame(frames.heartbeat(ids[-1])))
    split = len(good) - last + (cut if cut >= 0 else last)
    seen: list[Frame] = []
    pump = FramePump(FrameDecoder(), seen.append)
    buffer = bytearray(good[:split])
    assert pump.on_block(memoryview(buffer))
    buffer[:] = b"\xff" * len(buffer)  # the reader reuses its buffer
    assert pump.on_block(memoryview(bytearray(good[split:])))
    assert [f.id for f in seen] == ids
    assert pump.decoder.at_frame_boundary
