"""Property tests of the codec (hypothesis).

- Any valid frame of any type survives encode -> decode unchanged, whole and through
  :class:`FrameDecoder` in random pieces.
- Arbitrary bytes and mutated vector frames fed to the decoder raise only
  :class:`ProtocolError` subclasses: never another exception, never a hang.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from _frame_vectors import all_frames
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cartridge_runtime.protocol import (
    ATTRIBUTION_CLASSES,
    POLICY_WORDS,
    Frame,
    FrameDecoder,
    FrameType,
    MessageId,
    ProtocolError,
    checksum,
    decode_body,
    decode_frame,
    encode_frame,
)

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # cbor2's "possible nested set"

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

uint = st.integers(min_value=0, max_value=(1 << 64) - 1)
small_uint = st.integers(min_value=0, max_value=1 << 20)
text = st.text(max_size=20)
ne_text = st.text(min_size=1, max_size=20)
ids = st.one_of(st.binary(min_size=16, max_size=16), uint).map(MessageId)
scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 64) + 1, max_value=(1 << 64) - 1),
    st.floats(allow_nan=False),
    text,
    st.binary(max_size=40),
)
values = st.recursive(
    scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
    max_leaves=10,
)
free_meta = st.dictionaries(text, values, max_size=5)
attribution = st.sampled_from(sorted(ATTRIBUTION_CLASSES))


def _opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


def _meta_for(ft: FrameType) -> st.SearchStrategy[Any]:
    if ft is FrameType.ERR:
        return st.fixed_dictionaries(
            {"code": ne_text, "attribution_class": attribution, "message": text},
            optional={"arg_urn": ne_text},
        )
    if ft is FrameType.LOG:
        plain = st.fixed_dictionaries(
            {
                "level": ne_text.filter(lambda s: s != "progress"),
                "attribution_class": attribution,
                "message": text,
            },
            optional={"arg_urn": ne_text},
        )
        prog = st.fixed_dictionaries(
            {
                "level": st.just("progress"),
                "message": text,
                "progress": st.one_of(st.floats(allow_nan=False), st.integers()),
            },
        )
        return st.one_of(plain, prog)
    if ft is FrameType.POLICY:
        return st.fixed_dictionaries({"network": st.sampled_from(sorted(POLICY_WORDS))})
    if ft is FrameType.HELLO:
        return free_meta
    if ft is FrameType.END:
        return _opt(
            st.fixed_dictionaries(
                {},
                optional={
                    "exit_code": st.integers(),
                    "progress": st.floats(allow_nan=False),
                    "message": text,
                },
            )
        )
    if ft is FrameType.CANCEL:
        return _opt(
            st.fixed_dictionaries(
                {}, optional={"code": ne_text, "attribution_class": attribution, "message": text}
            )
        )
    return _opt(free_meta)


@st.composite
def valid_frames(draw: st.DrawFn) -> Frame:
    ft = draw(st.sampled_from(list(FrameType)))
    payload = draw(_opt(st.binary(max_size=300)))
    fields: dict[str, Any] = {
        "frame_type": ft,
        "id": draw(ids),
        "seq": draw(uint),
        "version": draw(st.integers(min_value=-1000, max_value=1 << 40)),
        "content_type": draw(_opt(text)),
        "meta": draw(_meta_for(ft)),
        "payload": payload,
        "len": draw(_opt(uint)),
        "offset": draw(_opt(uint)),
        "eof": draw(_opt(st.booleans())),
        "cap": draw(_opt(text)),
        "stream_id": draw(_opt(text)),
        "media_urn": draw(_opt(text)),
        "routing_id": draw(_opt(ids)),
        "chunk_index": draw(_opt(uint)),
        "chunk_count": draw(_opt(uint)),
        "checksum": draw(_opt(uint)),
        "is_sequence": draw(_opt(st.booleans())),
        "force_kill": draw(_opt(st.booleans())),
        "credit": draw(_opt(uint)),
        "unbounded": draw(_opt(st.booleans())),
        "output": draw(_opt(text)) if ft is FrameType.STREAM_START else None,
    }
    if ft in (FrameType.STREAM_START, FrameType.CHUNK, FrameType.STREAM_END):
        fields["stream_id"] = draw(text)
    if ft is FrameType.STREAM_START:
        fields["media_urn"] = draw(text)
    if ft is FrameType.CHUNK:
        fields["chunk_index"] = draw(uint)
        fields["checksum"] = checksum(payload or b"")
    if ft is FrameType.CREDIT:
        fields["credit"] = draw(uint)
    return Frame(**fields)


@FAST
@given(frame=valid_frames(), cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=4))
def test_round_trip(frame: Frame, cuts: list[int]) -> None:
    raw = encode_frame(frame)
    assert decode_frame(raw) == frame
    assert encode_frame(decode_frame(raw)) == raw
    dec = FrameDecoder()
    pos = 0
    for c in sorted(c % (len(raw) + 1) for c in cuts):
        if c > pos:  # feed(b"") would mean end of stream
            dec.feed(raw[pos:c])
            pos = c
        if pos < len(raw):
            assert dec.next_frame() is None
    if pos < len(raw):
        dec.feed(raw[pos:])
    assert dec.frames() == [frame]


@FAST
@given(frame=valid_frames())
def test_big_payload_round_trip(frame: Frame) -> None:
    """The copy-once encoding path (payload >= 4 KiB) agrees with the small path."""
    payload = bytes(range(256)) * 20
    if frame.frame_type is FrameType.CHUNK:
        frame = frame.replace(payload=payload, checksum=checksum(payload))
    else:
        frame = frame.replace(payload=payload)
    assert decode_frame(encode_frame(frame)) == frame


def _feed_all(data: bytes, cuts: list[int], max_frame: int) -> None:
    """Feed ``data`` in pieces and drain; only ProtocolError may come out."""
    dec = FrameDecoder(max_frame=max_frame)
    pos = 0
    try:
        for c in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
            if c > pos:
                dec.feed(data[pos:c])
                pos = c
            for _ in range(len(data) + 1):  # bounded: each frame consumes >= 4 bytes
                if dec.next_frame() is None:
                    break
        dec.feed(b"")
        for _ in range(len(data) + 1):
            if dec.next_frame() is None:
                break
        assert dec.at_frame_boundary
    except ProtocolError:
        pass


@FAST
@given(
    data=st.binary(max_size=600),
    cuts=st.lists(st.integers(min_value=0, max_value=1 << 12), max_size=6),
    max_frame=st.sampled_from([16, 300, 3_670_016, 1 << 40]),
)
def test_arbitrary_bytes_raise_only_protocol_errors(
    data: bytes, cuts: list[int], max_frame: int
) -> None:
    _feed_all(data, cuts, max_frame)
    with contextlib.suppress(ProtocolError):
        decode_body(data)


def _cbor_heads() -> st.SearchStrategy[bytes]:
    """Byte soup biased towards CBOR structure: map/array/tag heads and the frame keys."""
    return st.lists(
        st.one_of(
            st.sampled_from(
                [
                    b"\xa4",
                    b"\xa9",
                    b"\x00\x06",
                    b"\x01\x04",
                    b"\x02\x50",
                    b"\x03\x00",
                    b"\x05\xa1",
                    b"\xd8\x1e",
                    b"\xc1",
                    b"\xd9\x01\x02",
                    b"\x9f",
                    b"\xbf",
                    b"\xff",
                    b"\x5f",
                    b"\x7f",
                    b"\xfb",
                    b"\xf9\x7e\x00",
                    b"\x1b",
                ]
            ),
            st.binary(max_size=8),
        ),
        max_size=40,
    ).map(b"".join)


@FAST
@given(body=_cbor_heads(), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=4))
def test_cbor_shaped_garbage(body: bytes, cuts: list[int]) -> None:
    raw = len(body).to_bytes(4, "big") + body
    _feed_all(raw + raw, cuts, 3_670_016)


VECTOR_RAWS = [vf.raw for vf in all_frames() if vf.raw is not None and len(vf.raw) < 4096]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    raw = bytearray(draw(st.sampled_from(VECTOR_RAWS)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "prefix"]))
        i = draw(st.integers(min_value=0, max_value=max(0, len(raw) - 1)))
        if op == "flip" and raw:
            raw[i] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif op == "set" and raw:
            raw[i] = draw(st.integers(min_value=0, max_value=255))
        elif op == "insert":
            raw[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete" and raw:
            del raw[i : i + draw(st.integers(min_value=1, max_value=4))]
        elif op == "truncate":
            del raw[i:]
        elif op == "prefix" and len(raw) >= 4:
            raw[0:4] = draw(st.integers(min_value=0, max_value=(1 << 32) - 1)).to_bytes(4, "big")
    return bytes(raw)


@FAST
@given(
    data=st.lists(mutated(), min_size=1, max_size=3).map(b"".join),
    cuts=st.lists(st.integers(min_value=0, max_value=8192), max_size=6),
)
def test_mutated_vector_frames(data: bytes, cuts: list[int]) -> None:
    _feed_all(data, cuts, 3_670_016)


@FAST
@given(raw=mutated())
def test_mutated_frames_decode_or_raise_protocol_error(raw: bytes) -> None:
    try:
        frame = decode_frame(raw)
    except ProtocolError:
        return
    # Whatever is accepted re-encodes to something that decodes to the same frame.
    assert decode_frame(encode_frame(frame)) == frame
