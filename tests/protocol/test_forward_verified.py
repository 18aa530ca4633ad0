"""Forwarding a verified chunk: the same payload, the checksum it arrived with, no second hash.

A machine passes a value from one call's output to the next call's input. A CHUNK whose
checksum the engine verified on the way in (``StreamData.wire``) can go out again as the same
payload with the same checksum (``OutgoingStream.write_verified``), but only when the outgoing
stream would write exactly that payload; otherwise it is written, and hashed, as any bytes are.
"""

from __future__ import annotations

import os

import pytest

from cartridge_runtime import protocol as P
from cartridge_runtime.protocol import MessageId, checksum, encode_frame
from cartridge_runtime.protocol._payload import bstr_head


def _stream(max_chunk: int = 1 << 18) -> P.OutgoingStream:
    return P.OutgoingStream(
        MessageId.new(), "arg-0", "media:", max_chunk=max_chunk, initial_credit=16, coalesce=False
    )


def _chunks(frames: list[P.Frame]) -> list[P.Frame]:
    return [f for f in frames if f.frame_type is P.FrameType.CHUNK]


@pytest.mark.parametrize("size", [1, 23, 24, 255, 256, 65535, 65536, 1 << 18])
def test_a_verified_chunk_goes_out_as_written_bytes_would(size: int) -> None:
    data = os.urandom(size)
    payload = bstr_head(size) + data
    plain, forwarded = _stream(), _stream()
    plain.rid = forwarded.rid  # the same request, to compare the encodings
    expected = _chunks(plain.write_bytes(data))
    got = _chunks(forwarded.write_verified(data, checksum(payload), len(payload)))
    assert len(got) == len(expected) == 1
    assert encode_frame(got[0]) == encode_frame(expected[0])


def test_the_given_checksum_is_used_without_hashing_again() -> None:
    data = b"x" * 1000
    payload = bstr_head(len(data)) + data
    (frame,) = _chunks(_stream().write_verified(data, 12345, len(payload)))
    assert frame.checksum == 12345 and frame.payload == payload


@pytest.mark.parametrize(
    "case",
    ["other size", "too big for this stream", "not bytes", "coalesced bytes pending", "empty"],
)
def test_otherwise_the_bytes_are_written_and_hashed(case: str) -> None:
    data = os.urandom(5000)
    size = len(bstr_head(len(data))) + len(data)
    stream = _stream(max_chunk=4096 if case == "too big for this stream" else 1 << 18)
    if case == "other size":
        size += 2  # the sender used a longer head: not the payload this stream writes
    if case == "not bytes":
        data = bytearray(data)  # type: ignore[assignment]
    if case == "coalesced bytes pending":
        stream = P.OutgoingStream(
            MessageId.new(), "arg-0", "media:", max_chunk=1 << 18, initial_credit=16
        )
        stream.write_bytes(b"ab")
    if case == "empty":
        data, size = b"", 1
    frames = _chunks(stream.write_verified(bytes(data) if case != "not bytes" else data, 99, size))
    for frame in frames:
        assert frame.checksum == checksum(frame.payload or b"")


def test_a_received_chunk_carries_its_wire_checksum_when_it_was_verified() -> None:
    rid = MessageId.new()
    out = P.OutgoingStream(rid, "s", "media:", max_chunk=1 << 18, initial_credit=16, coalesce=False)
    frames = out.start() + out.write_bytes(b"hello") + out.close()
    for verify in (True, False):
        receiver = P.BodyReceiver(rid, initial_credit=16, expect_req=False, verify_checksums=verify)
        events = [e for f in frames for e in receiver.receive(f)]
        (data,) = [e for e in events if isinstance(e, P.StreamData)]
        chunk = _chunks(frames)[0]
        expected = (chunk.checksum, len(chunk.payload or b"")) if verify else None
        assert data.value == b"hello" and data.wire == expected
