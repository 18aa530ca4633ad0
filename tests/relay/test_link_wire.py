"""A relay link's bytes go straight through the socket's fd (reads from the loop, writes in
place), and any other byte stream keeps the generic path; frames cross either way intact."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import anyio.abc
import pytest

from cartridge_runtime._plumbing import FdSink, FrameOutbox, FramePump, StreamSink, StreamSource
from cartridge_runtime.engine._relay._wire import LinkWire
from cartridge_runtime.protocol import Frame, FrameDecoder, MessageId, frames

MAX_FRAME = 1 << 24


def _flow(big: bytes) -> list[Frame]:
    rid = MessageId.new()
    return [
        frames.req(rid, "cap:echo"),
        frames.stream_start(rid, "s", "media:", seq=1),
        frames.chunk(rid, "s", 0, big, seq=2),
        frames.stream_end(rid, "s", 1, seq=3),
        frames.end(rid, seq=4),
    ]


async def _cross(writer: LinkWire, reader: LinkWire, sent: list[Frame]) -> list[Frame]:
    got: list[Frame] = []
    outbox = FrameOutbox(writer.sink, lambda: MAX_FRAME)
    pump = FramePump(FrameDecoder(max_frame=MAX_FRAME), got.append)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            tg.start_soon(pump.run, reader.source)
            for frame in sent:
                outbox.push(frame)
            while len(got) < len(sent):  # noqa: ASYNC110 - frames the pump dispatches
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    return got


async def _over_a_socket(folder: Path) -> None:
    async with await anyio.create_unix_listener(folder / "w.sock") as listener:
        accepted: list[anyio.abc.SocketStream] = []

        async def take() -> None:
            accepted.append(await listener.accept())

        async with anyio.create_task_group() as tg:
            tg.start_soon(take)
            left = await anyio.connect_unix(folder / "w.sock")
        async with left, accepted[0] as right:
            writer, reader = LinkWire(left), LinkWire(right)
            assert isinstance(writer.sink, FdSink)
            assert not isinstance(reader.source, StreamSource)
            big = os.urandom(3 << 20)  # more than the socket takes at once: partial writes
            sent = _flow(big)
            got = await _cross(writer, reader, sent)
            assert [f.frame_type for f in got] == [f.frame_type for f in sent]
            assert [f.seq for f in got] == [f.seq for f in sent]
            assert bytes(got[2].payload or b"") == big
            writer.stop()
            reader.stop()
            assert writer.stopped and writer.sink.closed
            with pytest.raises(anyio.ClosedResourceError):
                writer.sink.write_now([b"late"])


@pytest.mark.asyncio
async def test_frames_cross_a_unix_socket_through_its_fd(sock_dir: Path) -> None:
    await _over_a_socket(sock_dir)


def test_frames_cross_a_unix_socket_through_its_fd_on_trio(sock_dir: Path) -> None:
    anyio.run(_over_a_socket, sock_dir, backend="trio")


class _MemoryBytes(anyio.abc.ByteStream):
    """Bytes looped back over a memory object stream: a byte stream that is no socket."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[bytes](1000)

    async def send(self, item: bytes) -> None:
        await self._send.send(bytes(item))

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._receive.receive()

    async def send_eof(self) -> None:
        await self._send.aclose()

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()


@pytest.mark.asyncio
async def test_a_stream_that_is_no_socket_keeps_the_generic_path() -> None:
    stream = _MemoryBytes()
    wire = LinkWire(stream)
    assert isinstance(wire.sink, StreamSink)
    assert isinstance(wire.source, StreamSource)
    big = os.urandom(1 << 20)
    got = await _cross(wire, wire, _flow(big))
    assert bytes(got[2].payload or b"") == big
    wire.stop()
    assert wire.stopped
