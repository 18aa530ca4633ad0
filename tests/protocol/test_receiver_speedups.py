"""The compiled fast path of the request receiver (``receive_fast``) against the Python one.

The C code takes the common valid frames of a request body and answers "ask Python" for
everything else, before it changes anything. These tests feed the recorded vector sessions
and random frame sequences (right and wrong ids, orders, indices, counts, checksums, credit,
payloads) to two receivers, one on each path, and demand the same events, the same errors
(type and message), and the same state afterwards. One test reruns the receiver's own suite
with the compiled paths switched off, so the pure-Python path stays tested as well.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cartridge_runtime.protocol import (
    DEFAULT_LIMITS,
    BodyReceiver,
    CartridgeConnection,
    Frame,
    FrameType,
    InputFailed,
    MessageId,
    ProtocolError,
    RequestAdmitted,
    StreamData,
    _codec,
    _request_state,
    checksum,
    decode_frame,
    encode_frame,
    frames,
)

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "protocol_spec" / "vectors" / "frames"
BUILT = importlib.util.find_spec("cartridge_runtime.protocol._speedups") is not None
needs_c = pytest.mark.skipif(
    not BUILT or os.environ.get(_codec.PURE_PYTHON_ENV) is not None,
    reason="the C fast paths are not built here, or switched off",
)
FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RID = MessageId(b"\x01" * 16)
OTHER = MessageId(b"\x02" * 16)


def _outcome(rx: BodyReceiver, frame: Frame) -> Any:
    try:
        events = rx.receive(frame)
    except Exception as exc:  # every error, compared by type and message
        return ("raised", type(exc), str(exc))
    return [(ev, ev.wire if isinstance(ev, StreamData) else None) for ev in events]


def _state(rx: BodyReceiver) -> Any:
    streams = {
        sid: (s.state, s.window, s.chunks, s.pending, s.is_sequence, s.unbounded)
        for sid, s in rx._streams.items()
    }
    return rx.state, streams, rx.data_to_send()


def _run(frame_list: list[Frame], c_path: bool, **kw: Any) -> list[Any]:
    saved = _request_state._c_receive
    if not c_path:
        _request_state._c_receive = None
    try:
        rx = BodyReceiver(kw.pop("rid", RID), **kw)
        out = []
        for f in frame_list:
            out.append(_outcome(rx, f))
            out.append(_state(rx))
        return out
    finally:
        _request_state._c_receive = saved


def _same(frame_list: list[Frame], **kw: Any) -> list[Any]:
    compiled = _run(frame_list, True, **dict(kw))
    pure = _run(frame_list, False, **dict(kw))
    assert compiled == pure
    return compiled


@needs_c
def test_the_compiled_receiver_is_in_use() -> None:
    assert _request_state._c_receive is not None


@needs_c
def test_a_small_request_and_response_give_the_same_events_on_both_paths() -> None:
    payload = cbor2.dumps(b'{"value": 21}')
    request = [
        frames.req(RID, "cap:double"),
        frames.stream_start(RID, "arg-0", "media:json"),
        frames.chunk(RID, "arg-0", 0, payload),
        frames.stream_end(RID, "arg-0", 1),
        frames.end(RID),
    ]
    out = _same(request, initial_credit=4, expect_req=True)
    assert all(isinstance(o, list) for o in out[0::2])  # no errors
    response = [
        frames.stream_start(RID, "resp-0", "media:json"),
        frames.chunk(RID, "resp-0", 0, cbor2.dumps("42")),
        frames.stream_end(RID, "resp-0", 1),
        frames.end(RID),
    ]
    _same(response, initial_credit=4, expect_req=False)
    _same(response, initial_credit=4, expect_req=False, verify_checksums=False)
    # Every one of these frames is the compiled path's own (none is left to Python).
    for frame_list, expect_req in ((request, True), (response, False)):
        rx = BodyReceiver(RID, initial_credit=4, expect_req=expect_req)
        assert all(_request_state._c_receive(rx, f) is not None for f in frame_list)


def _sessions() -> list[Path]:
    return sorted(VECTORS.glob("*.jsonl"))


@needs_c
def test_vector_sessions_give_the_same_events_and_errors() -> None:
    compared = 0
    for path in _sessions():
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        by_rid: dict[tuple[str, Any], list[Frame]] = {}
        for d in lines:
            if d.get("hex_truncated"):
                continue
            try:
                frame = decode_frame(bytes.fromhex(d["hex"]))
            except ProtocolError:
                continue  # a deliberately broken frame: the codec's tests cover it
            if frame.frame_type in (FrameType.HELLO, FrameType.HEARTBEAT, FrameType.RELAY_NOTIFY):
                continue
            by_rid.setdefault((d["dir"], frame.id.value), []).append(frame)
        for (direction, _), frame_list in by_rid.items():
            rid = frame_list[0].id
            expect_req = direction == "host->cartridge"
            _same(frame_list, rid=rid, initial_credit=32, expect_req=expect_req)
            compared += len(frame_list)
    assert compared > 50


_payloads = st.one_of(
    st.binary(max_size=40).map(cbor2.dumps),
    st.text(max_size=40).map(cbor2.dumps),
    st.integers().map(cbor2.dumps),
    st.binary(max_size=12),  # anything: not CBOR, truncated, trailing bytes
    st.just(b""),
    st.just(b"\x62\xff\xfe"),  # a text string that is not UTF-8
    st.just(b"\x58\x05abc"),  # a byte string shorter than its head says
    st.just(b"\x7a\x00\x00\x00\x02hi"),  # a 4-byte head
)


@st.composite
def _frame(draw: st.DrawFn) -> Frame:
    kind = draw(
        st.sampled_from(["req", "start", "chunk", "chunk", "chunk", "end_stream", "end", "log"])
    )
    rid = draw(st.sampled_from([RID, RID, RID, MessageId(RID.value), OTHER, MessageId(7)]))
    sid = draw(st.sampled_from(["a", "a", "b", ""]))
    if kind == "req":
        return frames.req(rid, "cap:x")
    if kind == "start":
        f = frames.stream_start(rid, sid, draw(st.sampled_from(["media:x", ""])))
        flags = draw(st.sampled_from([{}, {}, {"is_sequence": True}, {"unbounded": True}]))
        return f.replace(**flags) if flags else f
    if kind == "chunk":
        payload = draw(_payloads)
        f = frames.chunk(rid, sid, draw(st.integers(0, 3)), payload)
        twist = draw(st.sampled_from(["", "", "", "bad-crc", "no-crc"]))
        if twist == "bad-crc":
            f = f.replace(checksum=(checksum(payload) + 1) % (1 << 64))
        elif twist == "no-crc":
            f = f.replace(checksum=None)
        return f
    if kind == "end_stream":
        count = draw(st.sampled_from([0, 1, 2, 3, None]))
        return frames.stream_end(rid, sid, count)
    if kind == "end":
        return frames.end(rid)
    return frames.log(rid, "info", "hello")


@needs_c
@FAST
@given(
    frame_list=st.lists(_frame(), max_size=12),
    expect_req=st.booleans(),
    verify=st.booleans(),
    credit=st.integers(1, 3),
)
def test_random_frame_sequences_give_the_same_events_errors_and_state(
    frame_list: list[Frame], expect_req: bool, verify: bool, credit: int
) -> None:
    _same(frame_list, initial_credit=credit, expect_req=expect_req, verify_checksums=verify)


@needs_c
@FAST
@given(
    prefix=st.lists(_frame(), max_size=4),
    payload=_payloads,
    index=st.integers(0, 2),
)
def test_open_streams_take_any_chunk_the_same_way(
    prefix: list[Frame], payload: bytes, index: int
) -> None:
    opened = [frames.stream_start(RID, "a", "media:x")]
    chunk = frames.chunk(RID, "a", index, payload)
    _same(
        opened + prefix + [chunk, frames.stream_end(RID, "a", 1)],
        initial_credit=2,
        expect_req=False,
    )


@needs_c
@pytest.mark.slow
def test_receiver_suite_passes_on_the_pure_python_path() -> None:
    env = dict(os.environ, **{_codec.PURE_PYTHON_ENV: "1"})
    check = (
        "from cartridge_runtime.protocol import _request_state as r; assert r._c_receive is None"
    )
    off = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=env, capture_output=True)
    assert off.returncode == 0, off.stderr.decode()[-2000:]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/protocol/test_request_state.py",
            "tests/protocol/test_named_streams.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


class _Handlers:
    def find_handler(self, cap_urn: str) -> tuple[str, str] | None:
        return (cap_urn, "factory") if cap_urn == "cap:x" else None

    def is_identity(self, cap_urn: str) -> bool:
        return False

    def pool_name(self, handler_urn: str) -> str:
        return "all"


class _Pools:
    def arrive(self, cap: str, item: Any) -> int | None:
        return None

    def release(self, cap: str) -> None:
        pass

    def admit_next(self) -> Any:
        return None

    def remove_queued(self, matches: Any) -> Any:
        return None

    def to_json_bytes(self) -> bytes:
        return b'{"all":{}}'


def _serve(frame_list: list[Frame], c_path: bool) -> list[Any]:
    """What a cartridge connection makes of ``frame_list``: each event (requests by id),
    each frame it queued, and every request's receiver state."""
    saved = _request_state._c_receive, _request_state._c_serve_flow
    if not c_path:
        _request_state._c_receive = _request_state._c_serve_flow = None
    try:
        conn = CartridgeConnection[str](
            limits=DEFAULT_LIMITS,
            handlers=_Handlers(),
            pools=_Pools(),
            manifest=b"{}",
            max_open_requests=8,
        )
        conn.receive(frames.hello(DEFAULT_LIMITS))
        conn.receive(frames.policy("offline"))
        out: list[Any] = []
        for f in frame_list:
            event = conn.receive(f)
            if isinstance(event, RequestAdmitted):
                event = ("admitted", event.request.rid, event.queued)
            elif isinstance(event, InputFailed):
                event = ("input failed", event.rid, type(event.error), str(event.error))
            elif isinstance(event, list):
                event = [(e, e.wire if isinstance(e, StreamData) else None) for e in event]
            out.append(event)
            out.append([encode_frame(q) for q in conn.outbox])
            conn.outbox.clear()
            out.append({rid: _state(r.receiver) for rid, r in conn.requests.items()})
            out.append({rid: repr(r.input_error) for rid, r in conn.requests.items()})
        return out
    finally:
        _request_state._c_receive, _request_state._c_serve_flow = saved


@st.composite
def _served_frame(draw: st.DrawFn) -> Frame:
    f = draw(_frame())
    if f.frame_type is FrameType.STREAM_START and draw(st.booleans()):
        f = f.replace(output="named")
    if f.frame_type is FrameType.REQ:
        f = f.replace(cap=draw(st.sampled_from(["cap:x", "cap:x", "cap:none"])))
    return f


@needs_c
def test_the_compiled_flow_path_serves_a_small_request() -> None:
    request = [
        frames.req(RID, "cap:x"),
        frames.stream_start(RID, "arg-0", "media:json"),
        frames.chunk(RID, "arg-0", 0, cbor2.dumps(b"21")),
        frames.stream_end(RID, "arg-0", 1),
        frames.end(RID),
    ]
    assert _serve(request, True) == _serve(request, False)
    conn = CartridgeConnection[str](
        limits=DEFAULT_LIMITS,
        handlers=_Handlers(),
        pools=_Pools(),
        manifest=b"{}",
        max_open_requests=8,
    )
    conn.receive(frames.hello(DEFAULT_LIMITS))
    conn.receive(frames.policy("offline"))
    conn.receive(request[0])
    served = conn.requests[RID]
    for f in request[1:]:
        # The whole body goes through the compiled call: no Python fallback is needed.
        events = _request_state._c_serve_flow(conn.requests, None, f)
        assert isinstance(events, list) and events
    assert served.receiver.finished


@needs_c
@FAST
@given(frame_list=st.lists(_served_frame(), max_size=14))
def test_a_cartridge_connection_serves_any_frames_the_same_on_both_paths(
    frame_list: list[Frame],
) -> None:
    assert _serve(frame_list, True) == _serve(frame_list, False)
