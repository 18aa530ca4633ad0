"""The cartridge's read side: synchronous dispatch, reading from the loop's reader callback on
asyncio or from a wait-readable loop elsewhere (``FdReceiveStream.stream_blocks``), and the
pause that keeps the writer's queue bounded while the host does not read."""

from __future__ import annotations

import os
from typing import Any

import anyio
import anyio.abc
import pytest
from _runtime_cartridge import ECHO, build_runtime

from cartridge_runtime._plumbing import FdReceiveStream
from cartridge_runtime.protocol import (
    DEFAULT_LIMITS,
    Frame,
    FrameDecoder,
    FrameType,
    MessageId,
    encode_frame,
    frames,
)
from cartridge_runtime.runtime._frames._exit import EXIT_OK, EXIT_PROTOCOL
from cartridge_runtime.runtime._frames._session import Session
from cartridge_runtime.runtime._frames._writer import WRITER_QUEUE, FrameWriter

BACKENDS = ["asyncio", "trio"]


def _wire(*fs: Frame) -> bytes:
    return b"".join(encode_frame(f.replace(seq=n)) for n, f in enumerate(fs))


def _opening() -> bytes:
    return encode_frame(frames.hello(DEFAULT_LIMITS)) + encode_frame(frames.policy("offline"))


def _echo_request(rid: MessageId, payload: bytes) -> bytes:
    return _wire(
        frames.req(rid, ECHO),
        frames.stream_start(rid, "in", "media:"),
        frames.chunk(rid, "in", 0, payload),
        frames.stream_end(rid, "in", 1),
        frames.end(rid, response=False),
    )


class _GatedSink(anyio.abc.ByteSendStream):
    """Takes the first write (HELLO) at once; every later write waits for :attr:`gate`."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.writes = 0
        self.gate = anyio.Event()
        self.blocked = anyio.Event()  # a write is waiting at the gate

    async def send(self, item: Any) -> None:
        await self.send_many([item])

    async def send_many(self, parts: list[Any]) -> None:
        if self.writes:
            self.blocked.set()
            await self.gate.wait()
        self.writes += 1
        for p in parts:
            self.data += p

    def frames(self) -> list[Frame]:
        decoder = FrameDecoder()
        decoder.feed(bytes(self.data))
        return list(decoder.frames())

    async def aclose(self) -> None:
        pass


def _pipe_with(data: bytes) -> FdReceiveStream:
    """A FdReceiveStream on a pipe holding ``data``, its writing end closed (EOF follows)."""
    r, w = os.pipe()
    stream = FdReceiveStream(r)  # enlarges the pipe first
    view = memoryview(data)
    while view:
        view = view[os.write(w, view) :]
    os.close(w)
    return stream


# -- the writer's bound ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_push_queues_past_the_bound_and_wait_room_waits_for_the_writer(backend: str) -> None:
    anyio.run(_push_past_bound, backend=backend)


async def _push_past_bound() -> None:
    sink = _GatedSink()
    sink.writes = 1  # every write waits at the gate
    writer = FrameWriter(sink, lambda: 1 << 20)
    rids = [MessageId(n) for n in range(1, WRITER_QUEUE + 11)]
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await anyio.sleep(0.01)
        for rid in rids:
            writer.push(frames.heartbeat(rid))
        await sink.blocked.wait()  # the task holds the first batch at the gate...
        for rid in rids:  # ...and push never waits, past the bound too
            writer.push(frames.heartbeat(rid))
        assert not writer.has_room
        room = anyio.Event()

        async def waiter() -> None:
            await writer.wait_room()
            room.set()

        tg.start_soon(waiter)
        await anyio.sleep(0.02)
        assert not room.is_set()
        sink.gate.set()
        with anyio.fail_after(5):
            await room.wait()
        writer.close()
    assert [f.id for f in sink.frames()] == rids + rids  # nothing lost, in order


def test_a_closed_writer_drops_pushed_frames_and_always_has_room() -> None:
    writer = FrameWriter(_GatedSink(), lambda: 1 << 20)
    writer.close()
    writer.push(frames.heartbeat(MessageId(1)))
    assert writer.drops == 1
    assert writer.has_room
    anyio.run(writer.wait_room)  # returns at once


# -- the session's read side -------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_reading_pauses_while_the_host_reads_nothing_and_loses_no_reply(backend: str) -> None:
    """Far more HEARTBEATs than the writer's queue holds, all in one read, while the host
    reads nothing: dispatch stops at the bound (the rest wait in the decoder), then every reply
    leaves, in order, once the host reads."""
    count = WRITER_QUEUE * 4
    ids = [MessageId(n) for n in range(1, count + 1)]
    data = _opening() + b"".join(encode_frame(frames.heartbeat(i)) for i in ids)
    anyio.run(_paused_heartbeats, data, ids, backend=backend)


async def _paused_heartbeats(data: bytes, ids: list[MessageId]) -> None:
    stream = _pipe_with(data)
    sink = _GatedSink()
    session = Session(build_runtime(), stream, sink)
    status: list[int] = []

    async def serve() -> None:
        status.append(await session.run())

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            with anyio.fail_after(5):
                await sink.blocked.wait()
            await anyio.sleep(0.05)
            queued = len(session.writer._q)
            assert WRITER_QUEUE - 1 <= queued <= WRITER_QUEUE  # dispatch stopped at the bound
            sink.gate.set()
    finally:
        stream.restore()
        os.close(stream.fd)
    assert status == [EXIT_OK]
    replies = [f for f in sink.frames() if f.frame_type is FrameType.HEARTBEAT]
    assert [f.id for f in replies] == ids


@pytest.mark.parametrize("backend", BACKENDS)
def test_requests_from_a_pipe_are_answered_in_order(backend: str) -> None:
    rids = [MessageId.new() for _ in range(20)]
    data = _opening() + b"".join(_echo_request(rid, b"\x43abc") for rid in rids)
    anyio.run(_answered_from_pipe, data, rids, backend=backend)


async def _serve_pipe(data: bytes) -> tuple[int, _GatedSink]:
    """A session served from a pipe holding ``data`` to a host that reads everything: its exit
    status and what it wrote."""
    stream = _pipe_with(data)
    sink = _GatedSink()
    sink.gate.set()
    try:
        with anyio.fail_after(10):
            status = await Session(build_runtime(), stream, sink).run()
    finally:
        stream.restore()
        os.close(stream.fd)
    return status, sink


async def _answered_from_pipe(data: bytes, rids: list[MessageId]) -> None:
    status, sink = await _serve_pipe(data)
    assert status == EXIT_OK
    ends = [f.id for f in sink.frames() if f.frame_type is FrameType.END]
    assert sorted(ends, key=rids.index) == rids
    chunks = [f for f in sink.frames() if f.frame_type is FrameType.CHUNK]
    assert [f.payload for f in chunks] == [b"\x43abc"] * len(rids)


@pytest.mark.parametrize("backend", BACKENDS)
def test_end_of_file_inside_a_frame_is_a_protocol_error(backend: str) -> None:
    rid = MessageId.new()
    data = _opening() + _echo_request(rid, b"\x43abc")[:-3]
    anyio.run(_truncated, data, rid, backend=backend)


async def _truncated(data: bytes, rid: MessageId) -> None:
    status, sink = await _serve_pipe(data)
    assert status == EXIT_PROTOCOL
    errs = [f for f in sink.frames() if f.frame_type is FrameType.ERR]
    # First why the session ends (id 0), then the request it cuts short, with the same code
    # (FRM-21).
    assert [(f.id, (f.meta or {}).get("code")) for f in errs] == [
        (MessageId(0), "PROTOCOL_ERROR"),
        (rid, "PROTOCOL_ERROR"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_stdin_streams_every_block_then_the_end_on_both_backends(backend: str) -> None:
    async def main() -> list[bytes]:
        stream = _pipe_with(b"abcdef")
        seen: list[bytes] = []

        def on_block(data: Any) -> bool:
            seen.append(bytes(data))
            return True

        try:
            buffer = memoryview(bytearray(1024))
            with anyio.fail_after(5):
                await stream.stream_blocks(buffer, lambda: 4, on_block, _never)
        finally:
            stream.restore()
            os.close(stream.fd)
        return seen

    assert anyio.run(main, backend=backend) == [b"abcd", b"ef", b""]


async def _never() -> None:
    raise AssertionError("no pause was asked for")


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_in_on_block_ends_the_reading(backend: str) -> None:
    async def main() -> None:
        stream = _pipe_with(b"abc")

        def on_block(data: Any) -> bool:
            raise ValueError(f"bad block {bytes(data)!r}")

        try:
            with pytest.raises(ValueError, match="bad block b'abc'"):
                await stream.stream_blocks(
                    memoryview(bytearray(1024)), lambda: 1024, on_block, _never
                )
        finally:
            stream.restore()
            os.close(stream.fd)

    anyio.run(main, backend=backend)
