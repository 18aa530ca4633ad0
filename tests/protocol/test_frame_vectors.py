"""Every recorded frame vector decodes, validates and re-encodes byte-identically (FRM-*),
agrees field by field with the vector's ``decoded`` view, and comes out of
:class:`FrameDecoder` unchanged however the byte stream is cut.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from _frame_vectors import (
    MISSING,
    VectorFrame,
    bstr_head_len,
    cbor_item,
    decoded_to_frame,
    direction_streams,
    file_id,
    frame_to_decoded,
    load,
    to_json,
    vector_files,
)

from cartridge_runtime.protocol import (
    PREFIX_LEN,
    ChecksumMismatchError,
    Frame,
    FrameDecoder,
    FrameType,
    decode_frame,
    encode_body,
    encode_frame,
    validate_frame,
    verify_chunk,
)

FILES = vector_files()
IDS = [file_id(p) for p in FILES]

#: Split-at-every-offset is done for frames below this size (keeps the suite fast).
SPLIT_LIMIT = 4096
#: Byte-by-byte feeding is done for directions whose total stays below this size.
BYTEWISE_LIMIT = 64 * 1024


def test_vector_inventory() -> None:
    """The suite really sees all 22 files, including engine-link/, and every frame in them."""
    assert len(FILES) == 22
    assert any(i.startswith("engine-link/") for i in IDS)
    frames = [vf for p in FILES for vf in load(p)]
    assert len(frames) == 677
    assert sum(1 for vf in frames if not vf.truncated) == 668


def _check_decoded(vf: VectorFrame, frame: Frame) -> None:
    ours = frame_to_decoded(frame)
    assert ours == vf.decoded, f"{vf.file}:{vf.line} decoded view differs"
    assert FrameType(vf.decoded["1"]).name == vf.type == frame.frame_type.name


def _check_payload_cbor(vf: VectorFrame, frame: Frame) -> None:
    if frame.frame_type is not FrameType.CHUNK:
        assert vf.payload_cbor is MISSING
        return
    if vf.payload_cbor is MISSING:
        return  # sequence fragment or undecodable payload (15-raw-write)
    item = cbor_item(frame.payload or b"")
    assert item is not MISSING, f"{vf.file}:{vf.line} payload is not one CBOR item"
    assert to_json(item) == vf.payload_cbor


#: Vector 14 sends one CHUNK with a deliberately wrong checksum (the host's "bad checksum" probe).
BAD_CHECKSUM_FILES = {"14-protocol-errors.jsonl": 1}


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_every_frame_round_trips(path: Path) -> None:
    """Decode, validate, re-encode byte-identically; decoded view and CHUNK checksums agree."""
    bad = 0
    for vf in load(path):
        assert vf.frame_len >= PREFIX_LEN
        head = bytes.fromhex(vf.hex)
        assert int.from_bytes(head[:PREFIX_LEN], "big") == vf.frame_len - PREFIX_LEN
        if not vf.truncated:
            assert len(head) == vf.frame_len
            assert vf.raw is not None
            frame = decode_frame(vf.raw)
            validate_frame(frame)
            assert encode_frame(frame) == vf.raw, f"{vf.file}:{vf.line} re-encoding differs"
            _check_decoded(vf, frame)
            _check_payload_cbor(vf, frame)
        else:
            assert vf.sha256 is not None and len(head) == 256
            frame = _check_truncated(vf)
        if frame.frame_type is FrameType.CHUNK and vf.raw is not None:
            try:
                verify_chunk(frame)
            except ChecksumMismatchError:
                assert vf.dir == "host->cartridge" and vf.phase == "scenario"
                bad += 1
    assert bad == BAD_CHECKSUM_FILES.get(file_id(path), 0)


def _check_truncated(vf: VectorFrame) -> Frame:
    """What a 256-byte head can prove: the encoding of the fields up to the payload, and, when
    the payload could be rebuilt, the whole frame's sha256 and a full round trip."""
    if vf.raw is not None:
        assert hashlib.sha256(vf.raw).hexdigest() == vf.sha256
        frame = decode_frame(vf.raw)
        assert encode_frame(frame) == vf.raw
        _check_decoded(vf, frame)
        _check_payload_cbor(vf, frame)
        return frame
    # Payload unknown: rebuild the frame with the visible payload head and compare the bytes
    # the stored head covers (prefix, keys, payload header, first 64 payload bytes).
    cut = vf.decoded["6"]
    visible = bytes.fromhex(cut[:-3])
    body_empty = encode_body(decoded_to_frame(vf.decoded, b""))
    n = next(
        n
        for hl in (2, 3, 5)
        if bstr_head_len(n := vf.frame_len - PREFIX_LEN - (len(body_empty) - 1) - hl) == hl
    )
    frame = decoded_to_frame(vf.decoded, visible + bytes(n - len(visible)))
    raw = encode_frame(frame)
    assert len(raw) == vf.frame_len
    payload_at = raw.index(visible, PREFIX_LEN)
    covered = min(256, payload_at + len(visible))
    assert raw[:covered] == bytes.fromhex(vf.hex)[:covered]
    return frame


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_decoder_whole_bytewise_and_split(path: Path) -> None:
    """Each direction of a session fed to FrameDecoder whole, byte by byte (small files), and
    split at every offset of every frame under 4 KiB: the same frames come out."""
    for direction, vfs in direction_streams(path).items():
        raws = [vf.raw for vf in vfs]
        assert all(r is not None for r in raws)
        stream = b"".join(r for r in raws if r is not None)
        expected = [decode_frame(r) for r in raws if r is not None]

        dec = FrameDecoder()
        dec.feed(stream)
        assert dec.frames() == expected, direction
        dec.feed(b"")
        assert dec.next_frame() is None and dec.at_frame_boundary and dec.buffered == 0

        if len(stream) <= BYTEWISE_LIMIT:
            dec = FrameDecoder()
            got: list[Frame] = []
            mv = memoryview(stream)
            for i in range(len(stream)):
                dec.feed(mv[i : i + 1])
                got += dec.frames()
            assert got == expected, direction

        for raw, frame in zip(raws, expected, strict=True):
            assert raw is not None
            if len(raw) >= SPLIT_LIMIT:
                continue
            for cut in range(1, len(raw)):
                dec = FrameDecoder()
                dec.feed(raw[:cut])
                assert dec.next_frame() is None
                assert not dec.at_frame_boundary
                dec.feed(raw[cut:])
                assert dec.next_frame() == frame
                assert dec.next_frame() is None and dec.buffered == 0


def _feed_through_one_buffer(stream: bytes, step: int) -> list[Frame]:
    """Feed ``stream`` with feed_borrowed through one reused buffer, ``step`` bytes at a time,
    taking every frame after each feed and then scribbling over the buffer: a decoder that
    still looked at it would decode garbage."""
    dec = FrameDecoder()
    buf = bytearray(step)
    view = memoryview(buf)
    got: list[Frame] = []
    for pos in range(0, len(stream), step):
        piece = stream[pos : pos + step]
        buf[: len(piece)] = piece
        dec.feed_borrowed(view[: len(piece)])
        got += dec.frames()
        buf[:] = b"\xff" * step
    dec.feed(b"")
    assert dec.next_frame() is None and dec.buffered == 0
    return got


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_decoder_borrowed_buffer_reused_after_each_drain(path: Path) -> None:
    """feed_borrowed parses a reused read buffer in place and lets go of it once drained: whole
    streams fed through buffers of several sizes (frames cut anywhere) give the same frames."""
    for direction, vfs in direction_streams(path).items():
        raws = [vf.raw for vf in vfs if vf.raw is not None]
        stream = b"".join(raws)
        expected = [decode_frame(r) for r in raws]
        for step in {1, 3, 5, 64, 4097, max(1, len(stream) // 3), len(stream)}:
            if step == 1 and len(stream) > BYTEWISE_LIMIT:
                continue
            assert _feed_through_one_buffer(stream, step) == expected, (direction, step)


def test_large_frames_split_at_sampled_offsets() -> None:
    """Frames over 4 KiB (including the rebuilt 256 KiB CHUNKs) split at a spread of offsets."""
    big = [
        vf for vf in (vf for p in FILES for vf in load(p)) if vf.raw and len(vf.raw) >= SPLIT_LIMIT
    ]
    assert any(vf.truncated for vf in big)
    for vf in big:
        raw = vf.raw
        assert raw is not None
        frame = decode_frame(raw)
        cuts = {1, 2, 3, 4, 5, len(raw) // 2, len(raw) - 1, *range(7, len(raw), len(raw) // 7 + 1)}
        for cut in sorted(cuts):
            dec = FrameDecoder()
            dec.feed(raw[:cut])
            assert dec.next_frame() is None
            assert dec.bytes_wanted == (PREFIX_LEN - cut if cut < PREFIX_LEN else len(raw) - cut)
            dec.feed(raw[cut:])
            assert dec.next_frame() == frame


def test_hello_meta_json_matches_decoded() -> None:
    """Manifest and pools are JSON byte strings; ours parse to the vector's decoded value and
    the raw bytes are kept exactly (spacing included)."""
    seen = 0
    for p in FILES:
        for vf in load(p):
            if vf.type != "HELLO" or vf.raw is None or vf.dir != "cartridge->host":
                continue
            frame = decode_frame(vf.raw)
            assert frame.meta is not None
            for key in ("manifest", "pools"):
                raw_json = frame.meta[key]
                assert isinstance(raw_json, bytes)
                assert json.loads(raw_json) == vf.decoded["5"][key]
                assert raw_json in vf.raw
            seen += 1
    assert seen >= 20
