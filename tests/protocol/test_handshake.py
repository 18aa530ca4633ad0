"""Limits negotiation, seq numbering, HELLO acceptance and the identity check (no IO)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import cbor2
import pytest
from _frame_vectors import VECTOR_DIR, load
from _raw_frames import RID

from cartridge_runtime.protocol import (
    DEFAULT_LIMITS,
    HARD_FRAME_CAP,
    IDENTITY_CAP,
    IDENTITY_STREAM_ID,
    ZERO_ID,
    CartridgeHello,
    ChecksumMismatchError,
    Frame,
    FrameType,
    HandshakeError,
    IdentityCheck,
    IdentityCheckError,
    Limits,
    MessageId,
    SeqAssigner,
    VersionMismatchError,
    accept_cartridge_hello,
    accept_host_hello,
    checksum,
    decode_frame,
    encode_body,
    encode_frame,
    frames,
    verify_chunk,
)

# --------------------------------------------------------------------------- limits


class TestLimits:
    def test_element_wise_min(self) -> None:
        a = Limits(max_frame=100_000, max_chunk=50_000, max_reorder_buffer=10, initial_credit=40)
        b = Limits(max_frame=200_000, max_chunk=1_000, max_reorder_buffer=64, initial_credit=8)
        n = a.negotiate(b)
        assert n == Limits(
            max_frame=100_000, max_chunk=1_000, max_reorder_buffer=10, initial_credit=8
        )
        assert n == b.negotiate(a)

    def test_max_frame_capped(self) -> None:
        big = Limits(max_frame=1 << 40)
        assert big.negotiate(big).max_frame == HARD_FRAME_CAP

    @pytest.mark.parametrize(
        "name", ["max_frame", "max_chunk", "max_reorder_buffer", "initial_credit"]
    )
    def test_zero_is_handshake_error(self, name: str) -> None:
        with pytest.raises(HandshakeError, match=name):
            DEFAULT_LIMITS.negotiate(Limits(**{name: 0}))

    def test_meta_round_trip(self) -> None:
        meta = DEFAULT_LIMITS.to_meta()
        assert list(meta) == ["max_frame", "max_chunk", "max_reorder_buffer", "initial_credit"]
        assert Limits.from_meta(meta) == DEFAULT_LIMITS

    @pytest.mark.parametrize(
        ("name", "bad"),
        [
            ("max_frame", None),
            ("max_chunk", 0),
            ("initial_credit", -1),
            ("max_reorder_buffer", "64"),
            ("max_frame", 1.0),
            ("initial_credit", True),
        ],
    )
    def test_from_meta_errors(self, name: str, bad: Any) -> None:
        meta: dict[str, Any] = dict(DEFAULT_LIMITS.to_meta())
        if bad is None:
            del meta[name]
        else:
            meta[name] = bad
        with pytest.raises(HandshakeError, match=name):
            Limits.from_meta(meta)

    def test_effective_chunk_fits_max_frame(self) -> None:
        small = Limits(max_frame=10_000, max_chunk=262_144)
        f = frames.chunk(
            RID,
            "resp-01234567-0",
            9,
            cbor2.dumps(bytes(small.effective_chunk)),
            xid=MessageId(1 << 63),
        )
        assert len(encode_body(f)) <= small.max_frame


# --------------------------------------------------------------------------- seq


class TestSeqAssigner:
    def test_per_flow_counters(self) -> None:
        s = SeqAssigner()
        other = MessageId(b"o" * 16)
        out = [
            s.assign(f)
            for f in (
                frames.req(RID, "cap:x"),
                frames.req(other, "cap:x"),
                frames.stream_start(RID, "a", "media:"),
                frames.log(other, "info", "m"),
                frames.end(RID),
            )
        ]
        assert [f.seq for f in out if f] == [0, 0, 1, 1, 2]

    def test_xid_makes_a_distinct_flow(self) -> None:
        s = SeqAssigner()
        a = s.assign(frames.req(RID, "cap:x"))
        b = s.assign(frames.req(RID, "cap:x", xid=MessageId(1)))
        c = s.assign(frames.req(RID, "cap:x", xid=MessageId(2)))
        d = s.assign(frames.end(RID, xid=MessageId(1)))
        assert (a and a.seq, b and b.seq, c and c.seq, d and d.seq) == (0, 0, 0, 1)

    def test_stragglers_after_terminal(self) -> None:
        s = SeqAssigner()
        s.assign(frames.req(RID, "cap:x"))
        assert s.assign(frames.err(RID, "X", "m")) is not None
        assert s.is_closed(RID)
        assert s.assign(frames.log(RID, "info", "late")) is None
        assert s.assign(frames.end(RID)) is None
        assert s.stragglers == 2
        # Non-flow frames still go out, with seq 0.
        cr = s.assign(frames.credit(RID, 1, "request").replace(seq=9))
        assert cr is not None and cr.seq == 0
        # Other flows of the same rid are unaffected; forget() reopens the flow.
        x = s.assign(frames.log(RID, "info", "m", xid=MessageId(1)))
        assert x is not None and x.seq == 0
        s.forget(RID)
        again = s.assign(frames.req(RID, "cap:x"))
        assert again is not None and again.seq == 0

    @pytest.mark.parametrize(
        "make",
        [
            lambda: frames.heartbeat(RID),
            lambda: frames.cancel(RID),
            lambda: frames.policy("full"),
            lambda: frames.hello(DEFAULT_LIMITS),
            lambda: frames.close_stream(RID),
            lambda: frames.credit(RID, 2, "response"),
        ],
    )
    def test_non_flow_seq_zero(self, make: Callable[[], Frame]) -> None:
        s = SeqAssigner()
        for _ in range(3):
            f = s.assign(make().replace(seq=5))
            assert f is not None and f.seq == 0

    def test_closed_memory_is_bounded(self) -> None:
        s = SeqAssigner()
        for i in range(SeqAssigner.MAX_CLOSED + 10):
            s.assign(frames.end(MessageId(i)))
        assert not s.is_closed(MessageId(0))
        assert s.is_closed(MessageId(SeqAssigner.MAX_CLOSED + 9))


# --------------------------------------------------------------------------- handshake


def _v(name: str) -> list[Frame]:
    return [decode_frame(vf.raw) for vf in load(VECTOR_DIR / name) if vf.raw is not None]


def _host_hello(**changes: Any) -> Frame:
    meta: dict[str, Any] = {**DEFAULT_LIMITS.to_meta(), "version": 6}
    for k, v in changes.items():
        if v is None:
            meta.pop(k, None)
        else:
            meta[k] = v
    return Frame(frame_type=FrameType.HELLO, id=ZERO_ID, meta=meta)


class TestHostHello:
    def test_defaults(self) -> None:
        assert accept_host_hello(_host_hello(), DEFAULT_LIMITS) == DEFAULT_LIMITS

    def test_negotiated(self) -> None:
        got = accept_host_hello(_host_hello(max_chunk=1000, initial_credit=4), DEFAULT_LIMITS)
        assert got.max_chunk == 1000 and got.initial_credit == 4 and got.max_frame == 3_670_016

    def test_vector_host_hello(self) -> None:
        hello = _v("01-handshake-identity-policy.jsonl")[0]
        assert accept_host_hello(hello, DEFAULT_LIMITS) == DEFAULT_LIMITS

    @pytest.mark.parametrize("version", [5, None, "6", 6.0, True, 7])
    def test_version(self, version: Any) -> None:
        with pytest.raises(VersionMismatchError):
            accept_host_hello(_host_hello(version=version), DEFAULT_LIMITS)

    def test_vector_17_version_5(self) -> None:
        hello = _v("17-version-mismatch.jsonl")[0]
        with pytest.raises(VersionMismatchError):
            accept_host_hello(hello, DEFAULT_LIMITS)

    @pytest.mark.parametrize(
        "name", ["max_frame", "max_chunk", "max_reorder_buffer", "initial_credit"]
    )
    def test_missing_or_zero_limit(self, name: str) -> None:
        with pytest.raises(HandshakeError, match=name):
            accept_host_hello(_host_hello(**{name: None}), DEFAULT_LIMITS)
        with pytest.raises(HandshakeError, match=name):
            accept_host_hello(_host_hello(**{name: 0}), DEFAULT_LIMITS)

    def test_not_a_hello(self) -> None:
        with pytest.raises(HandshakeError, match="HELLO"):
            accept_host_hello(frames.policy("full"), DEFAULT_LIMITS)

    def test_handshake_errors_are_spawn_failed(self) -> None:
        with pytest.raises(HandshakeError) as ei:
            accept_host_hello(_host_hello(version=5), DEFAULT_LIMITS)
        assert ei.value.code == "SPAWN_FAILED"


def _cartridge_hellos() -> list[tuple[str, Frame]]:
    out = []
    for p in sorted(VECTOR_DIR.rglob("*.jsonl")):
        for vf in load(p):
            if vf.type == "HELLO" and vf.dir == "cartridge->host" and vf.raw is not None:
                out.append((f"{vf.file}:{vf.line}", decode_frame(vf.raw)))
    return out


class TestCartridgeHello:
    def test_every_vector_cartridge_hello(self) -> None:
        hellos = _cartridge_hellos()
        assert len(hellos) >= 20
        for where, f in hellos:
            got = accept_cartridge_hello(f, DEFAULT_LIMITS)
            assert isinstance(got, CartridgeHello), where
            assert got.limits == DEFAULT_LIMITS
            assert f.meta is not None and got.manifest == f.meta["manifest"]
            assert "all" in got.pools and IDENTITY_CAP in got.pools, where

    def test_negotiates_down(self) -> None:
        _, f = _cartridge_hellos()[0]
        got = accept_cartridge_hello(f, Limits(initial_credit=2))
        assert got.limits.initial_credit == 2

    @pytest.mark.parametrize(
        ("change", "match"),
        [
            ({"manifest": None}, "manifest"),
            ({"manifest": "{}"}, "manifest"),
            ({"pools": None}, "pools"),
            ({"pools": b"not json"}, "pools"),
            ({"pools": b"[1]"}, "pools"),
            ({"pools": b"\xff"}, "pools"),
            ({"version": 5}, "version"),
            ({"initial_credit": 0}, "initial_credit"),
        ],
    )
    def test_bad(self, change: dict[str, Any], match: str) -> None:
        _, f = _cartridge_hellos()[0]
        assert f.meta is not None
        meta = dict(f.meta)
        for k, v in change.items():
            if v is None:
                del meta[k]
            else:
                meta[k] = v
        with pytest.raises(HandshakeError, match=match):
            accept_cartridge_hello(f.replace(meta=meta), DEFAULT_LIMITS)


# --------------------------------------------------------------------------- identity check


def _vector01_identity() -> tuple[IdentityCheck, list[Frame], list[Frame]]:
    """An IdentityCheck primed with vector 01's nonce and rid, its request and its echo."""
    fs = [
        (vf.dir, decode_frame(vf.raw))
        for vf in load(VECTOR_DIR / "01-handshake-identity-policy.jsonl")
        if vf.raw is not None
    ]
    req = [
        f
        for d, f in fs
        if d == "host->cartridge" and f.frame_type not in (FrameType.HELLO, FrameType.POLICY)
    ]
    echo = [f for d, f in fs if d == "cartridge->host" and f.frame_type is not FrameType.HELLO]
    chunk = next(f for f in req if f.frame_type is FrameType.CHUNK)
    nonce = cbor2.loads(chunk.payload or b"")
    return IdentityCheck(nonce=nonce, rid=req[0].id), req, echo


def _judge(check: IdentityCheck, echo: list[Frame]) -> bool:
    done = False
    for f in echo:
        done = check.receive(f)
        if done:
            break
    return done


class TestIdentityCheck:
    def test_request_matches_vector_01_byte_for_byte(self) -> None:
        check, req, _ = _vector01_identity()
        ours = [encode_frame(f) for f in check.frames()]
        assert ours == [encode_frame(f) for f in req]

    def test_vector_echo_passes(self) -> None:
        check, _, echo = _vector01_identity()
        assert [f.frame_type for f in echo] == [
            FrameType.STREAM_START,
            FrameType.CHUNK,
            FrameType.STREAM_END,
            FrameType.END,
        ]
        assert _judge(check, echo)

    def test_fresh_nonce(self) -> None:
        a, b = IdentityCheck(), IdentityCheck()
        assert len(a.nonce) == 32 and a.nonce != b.nonce and a.rid != b.rid
        f = a.frames()
        assert [x.frame_type for x in f] == [
            FrameType.REQ,
            FrameType.STREAM_START,
            FrameType.CHUNK,
            FrameType.STREAM_END,
            FrameType.END,
        ]
        assert f[0].cap == IDENTITY_CAP and f[1].stream_id == IDENTITY_STREAM_ID
        assert all(x.seq == 0 and x.routing_id is None and x.id == a.rid for x in f)
        verify_chunk(f[2])

    def test_wrong_nonce(self) -> None:
        check, _, echo = _vector01_identity()
        wrong = IdentityCheck(nonce=bytes(32), rid=check.rid)
        with pytest.raises(IdentityCheckError, match="match"):
            _judge(wrong, echo)

    def test_err_fails(self) -> None:
        check, _, echo = _vector01_identity()
        with pytest.raises(IdentityCheckError, match="ERR"):
            _judge(check, [*echo[:1], frames.err(check.rid, "HANDLER_ERROR", "nope")])

    def test_end_before_stream_end(self) -> None:
        check, _, echo = _vector01_identity()
        with pytest.raises(IdentityCheckError, match="before"):
            _judge(check, [echo[0], echo[1], echo[3]])
        check2, _, echo2 = _vector01_identity()
        with pytest.raises(IdentityCheckError, match="before"):
            _judge(check2, [echo2[3]])

    def test_bad_checksum(self) -> None:
        check, _, echo = _vector01_identity()
        bad = echo[1].replace(checksum=(echo[1].checksum or 0) ^ 1)
        with pytest.raises(IdentityCheckError, match="checksum"):
            _judge(check, [echo[0], bad, echo[2], echo[3]])

    @pytest.mark.parametrize("payload", [cbor2.dumps("text"), cbor2.dumps(5), b"\xff\x00", b""])
    def test_non_bytes_chunk(self, payload: bytes) -> None:
        check, _, echo = _vector01_identity()
        bad = frames.chunk(check.rid, "resp-x-0", 0, payload)
        with pytest.raises(IdentityCheckError):
            _judge(check, [echo[0], bad, echo[2], echo[3]])

    def test_split_nonce_echo_and_skipped_frames(self) -> None:
        check, _, echo = _vector01_identity()
        n = check.nonce
        sid = echo[1].stream_id or "s"
        split = [
            echo[0],
            frames.credit(check.rid, 1, "request"),
            frames.chunk(check.rid, sid, 0, cbor2.dumps(n[:5])),
            frames.log(check.rid, "info", "noise"),
            frames.chunk(check.rid, sid, 1, cbor2.dumps(n[5:])),
            frames.heartbeat(MessageId(9)),
            echo[2],
            echo[3],
        ]
        assert _judge(check, split)

    def test_split_nonce_request(self) -> None:
        check = IdentityCheck()
        f = check.frames(split_at=10)
        chunks = [x for x in f if x.frame_type is FrameType.CHUNK]
        assert len(chunks) == 2 and [c.chunk_index for c in chunks] == [0, 1]
        assert b"".join(cbor2.loads(c.payload or b"") for c in chunks) == check.nonce
        assert f[-2].chunk_count == 2

    def test_frames_of_other_requests_are_ignored(self) -> None:
        check, _, echo = _vector01_identity()
        other = MessageId.new()
        assert not check.receive(frames.err(other, "X", "m"))
        assert _judge(check, echo)


def test_verify_chunk() -> None:
    f = frames.chunk(RID, "s", 0, b"\x4chello bifaci")
    assert f.checksum == 6933222068686294443  # REQ-11's example (vector 02)
    verify_chunk(f)
    with pytest.raises(ChecksumMismatchError, match="Checksum mismatch"):
        verify_chunk(f.replace(checksum=1))
    assert checksum(bytearray(b"\x4chello bifaci")) == checksum(memoryview(b"\x4chello bifaci"))
    assert checksum(b"") == 0xCBF29CE484222325


def test_vector_dir_present() -> None:
    assert Path(VECTOR_DIR).is_dir()
