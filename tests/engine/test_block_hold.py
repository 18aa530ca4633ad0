"""BlockHold: what a pump holds while it dispatches a block, and the ends frames are forwarded
to meanwhile (held from the first frame, released together after the block)."""

from __future__ import annotations

import anyio
import anyio.abc
import pytest

from cartridge_runtime._plumbing import Block, FrameOutbox, StreamSink
from cartridge_runtime.engine._connection._block_hold import BlockHold
from cartridge_runtime.protocol import Frame, FrameDecoder, MessageId, SeqAssigner, frames

MAX = 1 << 20


class Recorder:
    """A holdable that records its calls, in one log shared by several."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    def hold(self) -> None:
        self.log.append(f"hold {self.name}")

    def release(self) -> None:
        self.log.append(f"release {self.name}")


def test_outside_a_block_batch_holds_nothing() -> None:
    log: list[str] = []
    block = BlockHold(Recorder("own", log))
    block.batch(Recorder("peer", log))
    assert log == []


def test_a_batched_end_is_held_once_per_block_and_released_after_the_own_outbox() -> None:
    log: list[str] = []
    peer = Recorder("peer", log)
    block = BlockHold(Recorder("own", log))
    block.hold()
    block.batch(peer)
    block.batch(peer)  # the second frame of the block: already held
    block.release()
    assert log == ["hold own", "hold peer", "release own", "release peer"]
    log.clear()
    block.hold()  # a new block: held again from its first frame
    block.batch(peer)
    block.release()
    assert log == ["hold own", "hold peer", "release own", "release peer"]


def test_nested_holds_release_the_batched_ends_at_the_outermost() -> None:
    log: list[str] = []
    peer = Recorder("peer", log)
    block = BlockHold()
    block.hold()
    block.hold()
    block.batch(peer)
    block.release()
    assert log == ["hold peer"]
    block.release()
    assert log == ["hold peer", "release peer"]


class _Stream(anyio.abc.ByteSendStream):
    """A stream written in place: each ``write_now`` is one write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write_now(self, parts: list[Block]) -> list[Block]:
        self.writes.append(b"".join(parts))
        return []

    async def send(self, item: bytes) -> None:
        self.writes.append(bytes(item))

    async def aclose(self) -> None:
        pass


def _response(rid: MessageId) -> list[Frame]:
    return [
        frames.stream_start(rid, "s", "media:json"),
        frames.chunk(rid, "s", 0, b"\x42"),
        frames.stream_end(rid, "s", 1),
        frames.end(rid),
    ]


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_frames_forwarded_in_a_block_leave_in_one_write_when_it_ends(
    backend: str, batched: bool
) -> None:
    stream = _Stream()
    peer = FrameOutbox(StreamSink(stream), lambda: MAX, number=SeqAssigner().number)
    block = BlockHold()
    written_at_release: list[int] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.run)
            await anyio.sleep(0.01)
            block.hold()  # a pump starts dispatching a block
            for frame in _response(MessageId.new()):
                if batched:
                    block.batch(peer)
                peer.push(frame)
            block.release()
            written_at_release.append(len(stream.writes))
            peer.close()

    anyio.run(main, backend=backend)
    # batched: written as the block ends, in one write; otherwise a loop turn later
    assert written_at_release == [1 if batched else 0]
    decoder = FrameDecoder(MAX)
    decoder.feed(b"".join(stream.writes))
    assert len(decoder.frames()) == 4
