"""Unit tests of the codec: every decode error path, the incremental decoder, encode limits
and ids (FRM-*, TYP-*). Limits, seq and the handshake are in test_handshake.py."""

from __future__ import annotations

from typing import Any

import cbor2
import pytest
from _raw_frames import ERR_META, LOG_META, RID, RID_HEX, accepts, base, rejects, wire

from cartridge_runtime.protocol import (
    DEFAULT_LIMITS,
    HARD_FRAME_CAP,
    PREFIX_LEN,
    ZERO_ID,
    Frame,
    FrameDecodeError,
    FrameDecoder,
    FrameEncodeError,
    FrameTooLargeError,
    FrameType,
    LocalProtocolError,
    MessageId,
    ProtocolError,
    RemoteProtocolError,
    checksum,
    decode_body,
    decode_frame,
    encode_body,
    encode_frame,
    encode_frame_parts,
    frames,
)

# --------------------------------------------------------------------------- decode errors


class TestRequiredKeys:
    def test_missing_version(self) -> None:
        m = base(4)
        del m[0]
        rejects(m, "version")

    def test_missing_frame_type(self) -> None:
        m = base(4)
        del m[1]
        rejects(m, "frame type")

    def test_missing_id(self) -> None:
        m = base(4)
        del m[2]
        rejects(m, "id")

    @pytest.mark.parametrize("ft", [2, 16, 255, 1 << 40])
    def test_retired_and_unknown_frame_types(self, ft: int) -> None:
        rejects(base(ft), "frame type")

    @pytest.mark.parametrize("ft", [True, "4", 4.0, None, -1])
    def test_frame_type_wrong_type(self, ft: Any) -> None:
        rejects(base(4) | {1: ft})

    def test_version_value_is_not_checked(self) -> None:
        assert accepts(base(4) | {0: 99}).version == 99

    def test_version_must_be_int(self) -> None:
        rejects(base(4) | {0: "6"}, "version")

    def test_missing_seq_means_zero(self) -> None:
        m = base(4)
        del m[3]
        assert accepts(m).seq == 0

    @pytest.mark.parametrize("seq", [-1, "1", 1.0, True])
    def test_bad_seq(self, seq: Any) -> None:
        rejects(base(4) | {3: seq}, "seq")


class TestIds:
    @pytest.mark.parametrize(
        "bad", [b"", b"x" * 15, b"x" * 17, -1, True, False, "id", 1.5, [1], None]
    )
    def test_bad_id(self, bad: Any) -> None:
        rejects(base(4) | {2: bad}, "id")

    @pytest.mark.parametrize("bad", [b"x" * 15, b"x" * 17, -5, True, "1", 2.0, {}])
    def test_bad_xid(self, bad: Any) -> None:
        rejects(base(4) | {13: bad}, "routing id")

    def test_uuid_and_uint_ids(self) -> None:
        assert accepts(base(4)).id == RID
        assert accepts(base(4) | {2: 0}).id == ZERO_ID
        big = accepts(base(4) | {2: (1 << 64) - 1, 13: 7})
        assert big.id == MessageId((1 << 64) - 1) and big.routing_id == MessageId(7)
        assert accepts(base(4) | {13: RID_HEX}).xid == RID


class TestKey21:
    def test_output_only_on_stream_start(self) -> None:
        ss = base(8, k11="s", k12="media:", k21="media:x")
        assert accepts(ss).output == "media:x"
        for ft, extra in [
            (3, {11: "s", 14: 0, 16: 0, 6: b""}),
            (9, {11: "s", 15: 0}),
            (4, {}),
            (1, {10: "cap:x"}),
        ]:
            rejects(base(ft) | extra | {21: "media:x"}, "STREAM_START")

    @pytest.mark.parametrize("bad", [b"media:", 1, True, None, ["x"]])
    def test_output_must_be_text(self, bad: Any) -> None:
        m = base(8, k11="s", k12="media:") | {21: bad}
        rejects(m, "key 21")  # null too: the reference refuses it


class TestPerType:
    def test_chunk_requires_index_and_checksum(self) -> None:
        ok = base(3, k11="s", k14=0, k16=checksum(b"\x40"), k6=b"\x40")
        accepts(ok)
        for key in (14, 16):
            m = dict(ok)
            del m[key]
            rejects(m, f"key {key}")

    @pytest.mark.parametrize("bad", [-1, 1 << 64, "1", 1.0, True])
    def test_chunk_checksum_must_be_uint64(self, bad: Any) -> None:
        rejects(base(3, k11="s", k14=0, k16=bad), "checksum")

    def test_credit_requires_credit(self) -> None:
        ok = base(13, k19=16, k5={"credit_dir": "request"})
        assert accepts(ok).credit == 16
        m = dict(ok)
        del m[19]
        rejects(m, "key 19")
        rejects(ok | {19: "16"}, "credit")
        rejects(ok | {19: -1}, "credit")

    def test_stream_start_and_end_require_stream_id(self) -> None:
        rejects(base(8, k12="media:"), "key 11")
        rejects(base(8, k11="s"), "key 12")
        rejects(base(9, k15=0), "key 11")
        assert accepts(base(9, k11="s")).chunk_count is None  # unbounded

    @pytest.mark.parametrize(
        ("key", "bad"),
        [
            (4, 1),
            (7, -1),
            (8, "0"),
            (9, 1),
            (10, b"cap"),
            (11, 5),
            (12, 1),
            (14, -1),
            (15, True),
            (17, 1),
            (18, "no"),
            (20, 0),
        ],
    )
    def test_mistyped_optional_keys(self, key: int, bad: Any) -> None:
        rejects(base(4) | {key: bad}, f"key {key}")

    def test_payload_must_be_bytes(self) -> None:
        rejects(base(4) | {6: "text"}, "payload")

    @pytest.mark.parametrize("meta", [[1], "m", 1, {1: "x"}, {b"k": 1}])
    def test_meta_must_be_text_keyed_map(self, meta: Any) -> None:
        rejects(base(7) | {5: meta}, "meta")

    def test_hello_requires_meta(self) -> None:
        rejects(base(0) | {2: 0}, "meta")


class TestPolicy:
    @pytest.mark.parametrize("word", ["offline", "no_telemetry", "full"])
    def test_words(self, word: str) -> None:
        assert accepts(base(15) | {2: 0, 5: {"network": word}}).meta == {"network": word}

    @pytest.mark.parametrize("word", ["Offline", "online", "", 1, None, [1], {"a": 1}, b"full"])
    def test_unknown_word(self, word: Any) -> None:
        rejects(base(15) | {2: 0, 5: {"network": word}}, "POLICY")

    def test_missing_meta(self) -> None:
        rejects(base(15) | {2: 0}, "meta")
        rejects(base(15) | {2: 0, 5: {}}, "POLICY")


class TestErrMeta:
    def test_valid(self) -> None:
        f = accepts(base(6, k5=ERR_META | {"arg_urn": "media:x"}))
        assert f.meta is not None and f.meta["code"] == "X"

    def test_missing_meta(self) -> None:
        rejects(base(6), "meta")

    @pytest.mark.parametrize("code", [None, "", 1, b"X"])
    def test_bad_code(self, code: Any) -> None:
        meta = dict(ERR_META)
        if code is None:
            del meta["code"]
        else:
            meta["code"] = code
        rejects(base(6, k5=meta), "code")

    @pytest.mark.parametrize("cls", [None, "", "Input", "system", 1, [1], {"x": 1}])
    def test_bad_attribution(self, cls: Any) -> None:
        meta = dict(ERR_META)
        if cls is None:
            del meta["attribution_class"]
        else:
            meta["attribution_class"] = cls
        rejects(base(6, k5=meta), "attribution_class")

    @pytest.mark.parametrize("cls", ["input", "user", "resource", "environment", "internal"])
    def test_every_class(self, cls: str) -> None:
        accepts(base(6, k5=ERR_META | {"attribution_class": cls}))

    def test_empty_arg_urn(self) -> None:
        rejects(base(6, k5=ERR_META | {"arg_urn": ""}), "arg_urn")
        rejects(base(6, k5=ERR_META | {"arg_urn": 1}), "arg_urn")

    def test_message_must_be_text(self) -> None:
        rejects(base(6, k5=ERR_META | {"message": 1}), "message")


class TestLogMeta:
    def test_valid_plain_and_progress(self) -> None:
        accepts(base(5, k5=LOG_META | {"arg_urn": "media:x"}))
        accepts(base(5, k5={"level": "progress", "message": "", "progress": 0.5}))
        accepts(base(5, k5={"level": "progress", "message": "", "progress": 1}))

    def test_plain_log_needs_attribution(self) -> None:
        meta = dict(LOG_META)
        del meta["attribution_class"]
        rejects(base(5, k5=meta), "attribution_class")
        rejects(base(5, k5=LOG_META | {"attribution_class": "bogus"}), "attribution_class")

    def test_progress_log_needs_numeric_progress(self) -> None:
        rejects(base(5, k5={"level": "progress", "message": ""}), "progress")
        rejects(base(5, k5={"level": "progress", "message": "", "progress": "0.5"}), "progress")
        rejects(base(5, k5={"level": "progress", "message": "", "progress": True}), "progress")

    def test_progress_log_needs_no_attribution(self) -> None:
        f = accepts(base(5, k5={"level": "progress", "message": "", "progress": 0.25}))
        assert f.meta is not None and "attribution_class" not in f.meta

    @pytest.mark.parametrize("level", [None, "", 1])
    def test_bad_level(self, level: Any) -> None:
        meta = dict(LOG_META)
        if level is None:
            del meta["level"]
        else:
            meta["level"] = level
        rejects(base(5, k5=meta), "level")

    def test_missing_meta_and_empty_arg_urn(self) -> None:
        rejects(base(5), "meta")
        rejects(base(5, k5=LOG_META | {"arg_urn": ""}), "arg_urn")


class TestEndAndCancelMeta:
    def test_end(self) -> None:
        accepts(base(4, k5={"exit_code": 0, "progress": 1.0, "message": "ok"}, k9=True))
        rejects(base(4, k5={"exit_code": "0"}), "exit_code")
        rejects(base(4, k5={"progress": "1"}), "progress")
        rejects(base(4, k5={"message": 1}), "message")

    def test_cancel(self) -> None:
        accepts(base(12, k18=False))
        accepts(
            base(
                12,
                k18=True,
                k5={"code": "ABORTED", "attribution_class": "resource", "message": "d"},
            )
        )
        rejects(base(12, k18=False, k5={"code": ""}), "code")
        rejects(base(12, k18=False, k5={"attribution_class": "nope"}), "attribution_class")


class TestBodyShape:
    @pytest.mark.parametrize("value", [[0, 4, RID_HEX], 4, "frame", b"\x00", None, 1.5])
    def test_non_map_body(self, value: Any) -> None:
        rejects(value, "map")

    def test_unknown_int_keys_and_non_int_keys_are_ignored(self) -> None:
        f = accepts(base(4) | {22: "x", 99: [1, 2], 1 << 70: 0, "1": 6, b"k": 1, 2.5: 1})
        assert f == accepts(base(4))

    def test_non_int_keys_do_not_alias_int_keys(self) -> None:
        """1.0 and True hash like 1 in Python; they are not key 1 on the wire."""
        m = base(4)
        del m[1]
        rejects(m | {1.0: 4}, "frame type")
        rejects(m | {True: 4}, "frame type")
        m = base(4)
        del m[0]
        rejects(m | {False: 6}, "version")

    def test_trailing_garbage(self) -> None:
        body = cbor2.dumps(base(4))
        for extra in (b"\x00", b"\xff", b"\xa0", cbor2.dumps(base(4))):
            data = body + extra
            with pytest.raises(FrameDecodeError, match="trailing"):
                decode_frame(len(data).to_bytes(4, "big") + data)
            with pytest.raises(FrameDecodeError, match="trailing"):
                decode_body(data)

    @pytest.mark.parametrize("cut", [1, 5, 10, 20])
    def test_truncated_body(self, cut: int) -> None:
        body = cbor2.dumps(base(4, k5={"exit_code": 0}))[:cut]
        with pytest.raises(FrameDecodeError):
            decode_body(body)
        with pytest.raises(FrameDecodeError):
            decode_frame(len(body).to_bytes(4, "big") + body)

    def test_prefix_mismatch_and_short_input(self) -> None:
        raw = wire(base(4))
        with pytest.raises(FrameDecodeError, match="prefix"):
            decode_frame(raw[:3])
        with pytest.raises(FrameDecodeError, match="follow"):
            decode_frame(raw[:-1])
        with pytest.raises(FrameDecodeError, match="follow"):
            decode_frame(raw + b"\x00")

    @pytest.mark.parametrize(
        "body",
        [
            b"\xff",
            b"\x1c",
            b"\xa1\x00",
            b"\x7f\x61",
            b"\x62\xff\xfe",
            b"\xd8\x1e\x82\x01\x00",
            b"\xc1\xfb\x7f\xf0\x00\x00\x00\x00\x00\x00",
            b"\x9f" * 1000,
            b"\x5b" + b"\xff" * 8,
        ],
    )
    def test_invalid_cbor(self, body: bytes) -> None:
        with pytest.raises(FrameDecodeError):
            decode_body(body)

    def test_decode_errors_are_remote(self) -> None:
        err = rejects(base(2))
        assert isinstance(err, RemoteProtocolError) and isinstance(err, ProtocolError)
        assert err.to_err_meta()["code"] == err.code


class TestDecodeFrameLimits:
    def test_oversize_prefix(self) -> None:
        raw = wire(base(4))
        with pytest.raises(FrameTooLargeError):
            decode_frame(raw, max_frame=len(raw) - PREFIX_LEN - 1)
        assert decode_frame(raw, max_frame=len(raw) - PREFIX_LEN).frame_type is FrameType.END
        with pytest.raises(FrameTooLargeError):
            decode_frame((HARD_FRAME_CAP + 1).to_bytes(4, "big"), max_frame=1 << 31)


# --------------------------------------------------------------------------- FrameDecoder


class TestFrameDecoder:
    def test_oversize_prefix_rejected_before_body_is_buffered(self) -> None:
        dec = FrameDecoder()
        with pytest.raises(FrameTooLargeError):  # raised by feed itself, at the prefix
            dec.feed((1 << 31).to_bytes(4, "big"))
        assert dec.buffered == PREFIX_LEN
        with pytest.raises(FrameTooLargeError):
            dec.next_frame()

    def test_oversize_prefix_with_body_in_same_feed(self) -> None:
        dec = FrameDecoder()
        with pytest.raises(FrameTooLargeError):
            dec.feed((1 << 31).to_bytes(4, "big") + bytes(1 << 20))
        assert dec.buffered <= PREFIX_LEN
        with pytest.raises(FrameTooLargeError):
            dec.bytes_wanted  # noqa: B018  (a hostile prefix must never size a read)
        with pytest.raises(FrameTooLargeError):
            dec.feed(b"\x00")
        with pytest.raises(FrameTooLargeError):
            dec.next_frame()

    def test_oversize_second_frame_in_one_feed(self) -> None:
        good = wire(base(4))
        dec = FrameDecoder()
        with pytest.raises(FrameTooLargeError):
            dec.feed(good + (1 << 30).to_bytes(4, "big") + bytes(100_000))
        assert dec.buffered <= len(good) + PREFIX_LEN

    def test_prefix_split_across_feeds(self) -> None:
        dec = FrameDecoder()
        dec.feed(b"\x7f\xff")
        assert dec.bytes_wanted == 2
        with pytest.raises(FrameTooLargeError):
            dec.feed(b"\xff\xff")
        assert dec.buffered == PREFIX_LEN

    def test_hard_cap_even_with_larger_max_frame(self) -> None:
        dec = FrameDecoder(max_frame=1 << 30)
        assert dec.max_frame == HARD_FRAME_CAP
        dec.max_frame = 1 << 31
        assert dec.max_frame == HARD_FRAME_CAP
        dec.feed(HARD_FRAME_CAP.to_bytes(4, "big"))  # exactly the cap: allowed, waits for body
        assert dec.next_frame() is None
        assert dec.bytes_wanted == HARD_FRAME_CAP
        dec2 = FrameDecoder(max_frame=1 << 30)
        with pytest.raises(FrameTooLargeError):
            dec2.feed((HARD_FRAME_CAP + 1).to_bytes(4, "big"))

    def test_negotiated_max_frame_applies(self) -> None:
        raw = wire(base(4))
        dec = FrameDecoder(max_frame=len(raw) - PREFIX_LEN - 1)
        with pytest.raises(FrameTooLargeError):
            dec.feed(raw)

    def test_eof_mid_frame_and_mid_prefix(self) -> None:
        raw = wire(base(4))
        for cut in (1, 3, PREFIX_LEN, len(raw) - 1):
            dec = FrameDecoder()
            dec.feed(raw[:cut])
            assert dec.next_frame() is None
            dec.feed(b"")
            with pytest.raises(FrameDecodeError, match="ended inside"):
                dec.next_frame()
            with pytest.raises(FrameDecodeError):
                dec.next_frame()  # poisoned

    def test_clean_eof(self) -> None:
        dec = FrameDecoder()
        dec.feed(wire(base(4)))
        dec.feed(b"")
        assert dec.next_frame() is not None
        assert dec.next_frame() is None
        with pytest.raises(FrameDecodeError, match="after end"):
            dec.feed(b"\x00")

    def test_bad_body_poisons(self) -> None:
        dec = FrameDecoder()
        dec.feed(wire(base(2)) + wire(base(4)))
        with pytest.raises(FrameDecodeError):
            dec.next_frame()
        with pytest.raises(FrameDecodeError):
            dec.next_frame()
        with pytest.raises(FrameDecodeError):
            dec.feed(b"\x00")

    def test_frames_come_out_one_at_a_time(self) -> None:
        raws = [wire(base(4) | {3: i}) for i in range(5)]
        dec = FrameDecoder()
        dec.feed(b"".join(raws))
        for i in range(5):
            f = dec.next_frame()
            assert f is not None and f.seq == i
            assert dec.buffered == sum(map(len, raws[i + 1 :]))
        assert dec.next_frame() is None and dec.at_frame_boundary

    def test_body_shorter_than_its_map_is_not_read_into_the_next_frame(self) -> None:
        """A prefix that cuts the map short must fail even though the next frame's bytes follow
        (the in-place bytes buffer holds both)."""
        good = cbor2.dumps(base(4, k5={"exit_code": 0}))
        short = good[:-3]
        nxt = wire(base(4))
        for data in (
            len(short).to_bytes(4, "big") + short + nxt,
            len(good + b"\x00").to_bytes(4, "big") + good + b"\x00" + nxt,
        ):
            for kind in (bytes, bytearray):
                dec = FrameDecoder()
                dec.feed(kind(data))
                with pytest.raises(FrameDecodeError):
                    dec.next_frame()

    def test_in_place_bytes_buffer_then_more_data(self) -> None:
        raws = [wire(base(4) | {3: i}) for i in range(3)]
        data = b"".join(raws)
        dec = FrameDecoder()
        dec.feed(data[: len(raws[0]) + len(raws[1]) + 2])  # bytes: kept in place
        assert [f.seq for f in dec.frames()] == [0, 1]
        assert dec.buffered == 2 and not dec.at_frame_boundary
        assert dec.bytes_wanted == PREFIX_LEN - 2
        dec.feed(data[len(raws[0]) + len(raws[1]) + 2 :])  # switches to a bytearray
        assert [f.seq for f in dec.frames()] == [2]
        assert dec.buffered == 0 and dec.at_frame_boundary
        dec.feed(data)  # empty again: in place
        assert len(dec.frames()) == 3 and dec.buffered == 0

    def test_feed_accepts_memoryview_and_bytearray(self) -> None:
        raw = wire(base(4))
        dec = FrameDecoder()
        dec.feed(memoryview(raw)[:5])
        dec.feed(bytearray(raw[5:]))
        assert dec.next_frame() == decode_frame(raw)


# --------------------------------------------------------------------------- encoding


class TestEncode:
    def test_over_max_frame(self) -> None:
        f = frames.chunk(RID, "s", 0, bytes(5000))
        body_len = len(encode_body(f))
        assert len(encode_frame(f, max_frame=body_len)) == body_len + PREFIX_LEN
        with pytest.raises(FrameEncodeError, match="exceeds") as ei:
            encode_frame(f, max_frame=body_len - 1)
        assert isinstance(ei.value, LocalProtocolError)

    def test_over_hard_cap(self) -> None:
        f = frames.chunk(RID, "s", 0, bytes(HARD_FRAME_CAP))
        with pytest.raises(FrameEncodeError):
            encode_frame(f, max_frame=1 << 40)

    def test_unencodable_field(self) -> None:
        f = Frame(frame_type=FrameType.HEARTBEAT, id=RID, meta={"x": object()})
        with pytest.raises(FrameEncodeError):
            encode_frame(f)

    def test_big_payload_path_matches_plain_cbor(self) -> None:
        for n in (0, 23, 24, 255, 256, 4095, 4096, 65535, 65536, 300_000):
            f = frames.chunk(
                RID,
                "s",
                3,
                bytes(range(256)) * (n // 256) + bytes(n % 256),
                xid=MessageId(5),
                meta={"k": "v"},
            )
            body = encode_body(f)
            assert body == cbor2.dumps(cbor2.loads(body))
            assert decode_body(body) == f

    def test_round_trip_every_builder(self) -> None:
        built = [
            frames.hello(DEFAULT_LIMITS),
            frames.hello(DEFAULT_LIMITS, manifest=b"{}", pools=b"{}"),
            frames.req(RID, "cap:x", xid=MessageId(1), seq=0),
            frames.stream_start(
                RID,
                "s",
                "media:",
                is_sequence=True,
                unbounded=True,
                output="media:o",
                meta={"a": 1},
            ),
            frames.chunk(RID, "s", 0, b"\x41x"),
            frames.stream_end(RID, "s", 1),
            frames.stream_end(RID, "s", None),
            frames.end(RID, message="done", progress=0.5),
            frames.end(RID, response=False),
            frames.err(RID, "HANDLER_ERROR", "boom", "input", arg_urn="media:x"),
            frames.log(RID, "info", "hi", "internal"),
            frames.progress(RID, 0.25, "q"),
            frames.heartbeat(MessageId(7)),
            frames.cancel(
                RID, force_kill=True, code="ABORTED", attribution_class="resource", message="d"
            ),
            frames.cancel(RID),
            frames.credit(RID, 16, "request", stream_id="s"),
            frames.close_stream(RID, stream_id="s"),
            frames.policy("offline"),
        ]
        for f in built:
            assert decode_frame(encode_frame(f)) == f


# --------------------------------------------------------------------------- ids


class TestMessageId:
    def test_uuid_and_uint_never_equal(self) -> None:
        assert MessageId(0) != MessageId(bytes(16))
        assert MessageId(1) != MessageId((1).to_bytes(16, "big"))
        assert MessageId(5) == MessageId(5)
        assert MessageId(b"a" * 16) == MessageId(b"a" * 16)

    def test_hashing(self) -> None:
        ids = {MessageId(0), MessageId(bytes(16)), MessageId(0), MessageId(bytes(16)), MessageId(1)}
        assert len(ids) == 3
        d = {MessageId(7): "a"}
        assert d[MessageId(7)] == "a" and MessageId(b"\x07".rjust(16, b"\0")) not in d

    def test_new_is_uuid4(self) -> None:
        a, b = MessageId.new(), MessageId.new()
        assert a != b and a.is_uuid and not MessageId(3).is_uuid
        assert isinstance(a.value, bytes) and a.value[6] >> 4 == 4 and a.value[8] >> 6 == 2
        assert str(MessageId(3)) == "3" and len(str(a)) == 36

    def test_flow_key_distinguishes_xid(self) -> None:
        f = frames.end(RID)
        assert f.flow_key != f.replace(routing_id=MessageId(1)).flow_key


# -- encode_frame_parts: the writev form --------------------------------------------------


@pytest.mark.parametrize("size", [0, 10, 4095, 4096, 70_000, 262_144])
def test_frame_parts_join_to_the_encoded_frame(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    rid = MessageId.new()
    frame = frames.chunk(rid, "s-1", 3, payload, xid=MessageId.new())
    parts = encode_frame_parts(frame, seq=5)
    assert b"".join(parts) == encode_frame(frame, seq=5)
    if size >= 4096:
        # The payload travels as the frame's own object: not copied into a joined frame.
        assert any(part is frame.payload for part in parts)
    else:
        assert len(parts) == 1


def test_frame_parts_refuse_a_frame_over_max_frame() -> None:
    payload = bytes(100_000)
    frame = frames.chunk(MessageId.new(), "s", 0, payload)
    with pytest.raises(FrameEncodeError, match="exceeds max_frame 50000"):
        encode_frame_parts(frame, max_frame=50_000)
    with pytest.raises(FrameEncodeError):
        encode_frame(frame, max_frame=50_000)


# -- feed_borrowed: bad input through a reused buffer ---------------------------------------


def _borrowed(data: bytes) -> tuple[bytearray, memoryview]:
    buf = bytearray(data)
    return buf, memoryview(buf)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ((1 << 20).to_bytes(4, "big") + b"\x00" * 8, FrameTooLargeError),
        ((8).to_bytes(4, "big") + b"\xff" * 8, FrameDecodeError),
        (wire({0: 6, 1: 99, 2: RID_HEX, 3: 0}), FrameDecodeError),
    ],
    ids=["oversize-prefix", "garbage-body", "unknown-type"],
)
def test_borrowed_bad_input_fails_as_feed_does_and_stays_failed(
    raw: bytes, error: type[Exception]
) -> None:
    plain = FrameDecoder(max_frame=1 << 16)
    with pytest.raises(error) as expected:
        plain.feed(raw)  # an oversize prefix fails here already (FRM-9)
        plain.next_frame()

    dec = FrameDecoder(max_frame=1 << 16)
    buf, view = _borrowed(raw)
    with pytest.raises(error) as got:
        dec.feed_borrowed(view)
        dec.next_frame()
    assert str(got.value) == str(expected.value)
    buf[:] = b"\x00" * len(buf)  # the caller reuses its buffer: the decoder stays failed
    with pytest.raises(error):
        dec.next_frame()
    with pytest.raises(error):
        dec.feed_borrowed(view)


def test_borrowed_tail_survives_the_buffer_being_reused() -> None:
    good = wire(base(4))  # a complete END, then the first 5 bytes of another
    second = wire(base(4))
    dec = FrameDecoder()
    buf, view = _borrowed(good + second[:5])
    dec.feed_borrowed(view)
    assert dec.next_frame() == accepts(base(4))
    assert dec.next_frame() is None
    buf[:] = b"\xff" * len(buf)
    dec.feed(second[5:])
    assert dec.next_frame() == accepts(base(4))
    dec.feed(b"")
    assert dec.next_frame() is None and dec.buffered == 0


def test_release_borrowed_keeps_the_frames_not_taken_yet() -> None:
    """A caller that stops taking frames (its output is full) releases the buffer; the frames
    still pending, and an incomplete tail, survive the buffer being refilled."""
    frames_in = [{**base(4), 3: n} for n in range(3)]  # key 3: seq
    raw = b"".join(wire(f) for f in frames_in)
    fourth = wire({**base(4), 3: 3})
    dec = FrameDecoder()
    buf, view = _borrowed(raw + fourth[:7])
    dec.feed_borrowed(view)
    assert dec.next_frame() == accepts(frames_in[0])
    dec.release_borrowed()
    buf[:] = b"\xff" * len(buf)  # refilled before the rest was taken
    assert dec.next_frame() == accepts(frames_in[1])
    assert dec.next_frame() == accepts(frames_in[2])
    assert dec.next_frame() is None
    dec.feed(fourth[7:])
    assert dec.next_frame() == accepts({**base(4), 3: 3})
    dec.release_borrowed()  # nothing borrowed: no-op
    assert dec.next_frame() is None and dec.buffered == 0
