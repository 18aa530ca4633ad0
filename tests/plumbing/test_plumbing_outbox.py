"""The one outbound frame queue and writer (``cartridge_runtime._plumbing.FrameOutbox``), in
isolation: memory sinks, real pipes, asyncio and trio."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from cartridge_runtime._plumbing import (
    Block,
    EncodeAt,
    FdSink,
    FrameOutbox,
    StreamSink,
    make_pipe,
    sink_for,
)
from cartridge_runtime.protocol import (
    Frame,
    FrameDecoder,
    FrameEncodeError,
    FrameType,
    MessageId,
    ProtocolError,
    SeqAssigner,
    frames,
)

BACKENDS = ["asyncio", "trio"]
MODES = [EncodeAt.QUEUE, EncodeAt.FLUSH]
MAX = 1 << 20


class MemSink:
    """A sink in memory: ``write_now`` takes at most ``room`` bytes per call (``None``: all),
    ``send_all`` takes everything; each call is recorded."""

    def __init__(self, room: int | None = None) -> None:
        self.room = room
        self.closed = False
        self.data = bytearray()
        #: ("now" | "all", bytes taken) per call.
        self.calls: list[tuple[str, int]] = []
        #: Every buffer handed over, by identity (to check that nothing was copied).
        self.buffers: list[Block] = []
        self.fail: type[Exception] | None = None
        self.gate: anyio.Event | None = None  # send_all waits on it when set

    def write_now(self, parts: list[Block]) -> list[Block]:
        if self.fail is not None:
            raise self.fail
        self.buffers.extend(parts)
        data = b"".join(parts)
        n = len(data) if self.room is None else min(self.room, len(data))
        self.data += data[:n]
        self.calls.append(("now", n))
        if n == len(data):
            return []
        # The rest as the fd sink gives it: the buffers from the cut one on, the first cut.
        rest: list[Block] = []
        pos = 0
        for p in parts:
            size = len(p)
            if pos + size <= n:
                pos += size
                continue
            rest.append(memoryview(p)[max(0, n - pos) :] if pos < n else p)
            pos += size
        return rest

    async def send_all(self, parts: Sequence[Block]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        self.buffers.extend(parts)
        data = b"".join(parts)
        self.data += data
        self.calls.append(("all", len(data)))


def decoded(data: bytes | bytearray) -> list[Frame]:
    decoder = FrameDecoder(MAX)
    decoder.feed(bytes(data))
    return decoder.frames()


def response(rid: MessageId, payload: bytes = b"\x42") -> list[Frame]:
    return [
        frames.stream_start(rid, "s", "media:json"),
        frames.chunk(rid, "s", 0, payload),
        frames.stream_end(rid, "s", 1),
        frames.end(rid),
    ]


def outbox(sink: MemSink | None, mode: EncodeAt, **kw: object) -> FrameOutbox:
    """An outbox numbering by a fresh assigner, as a connection core's would."""
    kw.setdefault("number", SeqAssigner().number)
    return FrameOutbox(sink, lambda: MAX, encode_at=mode, **kw)  # type: ignore[arg-type]


class _Counts:
    """A connection's statistics: the outbox counts drops, the numbering stragglers."""

    def __init__(self) -> None:
        self.drops = 0
        self.stragglers = 0


# -- numbering, order, stragglers, drops (synchronous: hold/release) ------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_held_batch_leaves_in_one_write_numbered_per_flow(mode: EncodeAt) -> None:
    sink = MemSink()
    box = outbox(sink, mode)
    a, b = MessageId.new(), MessageId.new()
    box.hold()
    for fa, fb in zip(response(a), response(b), strict=True):
        box.push(fa)
        box.push(fb)
    box.push(frames.heartbeat(MessageId.new()))
    assert sink.calls == []  # nothing written while held
    box.release()
    assert [c[0] for c in sink.calls] == ["now"]
    got = decoded(sink.data)
    assert [(f.id, f.seq) for f in got if f.id == a] == [(a, 0), (a, 1), (a, 2), (a, 3)]
    assert [(f.id, f.seq) for f in got if f.id == b] == [(b, 0), (b, 1), (b, 2), (b, 3)]
    assert got[-1].frame_type is FrameType.HEARTBEAT and got[-1].seq == 0
    assert box.batches == 1


@pytest.mark.parametrize("mode", MODES)
def test_nested_holds_write_on_the_outermost_release(mode: EncodeAt) -> None:
    sink = MemSink()
    box = outbox(sink, mode)
    rid = MessageId.new()
    box.hold()
    box.hold()
    box.push(frames.end(rid))
    box.release()
    assert sink.calls == []
    box.release()
    assert [f.frame_type for f in decoded(sink.data)] == [FrameType.END]


@pytest.mark.parametrize("mode", MODES)
def test_stragglers_after_a_terminal_are_dropped_and_counted(mode: EncodeAt) -> None:
    sink = MemSink()
    counts = _Counts()
    box = outbox(sink, mode, counts=counts, number=SeqAssigner(counts).number)
    rid = MessageId.new()
    box.hold()
    box.push(frames.end(rid))
    box.push(frames.chunk(rid, "s", 0, b"late"))
    box.push(frames.err(rid, "X", "late", "internal"))
    box.release()
    assert [f.frame_type for f in decoded(sink.data)] == [FrameType.END]
    assert counts.stragglers == 2 and box.counts is counts


def test_an_unencodable_frame_raises_to_its_sender_when_encoded_at_queue_time() -> None:
    sink = MemSink()
    box = FrameOutbox(sink, lambda: 1000, number=SeqAssigner().number)
    rid = MessageId.new()
    with pytest.raises(FrameEncodeError):
        box.push(frames.chunk(rid, "s", 0, b"x" * 5000))
    box.push(frames.end(rid))
    box.flush()
    assert [f.frame_type for f in decoded(sink.data)] == [FrameType.END]


def test_an_unencodable_frame_is_dropped_counted_and_reported_when_encoded_at_flush() -> None:
    sink = MemSink()
    seen: list[tuple[Frame, ProtocolError]] = []
    box = FrameOutbox(
        sink, lambda: 1000, encode_at=EncodeAt.FLUSH, on_drop=lambda f, e: seen.append((f, e))
    )
    rid = MessageId.new()
    big = frames.chunk(rid, "s", 0, b"x" * 5000)
    box.hold()
    box.push(big)  # no error here: frames are encoded when written
    box.push(frames.end(rid))
    box.release()
    assert [f.frame_type for f in decoded(sink.data)] == [FrameType.END]
    assert box.counts.drops == 1
    assert seen[0][0] is big and isinstance(seen[0][1], FrameEncodeError)


def test_the_default_drop_report_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    box = FrameOutbox(
        MemSink(), lambda: 1000, number=SeqAssigner().number, encode_at=EncodeAt.FLUSH
    )
    box.push(frames.chunk(MessageId.new(), "s", 0, b"x" * 5000))
    box.flush()
    err = capsys.readouterr().err
    assert err.startswith("cartridge: dropping a CHUNK frame that cannot be encoded")
    assert err.count("\n") == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_large_payload_reaches_the_sink_as_its_own_buffer(mode: EncodeAt) -> None:
    sink = MemSink()
    box = outbox(sink, mode)
    payload = bytes(range(256)) * 1024
    rid = MessageId.new()
    box.hold()
    box.push(frames.chunk(rid, "s", 0, payload))
    box.push(frames.chunk(rid, "s", 1, b"small"))
    box.release()
    assert any(b is payload for b in sink.buffers)  # handed over, never copied
    got = decoded(sink.data)
    assert got[0].payload == payload and got[1].payload == b"small"


def test_push_numbered_keeps_the_callers_seq_and_bypasses_the_assigner() -> None:
    sink = MemSink()
    seq = SeqAssigner()
    box = FrameOutbox(sink, lambda: MAX, number=seq.number)
    rid = MessageId.new()
    box.hold()
    box.push_numbered(frames.req(rid, "cap:in=media:;out=media:"))
    box.push_numbered(frames.end(rid), 7)
    box.release()
    assert [f.seq for f in decoded(sink.data)] == [0, 7]
    assert not seq.is_closed(rid)


def test_push_flow_gives_the_bytes_of_one_push_numbered_per_frame() -> None:
    rid = MessageId.new()
    flow = [
        frames.req(rid, "cap:in=media:;out=media:"),
        frames.stream_start(rid, "arg-0", "media:", is_sequence=False),
        frames.chunk(rid, "arg-0", 0, b"\x42hi"),
        frames.stream_end(rid, "arg-0", 1),
        frames.end(rid, response=False),
    ]
    one_by_one, at_once = MemSink(), MemSink()
    seq = SeqAssigner()
    box = FrameOutbox(one_by_one, lambda: MAX, number=seq.number)
    box.hold()
    for n, frame in enumerate(flow):
        box.push_numbered(frame, n)
    box.release()
    box = FrameOutbox(at_once, lambda: MAX, number=seq.number)
    start = box.mark()
    box.hold()
    box.push_flow(flow)
    assert box.mark()[1] - start[1] == len(flow)  # one queue position per frame (withdraw)
    box.release()
    assert at_once.data == one_by_one.data
    assert [f.seq for f in decoded(at_once.data)] == [0, 1, 2, 3, 4]
    assert not seq.is_closed(rid)  # the numbering never saw the flow


def test_withdraw_takes_back_frames_not_yet_written() -> None:
    sink = MemSink()
    seq = SeqAssigner()
    box = FrameOutbox(sink, lambda: MAX, number=seq.number)
    keep, drop = MessageId.new(), MessageId.new()
    box.hold()
    box.push(frames.heartbeat(keep))
    start = box.mark()
    box.push(frames.req(drop, "cap:in=media:;out=media:"))
    box.push(frames.end(drop))
    stop = box.mark()
    assert box.withdraw(start, stop)
    seq.forget(drop)
    box.release()
    assert [f.id for f in decoded(sink.data)] == [keep]
    # Once written, the same positions are stale: nothing to withdraw.
    assert not box.withdraw(start, stop)
    box.push(frames.end(drop))  # forgotten: a fresh flow, not a straggler
    box.flush()
    assert decoded(sink.data)[-1].frame_type is FrameType.END


def test_withdraw_refuses_positions_past_the_queue() -> None:
    box = FrameOutbox(MemSink(), lambda: MAX, number=SeqAssigner().number)
    assert not box.withdraw(box.mark(), (0, 5))


# -- the writer task, the loop callback, partial writes -------------------------------------


async def _run_with(box: FrameOutbox, body: object) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(box.run)
        await anyio.sleep(0.01)
        await body()  # type: ignore[operator]
        box.close()
    assert box.done.is_set()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_unheld_frames_leave_from_a_loop_callback_on_asyncio_and_from_the_task_elsewhere(
    backend: str, mode: EncodeAt
) -> None:
    sink = MemSink()
    box = outbox(sink, mode)

    async def body() -> None:
        for f in response(MessageId.new()):
            box.push(f)
        assert sink.calls == []  # nothing written while the producer runs
        await anyio.sleep(0.01)

    anyio.run(_run_with, box, body, backend=backend)
    # One write for the four frames: in place on asyncio, by the task elsewhere.
    assert [c[0] for c in sink.calls] == (["now"] if backend == "asyncio" else ["all"])
    assert [f.seq for f in decoded(sink.data)] == [0, 1, 2, 3]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_what_the_pipe_does_not_take_goes_to_the_task_in_order(
    backend: str, mode: EncodeAt
) -> None:
    sink = MemSink(room=100)  # every non-blocking write is partial
    box = outbox(sink, mode)
    rids = [MessageId.new() for _ in range(20)]

    async def body() -> None:
        for rid in rids:
            box.hold()
            for f in response(rid, b"p" * 50):
                box.push(f)
            box.release()
            await anyio.lowlevel.checkpoint()
        await box.drain()

    anyio.run(_run_with, box, body, backend=backend)
    got = decoded(sink.data)
    assert [f.id for f in got] == [rid for rid in rids for _ in range(4)]
    assert "all" in {c[0] for c in sink.calls}  # the task wrote what did not fit


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_full_pipe_wakes_the_task_and_nothing_overtakes_its_bytes(backend: str) -> None:
    sink = MemSink(room=0)  # the pipe is full: write_now takes nothing
    box = FrameOutbox(sink, lambda: MAX, number=SeqAssigner().number)

    async def body() -> None:
        sink.gate = anyio.Event()
        box.hold()
        box.push(frames.heartbeat(MessageId(1)))
        box.release()
        await anyio.sleep(0.01)
        assert sink.calls == [("now", 0)]  # the task waits for room
        sink.room = None  # the pipe has room again, but the task still owns the bytes
        box.hold()
        box.push(frames.heartbeat(MessageId(2)))
        box.release()
        box.flush()
        sink.gate.set()
        await box.drain()

    anyio.run(_run_with, box, body, backend=backend)
    assert [f.id for f in decoded(sink.data)] == [MessageId(1), MessageId(2)]
    assert [c[0] for c in sink.calls][:2] == ["now", "all"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_flush_now_writes_before_the_producer_yields(backend: str) -> None:
    sink = MemSink()
    box = FrameOutbox(sink, lambda: MAX, number=SeqAssigner().number, encode_at=EncodeAt.FLUSH)

    async def body() -> None:
        for f in response(MessageId.new()):
            box.push(f)
        box.flush_now()
        if backend == "asyncio":
            assert sink.calls == [("now", len(sink.data))]  # written before any yield
        await anyio.sleep(0.01)

    anyio.run(_run_with, box, body, backend=backend)
    assert len(sink.calls) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stream_sink_always_writes_from_the_task_in_one_gathering_write(backend: str) -> None:
    writes: list[tuple[str, bytes]] = []

    class Stream(anyio.abc.ByteSendStream):
        async def send(self, item: bytes) -> None:
            writes.append(("send", bytes(item)))

        async def send_many(self, parts: Sequence[Block]) -> None:
            writes.append(("many", b"".join(parts)))

        async def aclose(self) -> None:
            pass

    sink = sink_for(Stream())
    assert isinstance(sink, StreamSink)
    box = FrameOutbox(sink, lambda: MAX, number=SeqAssigner().number, encode_at=EncodeAt.FLUSH)

    async def body() -> None:
        box.hold()
        for f in response(MessageId.new()):
            box.push(f)
        box.release()
        assert writes == []  # the stream cannot write without waiting
        await box.drain()
        box.push(frames.heartbeat(MessageId(3)))
        await box.drain()

    anyio.run(_run_with, box, body, backend=backend)
    assert [w[0] for w in writes] == ["many", "send"]
    assert len(decoded(b"".join(w[1] for w in writes))) == 5


# -- the bound, yielding, closing, a broken sink --------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_send_waits_for_room_and_push_goes_past_the_bound(backend: str) -> None:
    sink = MemSink()
    box = FrameOutbox(
        sink, lambda: MAX, number=SeqAssigner().number, encode_at=EncodeAt.FLUSH, bound=3
    )
    order: list[str] = []

    async def body() -> None:
        box.hold()  # nothing leaves: the queue fills
        for i in range(3):
            await box.send(frames.heartbeat(MessageId(i)))
        assert not box.has_room
        assert not box.try_send(frames.heartbeat(MessageId(9)))
        box.push(frames.heartbeat(MessageId(3)))  # past the bound

        async def producer() -> None:
            await box.send(frames.heartbeat(MessageId(4)))
            order.append("sent")

        async with anyio.create_task_group() as tg:
            tg.start_soon(producer)
            await anyio.sleep(0.01)
            assert order == []  # waiting for room
            order.append("release")
            box.release()
        assert box.has_room
        await box.drain()

    anyio.run(_run_with, box, body, backend=backend)
    assert order == ["release", "sent"]
    assert [f.id.value for f in decoded(sink.data)] == [0, 1, 2, 3, 4]


def test_try_send_refuses_what_would_make_the_producer_yield() -> None:
    box = FrameOutbox(
        MemSink(),
        lambda: MAX,
        number=SeqAssigner().number,
        encode_at=EncodeAt.FLUSH,
        yield_bytes=100,
    )
    rid = MessageId.new()
    assert box.try_send(frames.chunk(rid, "s", 0, b"x" * 60))
    assert not box.try_send(frames.chunk(rid, "s", 1, b"x" * 60))  # 120 >= 100: send yields


@pytest.mark.parametrize("backend", BACKENDS)
def test_close_writes_what_is_queued_then_drops_and_counts_later_frames(backend: str) -> None:
    sink = MemSink()
    box = FrameOutbox(
        sink, lambda: MAX, number=SeqAssigner().number, encode_at=EncodeAt.FLUSH, bound=1
    )

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(box.run)
            box.hold()
            box.push(frames.heartbeat(MessageId(1)))
            box.close()
            assert box.has_room  # once closed, never full
            box.push(frames.heartbeat(MessageId(2)))
            box.release()
        assert box.done.is_set()

    anyio.run(main, backend=backend)
    assert [f.id for f in decoded(sink.data)] == [MessageId(1)]
    assert box.counts.drops == 1


@pytest.mark.parametrize("error", [anyio.BrokenResourceError, anyio.ClosedResourceError])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_broken_sink_breaks_the_outbox_and_releases_every_waiter(
    backend: str, error: type[Exception]
) -> None:
    sink = MemSink()
    sink.fail = error
    box = FrameOutbox(
        sink, lambda: MAX, number=SeqAssigner().number, encode_at=EncodeAt.FLUSH, bound=1
    )

    async def body() -> None:
        box.push(frames.heartbeat(MessageId(1)))
        box.push(frames.heartbeat(MessageId(2)))
        with anyio.fail_after(5):
            await box.wait_room()
            await box.drain()
        assert box.broken
        box.push(frames.heartbeat(MessageId(3)))  # discarded, not written
        with anyio.fail_after(5):
            await box.drain()

    anyio.run(_run_with, box, body, backend=backend)
    assert sink.data == b""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sink_failing_in_the_task_breaks_the_outbox(backend: str) -> None:
    sink = MemSink(room=10)
    box = FrameOutbox(sink, lambda: MAX, number=SeqAssigner().number)

    async def body() -> None:
        sink.fail = None
        sink.gate = anyio.Event()
        box.hold()
        box.push(frames.heartbeat(MessageId(1)))
        box.release()  # 10 bytes written, the rest to the task
        sink.fail = anyio.BrokenResourceError
        sink.gate.set()
        with anyio.fail_after(5):
            await box.drain()
        assert box.broken

    anyio.run(_run_with, box, body, backend=backend)


def test_frames_queued_before_the_sink_exists_wait_for_it() -> None:
    sink = MemSink()
    box = FrameOutbox(None, lambda: MAX, number=SeqAssigner().number)

    async def main() -> None:
        box.push(frames.heartbeat(MessageId(1)))
        box.flush()  # no sink yet: nothing to do
        box.attach(sink)
        async with anyio.create_task_group() as tg:
            tg.start_soon(box.run)
            with anyio.fail_after(5):
                await box.drain()
            box.close()

    anyio.run(main)
    assert [f.id for f in decoded(sink.data)] == [MessageId(1)]


# -- a real pipe ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_batch_larger_than_the_pipe_arrives_whole_through_the_task(backend: str) -> None:
    r, w = make_pipe()
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(r, 7000):
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    sink = FdSink(w)
    box = FrameOutbox(sink, lambda: MAX, number=SeqAssigner().number)
    rid = MessageId.new()
    payloads = [bytes([i]) * 300_000 for i in range(12)]

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(box.run)
            box.hold()
            for i, p in enumerate(payloads):
                box.push(frames.chunk(rid, "s", i, p))
            box.push(frames.end(rid))
            box.release()  # the pipe takes part; the task writes the rest as it drains
            with anyio.fail_after(20):
                await box.drain()
            box.close()
        sink.close()

    try:
        anyio.run(main, backend=backend)
    finally:
        if not sink.closed:
            os.close(w)
        reader.join(10)
        os.close(r)
    got_frames = decoded(got)
    assert [f.payload for f in got_frames[:-1]] == payloads
    assert [f.seq for f in got_frames] == list(range(13))


# -- what the shells read, and streams that write in place ----------------------------------


def test_pending_held_and_queued_tell_the_queue_state() -> None:
    box = FrameOutbox(MemSink(), lambda: MAX, number=SeqAssigner().number, encode_at=EncodeAt.FLUSH)
    assert not box.pending and box.held == 0 and box.queued == []
    box.hold()
    hb = frames.heartbeat(MessageId(1))
    box.push(hb)
    assert box.pending and box.held == 1 and box.queued == [hb]
    box.queued.clear()  # a copy: the queue is untouched
    assert box.queued == [hb]
    box.release()
    assert not box.pending and box.held == 0 and box.queued == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stream_with_write_now_is_written_in_place(backend: str) -> None:
    writes: list[tuple[str, bytes]] = []

    class Stream(anyio.abc.ByteSendStream):
        def write_now(self, parts: list[Block]) -> list[Block]:
            writes.append(("now", b"".join(parts)))
            return []

        async def send(self, item: bytes) -> None:
            writes.append(("send", bytes(item)))

        async def aclose(self) -> None:
            pass

    sink = sink_for(Stream())
    assert isinstance(sink, StreamSink) and sink.in_place
    box = FrameOutbox(sink, lambda: MAX, number=SeqAssigner().number, encode_at=EncodeAt.FLUSH)

    async def body() -> None:
        box.hold()
        for f in response(MessageId.new()):
            box.push(f)
        box.release()
        assert [w[0] for w in writes] == ["now"]  # synchronously, on either backend

    anyio.run(_run_with, box, body, backend=backend)
    assert len(decoded(writes[0][1])) == 4


def test_a_stream_sink_sends_a_lone_view_as_bytes() -> None:
    sent: list[object] = []

    class Stream(anyio.abc.ByteSendStream):
        async def send(self, item: bytes) -> None:
            sent.append(item)

        async def aclose(self) -> None:
            pass

    sink = StreamSink(Stream())
    assert not sink.in_place and sink.write_now([b"x"]) == [b"x"]
    anyio.run(sink.send_all, [memoryview(b"abc")])
    anyio.run(sink.send_all, [b"a", b"b"])
    assert sent == [b"abc", b"ab"] and type(sent[0]) is bytes


@pytest.mark.parametrize("mode", MODES)
def test_without_a_numbering_frames_keep_the_seq_they_carry(mode: EncodeAt) -> None:
    sink = MemSink()
    box = FrameOutbox(sink, lambda: MAX, encode_at=mode)
    rid = MessageId.new()
    box.hold()
    box.push(frames.end(rid).replace(seq=5))
    box.push(frames.end(rid).replace(seq=5))  # no rule here: the core decides stragglers
    box.release()
    assert [f.seq for f in decoded(sink.data)] == [5, 5]
