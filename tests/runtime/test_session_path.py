"""The session's compiled body-frame path (``protocol._session_path``) against the Python one.

The C code takes a request's common valid body frames whole (received and delivered into the
handler's input in one call) and hands everything else to the Python dispatch before it has
changed anything. These tests run the same frame sequences, right and wrong, through a
cartridge on each path and demand the same frames back, field by field; and that the compiled
run did take the body frames of a small call itself.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import anyio
import cbor2
import pytest
from _runtime_cartridge import CONCAT, ECHO, SECOND, WORDS, build_runtime
from hypothesis import given, settings
from hypothesis import strategies as st

from cartridge_runtime.protocol import Frame, FrameType, MessageId, frames
from cartridge_runtime.runtime._frames import _session
from cartridge_runtime.testing import CartridgeHarness

BUILT = importlib.util.find_spec("cartridge_runtime.protocol._speedups") is not None
needs_c = pytest.mark.skipif(
    not BUILT or os.environ.get("CARTRIDGE_RUNTIME_PURE_PYTHON") is not None,
    reason="the C fast paths are not built here, or switched off",
)

_BODY = {FrameType.STREAM_START, FrameType.CHUNK, FrameType.STREAM_END, FrameType.END}


def _v(value: Any) -> bytes:
    return cbor2.dumps(value)


def _call(rid: MessageId, cap: str, streams: list[tuple[str, str, list[bytes]]]) -> list[Frame]:
    out = [frames.req(rid, cap)]
    for sid, media, payloads in streams:
        out.append(frames.stream_start(rid, sid, media))
        out += [frames.chunk(rid, sid, i, p) for i, p in enumerate(payloads)]
        out.append(frames.stream_end(rid, sid, len(payloads)))
    out.append(frames.end(rid))
    return out


def _scenarios(rid: MessageId) -> dict[str, list[Frame]]:
    small = _call(rid, ECHO, [("a", "media:", [_v(b"hi")])])
    bad_crc = frames.chunk(rid, "a", 0, _v(b"hi"))
    bad_crc = Frame(**{**bad_crc.__dict__, "checksum": (bad_crc.checksum or 0) ^ 1})
    return {
        "small": small,
        "two chunks": _call(rid, ECHO, [("a", "media:", [_v(b"one"), _v(b"two")])]),
        "two streams": _call(
            rid, CONCAT, [("a", "media:first", [_v(b"x")]), ("b", SECOND, [_v(b"y")])]
        ),
        "a text value": _call(rid, WORDS, [("a", "media:enc=utf-8", [_v("two words")])]),
        "a value kept for pass-through": _call(rid, ECHO, [("a", "media:", [_v(b"z" * 5000)])]),
        "a sequence": [
            frames.req(rid, ECHO),
            frames.stream_start(rid, "a", "media:", is_sequence=True),
            frames.chunk(rid, "a", 0, _v(b"i1")),
            frames.chunk(rid, "a", 1, _v(b"i2")),
            frames.stream_end(rid, "a", 2),
            frames.end(rid),
        ],
        "a wrong chunk index": [*small[:2], frames.chunk(rid, "a", 1, _v(b"hi")), *small[3:]],
        "a wrong checksum": [*small[:2], bad_crc, *small[3:]],
        "a wrong chunk count": [*small[:3], frames.stream_end(rid, "a", 2), small[-1]],
        "a chunk of an unknown stream": [*small[:2], frames.chunk(rid, "b", 0, _v(b"hi"))],
        "END before STREAM_END": [*small[:3], small[-1]],
        "an output name on an argument": [
            frames.req(rid, ECHO),
            frames.stream_start(rid, "a", "media:", output="media:"),
        ],
        "frames after END": [*small, frames.chunk(rid, "a", 1, _v(b"late")), frames.end(rid)],
        "a host LOG in the body": [
            *small[:3],
            frames.log(rid, "info", "hello", "internal"),
            *small[3:],
        ],
    }


def _shape(got: list[Frame]) -> list[tuple[Any, ...]]:
    """The frames of one request, with the response's random stream ids numbered in order."""
    names: dict[str, str] = {}
    out = []
    for f in got:
        sid = None if f.stream_id is None else names.setdefault(f.stream_id, f"s{len(names)}")
        meta = dict(f.meta or {})
        out.append(
            (f.frame_type, f.seq, sid, f.payload, f.chunk_index, f.chunk_count, f.media_urn, meta)
        )
    return out


async def _run(compiled: bool) -> tuple[dict[str, list[tuple[Any, ...]]], int]:
    fallbacks = 0
    real = _session.flow_dispatcher

    def dispatcher(conn: Any, active: Any, fallback: Any, deliver: Any, **kw: Any) -> Any:
        def counted(frame: Frame) -> None:
            nonlocal fallbacks
            if frame.frame_type in _BODY:
                fallbacks += 1
            fallback(frame)

        if not compiled:
            return counted
        return real(conn, active, counted, deliver, **kw)

    results: dict[str, list[tuple[Any, ...]]] = {}
    _session.flow_dispatcher = dispatcher  # type: ignore[assignment]
    try:
        async with CartridgeHarness(build_runtime()) as h:
            for i, (name, sent) in enumerate(_scenarios(MessageId(1000)).items()):
                rid = MessageId(1000 + i)
                for f in _scenarios(rid)[name]:
                    await h.send_frame(f)
                await h.heartbeat()  # every frame before it was dispatched
                with anyio.move_on_after(2):
                    await h.wait_for(
                        lambda f, rid=rid: (
                            f.id == rid and f.frame_type in (FrameType.END, FrameType.ERR)
                        )
                    )
                results[name] = _shape([f for f in h.received if f.id == rid])
                assert sent  # every scenario sends frames
    finally:
        _session.flow_dispatcher = real
    return results, fallbacks


@needs_c
@pytest.mark.asyncio
async def test_the_compiled_body_path_answers_every_sequence_as_the_python_one() -> None:
    pure, pure_fallbacks = await _run(compiled=False)
    fast, fast_fallbacks = await _run(compiled=True)
    assert fast == pure
    assert pure["small"][-1][0] is FrameType.END
    assert pure["a wrong chunk index"][-1][0] is FrameType.ERR
    # The compiled run took the valid body frames itself; the Python one took all of them.
    assert fast_fallbacks < pure_fallbacks / 2


@pytest.mark.asyncio
async def test_without_the_compiled_module_the_dispatch_is_the_python_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cartridge_runtime.protocol import _session_path

    monkeypatch.setattr(_session_path, "_compiled", None)

    def fallback(frame: Frame) -> None:
        pass

    def deliver(a: Any, frame: Frame, events: list[Any]) -> None:
        pass

    got = _session_path.flow_dispatcher(
        None,  # type: ignore[arg-type]
        {},
        fallback,
        deliver,
        data_tag=0,
        end_entry=(2, None, None, 0),
        pass_through_min=4096,
    )
    assert got is fallback


class _Credit:
    def __init__(self, credit: int) -> None:
        self.credit = credit


def _outbox_state(box: Any, stream: Any) -> tuple[Any, ...]:
    return (
        list(box._frames),
        box._count,
        box._unyielded,
        box._kicked,
        box.counts.drops,
        None if stream is None else stream.credit,
    )


@needs_c
@given(
    kinds=st.lists(st.sampled_from(["start", "chunk", "big", "end"]), max_size=8),
    queued=st.integers(0, 6),
    bound=st.integers(1, 6),
    unyielded=st.integers(0, 3000),
    credit=st.none() | st.integers(0, 4),
    held=st.booleans(),
    kicked=st.booleans(),
    closed=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_the_compiled_queueing_takes_what_the_python_one_takes(
    kinds: list[str],
    queued: int,
    bound: int,
    unyielded: int,
    credit: int | None,
    held: bool,
    kicked: bool,
    closed: bool,
) -> None:
    from cartridge_runtime._plumbing import EncodeAt, FrameOutbox
    from cartridge_runtime.protocol import _session_path

    rid = MessageId(7)
    make = {
        "start": lambda: frames.stream_start(rid, "s", "media:"),
        "chunk": lambda: frames.chunk(rid, "s", 0, _v(b"x" * 100)),
        "big": lambda: frames.chunk(rid, "s", 0, _v(b"x" * 2000)),
        "end": lambda: frames.stream_end(rid, "s", 1),
    }
    run = [make[k]() for k in kinds]
    got = []
    for queue in (_session_path.queue_frames, _session_path.frame_queuer()):
        box = FrameOutbox(None, lambda: 1 << 20, encode_at=EncodeAt.FLUSH, bound=bound,
                          yield_bytes=4096)  # fmt: skip
        box._frames = [frames.end(rid)] * queued
        box._count, box._unyielded, box._kicked = queued, unyielded, kicked
        box._hold = int(held)
        if closed:
            box.close()
            box._kicked = kicked
        stream = None if credit is None else _Credit(credit)
        n = queue(box, stream, run, FrameType.CHUNK)
        got.append((n, _outbox_state(box, stream)))
    pure, fast = got
    if closed:
        # A closed outbox: Python's try_send drops and counts each frame it takes; the
        # compiled path takes none and leaves them to the caller's waiting path, which drops
        # and counts them so. Neither queues anything.
        before = ([frames.end(rid)] * queued, queued, unyielded, kicked, 0, credit)
        assert fast == (0, before)
        assert pure[1][0] == before[0] and pure[1][4] == pure[0]
        return
    assert fast == pure
    assert _session_path.frame_queuer() is not _session_path.queue_frames


def _stream_state(s: Any) -> dict[str, Any]:
    state = {name: getattr(s, name) for name in type(s).__slots__}
    state["_buf"] = bytes(state["_buf"])
    return state


def _fields(out: list[Frame] | None) -> Any:
    """Each frame's fields in their stored order (the builders' wire-key order)."""
    return None if out is None else [list(f.__dict__.items()) for f in out]


@needs_c
@given(
    xid=st.none() | st.integers(1, 5),
    output=st.none() | st.just("media:out"),
    meta=st.none() | st.just({"k": "v"}),
    unbounded=st.booleans(),
    coalesce=st.booleans(),
    max_chunk=st.integers(1, 300),
    size=st.integers(0, 5000),
    writes=st.integers(0, 2),
    memory=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_a_small_outputs_compiled_frames_are_the_methods_own(
    xid: int | None,
    output: str | None,
    meta: dict[str, str] | None,
    unbounded: bool,
    coalesce: bool,
    max_chunk: int,
    size: int,
    writes: int,
    memory: bool,
) -> None:
    from cartridge_runtime.protocol import OutgoingStream
    from cartridge_runtime.protocol import _session_path as sp

    open_small, close_small = sp.small_output_paths()
    assert open_small is not sp._no_open  # compiled here

    def make() -> OutgoingStream:
        return OutgoingStream(
            MessageId(9),
            "resp-1",
            "media:",
            xid=None if xid is None else MessageId(xid),
            max_chunk=max_chunk,
            initial_credit=4,
            unbounded=unbounded,
            output=output,
            meta=meta,
            coalesce=coalesce,
        )

    data: bytes | memoryview = b"d" * size
    if memory:
        data = memoryview(bytes(data))
    py, c = make(), make()
    # the opening write: the C answer, or None and the methods (as WireOutput.start_write does)
    got = open_small(c, data, 5.0)
    want = py.start(is_sequence=False, unbounded=False) + py.write_bytes(data, 5.0)
    if got is None:
        assert _stream_state(c) == _stream_state(make())  # nothing changed
        got = c.start(is_sequence=False, unbounded=False) + c.write_bytes(data, 5.0)
    assert _fields(got) == _fields(want)
    assert _stream_state(c) == _stream_state(py)
    for _ in range(writes):
        assert _fields(c.write_bytes(b"more", 6.0)) == _fields(py.write_bytes(b"more", 6.0))
    # the close
    before = _stream_state(c)
    got = close_small(c)
    want = py.close()
    if got is None:
        assert _stream_state(c) == before
        got = c.close()
    assert _fields(got) == _fields(want)
    assert _stream_state(c) == _stream_state(py)
    assert close_small(c) is None  # closed: the method decides (and answers [])


@needs_c
def test_a_small_answer_is_the_compiled_paths_own() -> None:
    from cartridge_runtime.protocol import OutgoingStream
    from cartridge_runtime.protocol import _session_path as sp

    open_small, close_small = sp.small_output_paths()
    s = OutgoingStream(MessageId(9), "resp-1", "media:", max_chunk=100, initial_credit=4)
    opened = open_small(s, b"42", 1.0)
    closed = close_small(s)
    assert opened is not None and [f.frame_type for f in opened] == [FrameType.STREAM_START]
    assert closed is not None
    assert [f.frame_type for f in closed] == [FrameType.CHUNK, FrameType.STREAM_END]
    assert closed[0].payload == _v(b"42") and closed[1].chunk_count == 1


@needs_c
@given(
    xid=st.none() | st.integers(1, 5),
    progress=st.sampled_from([1.0, 0.5, 1, 0]),
    message=st.none() | st.just("done"),
)
def test_a_responses_compiled_end_is_the_builders_own(
    xid: int | None, progress: float, message: str | None
) -> None:
    from cartridge_runtime.protocol import _cartridge_state, _session_path

    assert _session_path._outputs is not None and _cartridge_state._c_end is not None
    x = None if xid is None else MessageId(xid)
    got = _cartridge_state._c_end(MessageId(3), x, progress, message)
    want = frames.end(MessageId(3), xid=x, progress=progress, message=message)
    assert _fields([got]) == _fields([want])
    assert type(got.meta["progress"]) is float
