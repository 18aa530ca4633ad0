"""The cartridge's frame writer: batching, the in-place flush on asyncio, and ``flush_now``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import sniffio

from cartridge_runtime.protocol import FrameDecoder, MessageId, SeqAssigner, frames
from cartridge_runtime.runtime._frames import _writer
from cartridge_runtime.runtime._frames._writer import FrameWriter

#: The compiled hold (where built) and the Python class, each run through the same tests.
HOLDS = ["compiled", "python"] if _writer._C_HELD is not None else ["python"]


class _Stream(anyio.abc.ByteSendStream):
    """A send stream that records every write; ``write_now`` only where asked."""

    def __init__(self, *, nonblocking: bool) -> None:
        self.writes: list[bytes] = []
        if nonblocking:
            self.write_now = self._write_now

    def _write_now(self, parts: list[Any]) -> list[Any]:
        self.writes.append(b"".join(parts))
        return []

    async def send(self, item: bytes) -> None:
        self.writes.append(bytes(item))

    async def send_many(self, parts: list[Any]) -> None:
        self.writes.append(b"".join(parts))

    async def aclose(self) -> None:
        pass


def _frames_in(writes: list[bytes]) -> list[Any]:
    decoder = FrameDecoder()
    decoder.feed(b"".join(writes))
    out = []
    while (f := decoder.next_frame()) is not None:
        out.append(f)
    return out


def _response(rid: MessageId) -> list[Any]:
    return [
        frames.stream_start(rid, "s", "media:json"),
        frames.chunk(rid, "s", 0, b"\x4242"),
        frames.stream_end(rid, "s", 1),
        frames.end(rid),
    ]


BACKENDS = ["asyncio", "trio"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_queued_in_one_step_leave_in_one_write(backend: str) -> None:
    stream = _Stream(nonblocking=True)
    anyio.run(_one_batch, stream, backend=backend)
    assert len(stream.writes) == 1
    got = _frames_in(stream.writes)
    assert [f.frame_type.name for f in got] == ["STREAM_START", "CHUNK", "STREAM_END", "END"]
    assert [f.seq for f in got] == [0, 1, 2, 3]


async def _one_batch(stream: _Stream) -> None:
    writer = FrameWriter(stream, lambda: 1 << 20)
    writer.number_by(SeqAssigner())  # the connection core numbers
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await anyio.sleep(0.01)  # the writer task is idle
        rid = MessageId.new()
        for f in _response(rid):
            await writer.send(f)
        assert stream.writes == []  # nothing written while the producer runs
        await anyio.sleep(0.01)
        writer.close()


def test_flush_now_writes_before_the_producer_yields() -> None:
    anyio.run(_flush_now_in_place, backend="asyncio")


async def _flush_now_in_place() -> None:
    stream = _Stream(nonblocking=True)
    writer = FrameWriter(stream, lambda: 1 << 20)
    writer.number_by(SeqAssigner())  # the connection core numbers
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await anyio.sleep(0.01)
        first, second = MessageId.new(), MessageId.new()
        for f in _response(first):
            await writer.send(f)
        writer.flush_now()
        # Written in place, with no yield to the loop in between.
        assert [f.id for f in _frames_in(stream.writes)] == [first] * 4
        for f in _response(second):
            await writer.send(f)
        writer.flush_now()
        assert len(stream.writes) == 2
        writer.flush_now()  # nothing queued: no empty write
        assert len(stream.writes) == 2
        await anyio.sleep(0.01)  # the callback scheduled for each batch finds nothing left
        writer.close()
    got = _frames_in(stream.writes)
    assert [f.id for f in got] == [first] * 4 + [second] * 4
    assert [f.seq for f in got] == [0, 1, 2, 3] * 2


@pytest.mark.parametrize(("backend", "nonblocking"), [("asyncio", False), ("trio", True)])
def test_flush_now_without_an_in_place_path_leaves_the_batch_to_the_task(
    backend: str, nonblocking: bool
) -> None:
    """A stream that cannot write without blocking, or trio, keeps the task-written batch."""
    anyio.run(_flush_left_to_task, _Stream(nonblocking=nonblocking), backend=backend)


async def _flush_left_to_task(stream: _Stream) -> None:
    writer = FrameWriter(stream, lambda: 1 << 20)
    writer.number_by(SeqAssigner())  # the connection core numbers
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await anyio.sleep(0.01)
        rid = MessageId.new()
        for f in _response(rid):
            await writer.send(f)
        writer.flush_now()
        assert stream.writes == []
        await anyio.sleep(0.01)
        writer.close()
    assert len(stream.writes) == 1
    assert len(_frames_in(stream.writes)) == 4


def test_try_send_queues_only_what_send_would_queue_without_waiting_or_yielding() -> None:
    from cartridge_runtime.runtime._frames._writer import WRITER_QUEUE, YIELD_BYTES

    writer = FrameWriter(_Stream(nonblocking=False), lambda: 1 << 30)

    writer.number_by(SeqAssigner())  # the connection core numbers
    rid = MessageId.new()
    for n in range(WRITER_QUEUE):
        assert writer.try_send(frames.heartbeat(MessageId(n + 1)))
    # Full: refused, and nothing queued (the caller then awaits send, which waits for room).
    assert not writer.try_send(frames.heartbeat(MessageId(0)))
    assert len(writer._q) == WRITER_QUEUE

    writer = FrameWriter(_Stream(nonblocking=False), lambda: 1 << 30)

    writer.number_by(SeqAssigner())  # the connection core numbers
    half = b"\x00" * (YIELD_BYTES // 2)
    assert writer.try_send(frames.chunk(rid, "s", 0, half))
    # This payload would bring the bytes queued since the last yield to YIELD_BYTES: send()
    # yields there, so try_send leaves it to send().
    assert not writer.try_send(frames.chunk(rid, "s", 1, half))
    assert [f.chunk_index for f in writer._q] == [0]


@pytest.fixture(params=HOLDS)
def hold(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(_writer, "_C_HELD", None)
    return str(request.param)


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_while_running_writes_on_suspension_and_passes_the_result(
    backend: str, hold: str
) -> None:
    stream = _Stream(nonblocking=True)
    anyio.run(_held_run, stream, backend=backend)
    got = _frames_in(stream.writes)
    assert [f.frame_type.name for f in got] == ["STREAM_START", "CHUNK", "STREAM_END", "END"]


async def _held_run(stream: _Stream) -> None:
    writer = FrameWriter(stream, lambda: 1 << 20)
    writer.number_by(SeqAssigner())
    rid = MessageId.new()
    first, second = _response(rid)[:2], _response(rid)[2:]
    seen: list[int] = []

    async def body() -> str:
        for f in first:
            await writer.send(f)
        seen.append(len(stream.writes))  # queued, not written: the queue is held
        await anyio.sleep(0.05)  # suspended: the hold is released, what it queued is written
        seen.append(len(_frames_in(stream.writes)))
        writes = len(stream.writes)
        for f in second:
            await writer.send(f)
        seen.append(len(stream.writes) - writes)  # held again once it runs
        return "result"

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await anyio.sleep(0.01)
        assert await writer.held_while_running(body()) == "result"
        # Released at the end: the last frames are written without another loop pass.
        if sniffio.current_async_library() == "asyncio":
            assert len(_frames_in(stream.writes)) == 4
        await anyio.sleep(0.05)
        writer.close()
    assert seen == [0, 2, 0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_while_running_lets_errors_and_cancellation_through_and_releases(
    backend: str, hold: str
) -> None:
    stream = _Stream(nonblocking=True)
    anyio.run(_held_errors, stream, backend=backend)
    assert [f.frame_type.name for f in _frames_in(stream.writes)] == [
        "STREAM_START",
        "CHUNK",
        "STREAM_END",
        "END",
    ]


async def _held_errors(stream: _Stream) -> None:
    writer = FrameWriter(stream, lambda: 1 << 20)
    writer.number_by(SeqAssigner())
    rid = MessageId.new()
    start, chunk, stream_end, end = _response(rid)
    cleaned: list[str] = []

    async def fails() -> None:
        await writer.send(start)
        raise ValueError("handler failed")

    async def waits_forever() -> None:
        await writer.send(chunk)
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append("cancelled")

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await anyio.sleep(0.01)
        with pytest.raises(ValueError, match="handler failed"):
            await writer.held_while_running(fails())
        with anyio.move_on_after(0.05):
            await writer.held_while_running(waits_forever())
        assert cleaned == ["cancelled"]
        # No hold is left behind: a frame queued now is written without any release.
        await writer.send(stream_end)
        await writer.send(end)
        await anyio.sleep(0.05)
        assert writer.outbox.queued == []
        assert len(_frames_in(stream.writes)) == 4
        writer.close()
