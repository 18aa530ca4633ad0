"""Codec agreement with the reference: a null output name (key 21) is refused
as capdag refuses it, null stream id / media URN (keys 11, 12) read as absent as capdag reads
them, an encoded frame over the limit is a FrameTooLargeError like a decoded one, and a
successful END carries the keys capdag writes."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import cbor2
import pytest

from cartridge_runtime.protocol import (
    FrameDecodeError,
    FrameEncodeError,
    FrameTooLargeError,
    FrameTooLargeToSendError,
    MessageId,
    ProtocolError,
    decode_frame,
    encode_frame,
    frames,
)

RID = uuid.uuid4().bytes


def _wire(extra: dict[int, Any], frame_type: int = 8) -> bytes:
    m: dict[int, Any] = {0: 2, 1: frame_type, 2: RID, 3: 0}
    m.update(extra)
    body = cbor2.dumps(m)
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize("frame_type", [8, 3, 9])  # STREAM_START, CHUNK, STREAM_END
def test_a_null_output_name_is_refused(frame_type: int) -> None:
    with pytest.raises(FrameDecodeError) as info:
        decode_frame(_wire({11: "s", 12: "media:", 21: None}, frame_type))
    assert "key 21" in str(info.value)


def test_null_stream_id_and_media_urn_read_as_absent() -> None:
    for extra, key in (({11: None, 12: "media:"}, "11"), ({11: "s", 12: None}, "12")):
        with pytest.raises(FrameDecodeError) as null_info:
            decode_frame(_wire(extra))
        absent = {k: v for k, v in extra.items() if v is not None}
        with pytest.raises(FrameDecodeError) as absent_info:
            decode_frame(_wire(absent))
        assert str(null_info.value) == str(absent_info.value)
        assert f"key {key}" in str(null_info.value)


def test_encoding_over_the_limit_is_a_frame_too_large_error() -> None:
    frame = frames.log(MessageId.new(), "info", "x" * 2000)
    with pytest.raises(FrameTooLargeError) as info:
        encode_frame(frame, max_frame=1000)
    assert isinstance(info.value, FrameTooLargeToSendError)
    assert isinstance(info.value, FrameEncodeError) and isinstance(info.value, ProtocolError)
    wire = encode_frame(frame)
    with pytest.raises(FrameTooLargeError):
        decode_frame(wire, max_frame=1000)  # the same frame, decoded: the same class
    big = frames.chunk(MessageId.new(), "s", 0, b"\0" * 300_000)
    with pytest.raises(FrameTooLargeError):
        encode_frame(big, max_frame=262_144)


@pytest.mark.interop
def test_the_reference_reads_null_keys_alike() -> None:
    io = pytest.importorskip("capdag.bifaci.io")
    m = {0: 2, 1: 8, 2: RID, 3: 0, 11: "s", 12: "media:", 21: None}
    with pytest.raises(Exception, match="key 21"):
        io.decode_frame(cbor2.dumps(m))
    m = {0: 2, 1: 8, 2: RID, 3: 0, 11: None, 12: "media:"}
    assert io.decode_frame(cbor2.dumps(m)).stream_id is None  # null is absent there too


@pytest.mark.interop
@pytest.mark.parametrize(("progress", "message"), [(None, None), (0.5, "half"), (1.0, None)])
def test_a_successful_end_carries_the_keys_the_reference_writes(
    progress: float | None, message: str | None
) -> None:
    ref_frame = pytest.importorskip("capdag.bifaci.frame")
    io = pytest.importorskip("capdag.bifaci.io")
    rid = MessageId.new()
    theirs = ref_frame.Frame.end_ok_with(
        ref_frame.MessageId(rid.value),
        None,
        1.0 if progress is None else progress,  # the reference's runtime defaults to 1.0
        message,
    )
    ours = frames.end(rid, progress=1.0 if progress is None else progress, message=message)
    their_map = cbor2.loads(io.encode_frame(theirs))
    our_map = cbor2.loads(encode_frame(ours)[4:])
    assert sorted(our_map) == sorted(their_map)
    assert our_map[5] == their_map[5]  # meta: exit_code, progress[, message]
    assert our_map[9] is True and their_map[9] is True
