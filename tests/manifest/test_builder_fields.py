"""The hot builders fill a frame's fields directly; they must equal what Frame() builds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cartridge_runtime.protocol import Frame, FrameType, MessageId, checksum, frames

ids = st.one_of(st.binary(min_size=16, max_size=16), st.integers(0, 1 << 40)).map(MessageId)
xids = st.none() | ids
metas = st.none() | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2)
texts = st.text(min_size=1, max_size=8)


def same(built: Frame, expected: Frame) -> None:
    assert built == expected
    assert list(built.__dict__) == list(expected.__dict__)  # wire order, absent keys left out


@settings(max_examples=200)
@given(
    rid=ids,
    xid=xids,
    sid=texts,
    media=texts,
    seq=st.integers(0, 9),
    is_seq=st.none() | st.booleans(),
    unbounded=st.none() | st.booleans(),
    output=st.none() | texts,
    meta=metas,
)
def test_stream_start(
    rid: MessageId,
    xid: MessageId | None,
    sid: str,
    media: str,
    seq: int,
    is_seq: bool | None,
    unbounded: bool | None,
    output: str | None,
    meta: dict[str, Any] | None,
) -> None:
    built = frames.stream_start(
        rid, sid, media, xid=xid, is_sequence=is_seq, unbounded=unbounded, output=output,
        meta=meta, seq=seq,
    )  # fmt: skip
    expected = Frame(
        frame_type=FrameType.STREAM_START, id=rid, seq=seq, meta=meta, stream_id=sid,
        media_urn=media, routing_id=xid, is_sequence=is_seq,
        unbounded=True if unbounded else None, output=output,
    )  # fmt: skip
    same(built, expected)


@settings(max_examples=200)
@given(
    rid=ids,
    xid=xids,
    sid=texts,
    index=st.integers(0, 99),
    payload=st.binary(max_size=40),
    meta=metas,
    seq=st.integers(0, 9),
)
def test_chunk(
    rid: MessageId,
    xid: MessageId | None,
    sid: str,
    index: int,
    payload: bytes,
    meta: dict[str, Any] | None,
    seq: int,
) -> None:
    built = frames.chunk(rid, sid, index, payload, xid=xid, meta=meta, seq=seq)
    expected = Frame(
        frame_type=FrameType.CHUNK, id=rid, seq=seq, meta=meta, payload=payload, stream_id=sid,
        routing_id=xid, chunk_index=index, checksum=checksum(payload),
    )  # fmt: skip
    same(built, expected)


@settings(max_examples=200)
@given(rid=ids, xid=xids, sid=texts, count=st.none() | st.integers(0, 99), seq=st.integers(0, 9))
def test_stream_end(
    rid: MessageId, xid: MessageId | None, sid: str, count: int | None, seq: int
) -> None:
    built = frames.stream_end(rid, sid, count, xid=xid, seq=seq)
    expected = Frame(
        frame_type=FrameType.STREAM_END, id=rid, seq=seq, stream_id=sid, routing_id=xid,
        chunk_count=count,
    )  # fmt: skip
    same(built, expected)


@settings(max_examples=200)
@given(
    rid=ids,
    xid=xids,
    response=st.booleans(),
    progress=st.floats(0, 1),
    message=st.none() | texts,
    seq=st.integers(0, 9),
)
def test_end(
    rid: MessageId,
    xid: MessageId | None,
    response: bool,
    progress: float,
    message: str | None,
    seq: int,
) -> None:
    built = frames.end(rid, xid=xid, response=response, progress=progress, message=message, seq=seq)
    meta: dict[str, Any] | None = None
    if response:
        meta = {"exit_code": 0, "progress": progress}
        if message is not None:
            meta["message"] = message
    expected = Frame(frame_type=FrameType.END, id=rid, seq=seq, meta=meta, eof=True, routing_id=xid)
    same(built, expected)
