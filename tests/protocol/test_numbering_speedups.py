"""A writer's batch numbered and encoded in one compiled call (``encode_numbered``) against
the per-frame path (``SeqAssigner.number`` then ``encode_frame``): the same bytes in the same
order, the same stragglers counted, the same flows open and closed afterwards."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cartridge_runtime.protocol import (
    Frame,
    MessageId,
    ProtocolError,
    SeqAssigner,
    _codec,
    _seq,
    encode_flow,
    encode_frame,
    frames,
)

BUILT = importlib.util.find_spec("cartridge_runtime.protocol._speedups") is not None
needs_c = pytest.mark.skipif(
    not BUILT or os.environ.get(_codec.PURE_PYTHON_ENV) is not None,
    reason="the C fast paths are not built here, or switched off",
)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

IDS = [MessageId(b"\x01" * 16), MessageId(b"\x02" * 16), MessageId(3)]
XIDS = [None, MessageId(9), MessageId(b"\x09" * 16)]


def _per_frame(seq: SeqAssigner, batch: list[Frame], out: list[Any], max_frame: int) -> None:
    for frame in batch:
        n = seq.number(frame)
        if n is None:
            continue
        try:
            out.append(encode_frame(frame, max_frame, n))
        except ProtocolError as exc:
            out.append(("dropped", type(exc), str(exc)))


def _batched(seq: SeqAssigner, batch: list[Frame], out: list[Any], max_frame: int) -> None:
    i = 0
    while i < len(batch):
        i = seq.encode_numbered(batch, i, out, max_frame)
        if i >= len(batch):
            break
        _per_frame(seq, [batch[i]], out, max_frame)
        i += 1


def _state(seq: SeqAssigner) -> Any:
    return seq.stragglers, dict(seq._counters), list(seq._closed)


@st.composite
def _frame(draw: st.DrawFn) -> Frame:
    rid = draw(st.sampled_from(IDS))
    xid = draw(st.sampled_from(XIDS))
    kind = draw(st.sampled_from(["start", "chunk", "chunk", "big", "end", "err", "log", "hb"]))
    if kind == "start":
        return frames.stream_start(rid, "s", "media:", xid=xid)
    if kind == "chunk":
        return frames.chunk(
            rid, "s", draw(st.integers(0, 3)), draw(st.binary(max_size=30)), xid=xid
        )
    if kind == "big":  # a payload the per-frame path encodes as separate buffers
        return frames.chunk(rid, "s", 0, b"\x59\x20\x00" + b"q" * 8192, xid=xid)
    if kind == "end":
        return frames.end(rid, xid=xid)
    if kind == "err":
        return frames.err(rid, "E", "failed", "internal", xid=xid)  # type: ignore[arg-type]
    if kind == "log":
        return frames.log(rid, "info", "note", "internal", xid=xid)  # type: ignore[arg-type]
    return frames.heartbeat(rid)


@needs_c
def test_the_compiled_numbering_is_in_use() -> None:
    assert _seq._c_encode_numbered is not None
    seq = SeqAssigner()
    rid = IDS[0]
    batch = [
        frames.stream_start(rid, "s", "media:"),
        frames.chunk(rid, "s", 0, b"x"),
        frames.end(rid),
    ]
    out: list[Any] = []
    assert seq.encode_numbered(batch, 0, out, 1 << 20) == 3
    assert out == [encode_frame(f, 1 << 20, n) for n, f in enumerate(batch)]
    # The flow is closed: its next frame is left to the per-frame path, which counts it.
    assert seq.encode_numbered([frames.end(rid)], 0, out, 1 << 20) == 0


@needs_c
@FAST
@given(
    batches=st.lists(st.lists(_frame(), max_size=8), max_size=5),
    max_closed=st.integers(1, 4),
    max_frame=st.sampled_from([1 << 20, 60]),
)
def test_batches_give_the_bytes_and_counts_of_the_per_frame_path(
    batches: list[list[Frame]], max_closed: int, max_frame: int
) -> None:
    small = type("SmallMemory", (SeqAssigner,), {"__slots__": (), "MAX_CLOSED": max_closed})
    one, other = small(), small()
    for batch in batches:
        a: list[Any] = []
        b: list[Any] = []
        _per_frame(one, batch, a, max_frame)
        _batched(other, batch, b, max_frame)
        assert a == b
        assert _state(one) == _state(other)


def _flow_per_frame(batch: list[Frame], max_frame: int) -> list[Any]:
    out: list[Any] = []
    for n, f in enumerate(batch):
        try:
            out.append(encode_frame(f, max_frame, n))
        except ProtocolError as exc:
            out.append(("refused", type(exc), str(exc)))
            break
    return out


def _flow_batched(batch: list[Frame], max_frame: int) -> list[Any]:
    out: list[Any] = []
    taken = encode_flow(batch, max_frame, out)
    assert 0 <= taken <= len(batch)
    if _codec._c_encode_flow is None:
        assert taken == 0
    tail = _flow_per_frame(batch, max_frame)[taken:]
    return out + tail


@FAST
@given(batch=st.lists(_frame(), max_size=8), max_frame=st.sampled_from([1 << 20, 60]))
def test_a_flow_encoded_in_one_call_gives_the_bytes_of_one_call_per_frame(
    batch: list[Frame], max_frame: int
) -> None:
    assert _flow_batched(batch, max_frame) == _flow_per_frame(batch, max_frame)
    assert _flow_batched(list(batch), max_frame) == _flow_batched(tuple(batch), max_frame)  # type: ignore[arg-type]


@needs_c
def test_a_small_request_is_encoded_whole_by_the_compiled_call() -> None:
    rid = IDS[0]
    batch = [frames.req(rid, "cap:x"), frames.stream_start(rid, "s", "media:"), frames.end(rid)]
    out: list[Any] = []
    assert encode_flow(batch, 1 << 20, out) == 3
    assert out == [encode_frame(f, 1 << 20, n) for n, f in enumerate(batch)]
