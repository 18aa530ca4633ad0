"""The one reader pump (``cartridge_runtime._plumbing.FramePump``) and the fd streams, in
isolation: memory streams, real pipes, asyncio and trio."""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import pytest

from cartridge_runtime._plumbing import (
    READ_SIZE,
    Block,
    BlockSource,
    FdReader,
    FdReceiveStream,
    FdSendStream,
    FdSink,
    FramePump,
    StreamSource,
    make_pipe,
    soon_caller,
    source_for,
)
from cartridge_runtime.protocol import (
    Frame,
    FrameDecoder,
    MessageId,
    ProtocolError,
    encode_frame,
    frames,
)

BACKENDS = ["asyncio", "trio"]


def wire(n: int, size: int) -> tuple[bytes, list[bytes]]:
    rid = MessageId.new()
    payloads = [bytes([i % 251]) * size for i in range(n)]
    data = b"".join(encode_frame(frames.chunk(rid, "s", i, p)) for i, p in enumerate(payloads))
    return data, payloads


class Blocks(anyio.abc.ByteReceiveStream):
    """A receive stream that hands out given blocks (cut to the size asked), then EOF, and
    records every size asked."""

    def __init__(self, data: bytes, piece: int) -> None:
        self.data = memoryview(data)
        self.piece = piece
        self.asked: list[int] = []

    async def receive(self, max_bytes: int = 65536) -> bytes:
        self.asked.append(max_bytes)
        await anyio.lowlevel.checkpoint()
        if not self.data:
            raise anyio.EndOfStream
        n = min(max_bytes, self.piece)
        block, self.data = bytes(self.data[:n]), self.data[n:]
        return block

    async def aclose(self) -> None:
        pass


class Gate:
    """A :class:`Room` the test opens and closes."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.opened = anyio.Event()

    @property
    def has_room(self) -> bool:
        return self.room > 0

    async def wait_room(self) -> None:
        while not self.has_room:
            await self.opened.wait()
            self.opened = anyio.Event()


class Counter:
    """A :class:`Hold` that records hold/release."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def hold(self) -> None:
        self.log.append("hold")

    def release(self) -> None:
        self.log.append("release")


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(2000):
        if condition():
            return
        await anyio.sleep(0.005)
    raise AssertionError("condition not met in 10 s")


class Spy:
    """A :class:`BlockSource` that records every block its source hands over."""

    def __init__(self, source: BlockSource) -> None:
        self.source = source
        self.blocks: list[Block] = []

    async def stream_blocks(
        self,
        buffer: memoryview,
        next_size: Callable[[], int],
        on_block: Callable[[Block], bool],
        until_drained: Callable[[], Awaitable[None]],
    ) -> None:
        def spy(block: Block) -> bool:
            self.blocks.append(block if type(block) is bytes else memoryview(b"v" * len(block)))
            return on_block(block)

        await self.source.stream_blocks(buffer, next_size, spy, until_drained)


def feed_in_thread(fd: int, data: bytes, piece: int) -> threading.Thread:
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


# -- memory streams ------------------------------------------------------------------------


@pytest.mark.parametrize("piece", [1, 7, 4096, 1 << 20])
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_frame_is_dispatched_in_order_however_the_input_is_cut(
    backend: str, piece: int
) -> None:
    data, payloads = wire(6, 3000)
    got: list[Frame] = []
    pump = FramePump(FrameDecoder(), got.append)
    anyio.run(pump.run, StreamSource(Blocks(data, piece)), backend=backend)
    assert [f.payload for f in got] == payloads


def test_reads_ask_for_a_large_block_at_a_boundary_else_the_rest_of_the_frame() -> None:
    data, _ = wire(3, 3000)
    stream = Blocks(data, 1000)
    pump = FramePump(FrameDecoder(), lambda f: None)
    anyio.run(pump.run, source_for(stream))
    frame_len = len(data) // 3
    assert stream.asked[0] == READ_SIZE
    assert stream.asked[1] == frame_len - 1000  # the rest of the first frame
    assert stream.asked[2] == frame_len - 2000
    assert stream.asked.count(READ_SIZE) >= 3  # again at every boundary


def test_a_small_read_size_bounds_every_read() -> None:
    data, payloads = wire(3, 3000)
    stream = Blocks(data, 1 << 20)
    got: list[Frame] = []
    pump = FramePump(FrameDecoder(), got.append, read_size=512)
    anyio.run(pump.run, StreamSource(stream))
    assert max(stream.asked) == 512 and [f.payload for f in got] == payloads


@pytest.mark.parametrize("backend", BACKENDS)
def test_end_of_file_inside_a_frame_is_a_protocol_error(backend: str) -> None:
    data, _ = wire(2, 100)
    seen: list[tuple[bytes, ProtocolError]] = []
    pump = FramePump(
        FrameDecoder(), lambda f: None, on_error=lambda b, e: seen.append((bytes(b), e))
    )
    with pytest.raises(ProtocolError, match=r"(?i)end|eof|truncat|mid"):
        anyio.run(pump.run, StreamSource(Blocks(data[:-3], 1 << 20)), backend=backend)
    assert seen and seen[-1][0] == b""  # the failing block: the end of file


def test_bytes_that_are_not_frames_are_a_decode_error_the_hook_sees_first() -> None:
    seen: list[bytes] = []
    pump = FramePump(FrameDecoder(), lambda f: None, on_error=lambda b, e: seen.append(bytes(b)))
    junk = b"\xff\xff\xff\xffhello, this is not a frame"
    with pytest.raises(ProtocolError):
        anyio.run(pump.run, StreamSource(Blocks(junk, 1 << 20)))
    assert seen == [junk]


def test_a_clean_end_of_file_ends_the_run_without_error() -> None:
    got: list[Frame] = []
    pump = FramePump(FrameDecoder(), got.append)
    anyio.run(pump.run, StreamSource(Blocks(b"", 1)))
    assert got == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_dispatch_pauses_without_room_and_resumes_in_order(backend: str) -> None:
    data, payloads = wire(10, 100)
    gate = Gate(room=3)
    got: list[bytes] = []

    def dispatch(frame: Frame) -> None:
        assert frame.payload is not None
        got.append(frame.payload)
        gate.room -= 1

    stream = Blocks(data, 1 << 20)
    pump = FramePump(FrameDecoder(), dispatch, room=gate)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump.run, StreamSource(stream))
            await until(lambda: len(got) == 3)  # the room ran out: the rest waits
            await anyio.sleep(0.05)
            assert len(got) == 3
            reads = len(stream.asked)
            await anyio.sleep(0.05)
            assert len(stream.asked) == reads  # and nothing more is read meanwhile
            gate.room = 100
            gate.opened.set()

    anyio.run(main, backend=backend)
    assert got == payloads


def test_a_pause_at_end_of_file_still_dispatches_every_frame() -> None:
    data, payloads = wire(4, 100)
    gate = Gate(room=1)
    got: list[bytes] = []

    def dispatch(frame: Frame) -> None:
        assert frame.payload is not None
        got.append(frame.payload)
        gate.room -= 1

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump.run, StreamSource(Blocks(data, 1 << 20)))
            for _ in range(4):
                await anyio.sleep(0.01)
                gate.room = 1
                gate.opened.set()

    pump = FramePump(FrameDecoder(), dispatch, room=gate)
    anyio.run(main)
    assert got == payloads


def test_each_block_is_dispatched_under_one_hold() -> None:
    data, _ = wire(3, 100)
    hold = Counter()
    pump = FramePump(FrameDecoder(), lambda f: hold.log.append("frame"), hold=hold)
    anyio.run(pump.run, StreamSource(Blocks(data, 1 << 20)))
    # One block with three frames, then the end of file.
    assert hold.log == ["hold", "frame", "frame", "frame", "release", "hold", "release"]


def test_a_hold_is_released_when_decoding_fails() -> None:
    hold = Counter()
    pump = FramePump(FrameDecoder(), lambda f: None, hold=hold)
    with pytest.raises(ProtocolError):
        pump.feed(b"\xff\xff\xff\xff")
    assert hold.log == ["hold", "release"]


def test_next_frame_reads_the_first_frame_and_leaves_the_rest_to_run() -> None:
    data, payloads = wire(3, 100)
    got: list[Frame] = []
    pump = FramePump(FrameDecoder(), got.append)
    stream = Blocks(data, 1 << 20)

    async def main() -> Frame | None:
        first = await pump.next_frame(stream)
        await pump.run(source_for(stream))
        return first

    first = anyio.run(main)
    assert first is not None and first.payload == payloads[0]
    assert [f.payload for f in got] == payloads[1:]


def test_next_frame_is_none_at_a_clean_end_and_raises_inside_a_frame() -> None:
    pump = FramePump(FrameDecoder(), lambda f: None)
    assert anyio.run(pump.next_frame, Blocks(b"", 1)) is None
    data, _ = wire(1, 100)
    pump = FramePump(FrameDecoder(), lambda f: None)
    with pytest.raises(ProtocolError):
        anyio.run(pump.next_frame, Blocks(data[:-1], 1 << 20))


def test_a_failed_decoder_sizes_no_read_from_its_bad_prefix() -> None:
    decoder = FrameDecoder(max_frame=100)
    pump = FramePump(decoder, lambda f: None)
    with pytest.raises(ProtocolError):
        pump.feed(b"\x7f\xff\xff\xff")
    assert pump.read_size() == READ_SIZE


# -- real pipes ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_from_a_pipe_arrive_in_order_read_borrowed(backend: str) -> None:
    # ~300 KB frames written in 700 KB pieces: reads sized by the decoder end on frame
    # boundaries, and payloads parsed out of the reused buffer stay intact.
    data, payloads = wire(12, 300_000)
    r, w = make_pipe()
    thread = feed_in_thread(w, data, 700_000)
    got: list[Frame] = []
    pump = FramePump(FrameDecoder(), got.append)
    reader = FdReader(r)
    spy = Spy(reader)

    async def main() -> None:
        try:
            await pump.run(spy)
        finally:
            reader.close()

    try:
        anyio.run(main, backend=backend)
    finally:
        thread.join(10)
    assert [f.payload for f in got] == payloads
    kinds = [type(b) for b in spy.blocks]
    assert memoryview in kinds and spy.blocks[-1] == b""  # views of the buffer, then b""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_paused_pipe_reader_reads_nothing_until_there_is_room(backend: str) -> None:
    data, payloads = wire(20, 100)
    r, w = make_pipe()
    thread = feed_in_thread(w, data, 1 << 20)
    gate = Gate(room=5)
    got: list[bytes] = []

    def dispatch(frame: Frame) -> None:
        assert frame.payload is not None
        got.append(frame.payload)
        gate.room -= 1

    pump = FramePump(FrameDecoder(), dispatch, room=gate)
    stream = FdReceiveStream(r)
    spy = Spy(source_for(stream))
    blocks = spy.blocks

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump.run, spy)
            await until(lambda: len(got) == 5)
            await anyio.sleep(0.05)
            assert len(got) == 5
            seen = len(blocks)
            await anyio.sleep(0.05)
            assert len(blocks) == seen  # paused: no read
            gate.room = 1000
            gate.opened.set()

    try:
        anyio.run(main, backend=backend)
    finally:
        stream.restore()
        os.close(r)
        thread.join(10)
    assert got == payloads


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_in_dispatch_stops_reading_and_propagates(backend: str) -> None:
    data, _ = wire(3, 100)
    r, w = make_pipe()
    thread = feed_in_thread(w, data, 1 << 20)

    def dispatch(frame: Frame) -> None:
        raise RuntimeError("boom")

    reader = FdReader(r)
    pump = FramePump(FrameDecoder(), dispatch)

    async def main() -> None:
        try:
            await pump.run(reader)
        finally:
            reader.close()

    try:
        with pytest.raises(RuntimeError, match="boom"):
            anyio.run(main, backend=backend)
    finally:
        thread.join(10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_end_of_file_inside_a_frame_on_a_pipe_is_a_protocol_error(backend: str) -> None:
    data, _ = wire(2, 5000)
    r, w = make_pipe()
    thread = feed_in_thread(w, data[:-10], 1 << 20)
    stream = FdReceiveStream(r)
    pump = FramePump(FrameDecoder(), lambda f: None)
    try:
        with pytest.raises(ProtocolError):
            anyio.run(pump.run, source_for(stream), backend=backend)
    finally:
        stream.restore()
        os.close(r)
        thread.join(10)


def test_a_closed_reader_reports_the_end() -> None:
    r, w = make_pipe()
    reader = FdReader(r)
    got: list[Frame] = []
    pump = FramePump(FrameDecoder(), got.append)

    async def main() -> None:
        reader.close()
        await pump.run(reader)
        with pytest.raises(anyio.EndOfStream):  # a byte stream: its end is EndOfStream
            await reader.receive(10)

    try:
        anyio.run(main, backend="trio")
    finally:
        os.close(w)
    assert got == []


# -- the fd streams and the backend --------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_fd_streams_round_trip_and_report_the_end(backend: str) -> None:
    r, w = make_pipe()
    send, receive = FdSendStream(w), FdReceiveStream(r)

    async def main() -> list[bytes]:
        await send.send(b"abc")
        await send.send_many([b"de", memoryview(b"f"), b""])
        assert send.write_now([b"gh"]) == []
        send.restore()
        os.close(w)
        got = [await receive.receive(), b""]
        with pytest.raises(anyio.EndOfStream):
            await receive.receive()
        return got

    try:
        got = anyio.run(main, backend=backend)
    finally:
        receive.restore()
        os.close(r)
    assert got[0] == b"abcdefgh"


def test_a_sink_over_a_gone_reader_is_broken_and_a_closed_one_refuses() -> None:
    r, w = make_pipe()
    os.close(r)
    sink = FdSink(w)

    async def main() -> None:
        with pytest.raises(anyio.BrokenResourceError):
            sink.write_now([b"x"])
        with pytest.raises(anyio.BrokenResourceError):
            await sink.send_all([b"x"])
        with pytest.raises(anyio.BrokenResourceError):
            await sink.send(b"x")
        sink.close()
        with pytest.raises(anyio.ClosedResourceError):
            sink.write_now([b"x"])
        with pytest.raises(anyio.ClosedResourceError):
            await sink.send_all([b"x"])

    anyio.run(main)


def test_a_borrowed_stdout_sink_leaves_its_fd_open() -> None:
    r, w = make_pipe()
    stream = FdSendStream(w)
    stream.sink.close()
    os.fstat(w)  # still open
    stream.restore()
    os.close(w)
    os.close(r)


def test_write_now_returns_the_rest_of_a_full_pipe_cut_where_the_pipe_stopped() -> None:
    r, w = os.pipe()
    sink = FdSink(w)
    parts: list[Block] = [b"a" * 100_000, b"b" * 5_000_000]
    rest = sink.write_now(parts)
    written = 5_100_000 - sum(len(p) for p in rest)
    assert 0 < written < 5_100_000
    assert bytes(rest[-1][-3:]) == b"bbb"
    got = bytearray()
    while len(got) < written:
        got += os.read(r, 1 << 20)
    assert bytes(got) == (b"a" * 100_000 + b"b" * 5_000_000)[:written]
    os.close(w)
    os.close(r)


def test_soon_caller_is_the_loops_call_soon_on_asyncio_only() -> None:
    async def probe() -> bool:
        return soon_caller() is not None

    assert anyio.run(probe, backend="asyncio")
    assert not anyio.run(probe, backend="trio")


def test_a_paused_block_is_let_go_so_its_buffer_may_be_refilled() -> None:
    data, payloads = wire(4, 100)
    gate = Gate(room=1)
    got: list[bytes] = []

    def dispatch(frame: Frame) -> None:
        assert frame.payload is not None
        got.append(frame.payload)
        gate.room -= 1

    pump = FramePump(FrameDecoder(), dispatch, room=gate)
    buffer = bytearray(data)
    assert not pump.on_block(memoryview(buffer))  # one frame dispatched, then no room
    buffer[:] = b"\x00" * len(buffer)  # the source reads into its buffer again
    gate.room = 10
    assert pump.drain()
    assert got == payloads


def test_a_block_taken_whole_keeps_what_the_room_does_not_take_in_order() -> None:
    # A reader's block of whole frames and a partial one, with room for two frames: the two
    # are dispatched, the rest (whole frames and the tail) waits, and comes out in order.
    data, payloads = wire(5, 100)
    cut = len(data) - 50
    gate = Gate(room=2)
    got: list[bytes] = []

    def dispatch(frame: Frame) -> None:
        assert frame.payload is not None
        got.append(frame.payload)
        gate.room -= 1

    pump = FramePump(FrameDecoder(), dispatch, room=gate)
    buffer = bytearray(data[:cut])
    assert pump.on_block(memoryview(buffer)) is False
    assert got == payloads[:2]
    buffer[:] = b"\xff" * len(buffer)  # the reader reuses its buffer: nothing may refer to it
    gate.room = 100
    assert pump.drain() is True
    assert got == payloads[:4]
    assert pump.on_block(memoryview(bytearray(data[cut:]))) is True
    assert got == payloads
