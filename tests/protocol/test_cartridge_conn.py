"""The cartridge side's sans-IO connection, in memory: frames in, events and frames out.

Nothing here does IO: a fake handler table and pool schedule stand in for the runtime's, and
every assertion is about what :class:`CartridgeConnection` returns or puts in its outbox.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cartridge_runtime.protocol import (
    DEFAULT_LIMITS,
    IDENTITY_CAP,
    PHASE_TRANSITIONS,
    REQ_RULES,
    Admission,
    AttributionClass,
    BodyEnded,
    Cancelled,
    CartridgeConnection,
    CloseInputs,
    CloseReason,
    ConnectionClosed,
    ConnPhase,
    ErrorCode,
    ErrorReport,
    Event,
    Frame,
    FrameType,
    Handshaken,
    HeartbeatProbe,
    InputFailed,
    MessageId,
    Notice,
    ProtocolError,
    RequestAdmitted,
    RequestPhase,
    ServedRequest,
    StreamData,
    StreamOpened,
    frames,
    terminal_frame,
)

ECHO = "cap:in=media:;op=echo;out=media:"
OTHER = "cap:in=media:;op=other;out=media:"


class _Handlers:
    def find_handler(self, cap_urn: str) -> tuple[str, str] | None:
        if cap_urn in (ECHO, IDENTITY_CAP):
            return cap_urn, f"factory:{cap_urn}"
        return None

    def is_identity(self, cap_urn: str) -> bool:
        return cap_urn == IDENTITY_CAP

    def pool_name(self, handler_urn: str) -> str:
        return handler_urn


class _Pools:
    """One pool for everything, with room for ``capacity`` running requests."""

    def __init__(self, capacity: int = 100) -> None:
        self.capacity = capacity
        self.active = 0
        self.line: list[Any] = []
        self.released: list[str] = []

    def arrive(self, cap: str, item: Any) -> int | None:
        if self.active < self.capacity and not self.line:
            self.active += 1
            return None
        self.line.append(item)
        return len(self.line)

    def release(self, cap: str) -> None:
        self.active -= 1
        self.released.append(cap)

    def admit_next(self) -> tuple[str, Any] | None:
        if self.line and self.active < self.capacity:
            self.active += 1
            return "pool", self.line.pop(0)
        return None

    def remove_queued(self, matches: Callable[[Any], bool]) -> Any:
        for item in self.line:
            if matches(item):
                self.line.remove(item)
                return item
        return None

    def apply_desired_json(self, data: bytes | str) -> None:
        if data != b"{}":
            raise ValueError("unknown pool 'nope'")

    def to_json_bytes(self) -> bytes:
        return b'{"all":{}}'


class _Sink:
    def __init__(self) -> None:
        self.granted: list[int] = []
        self.delivered: list[tuple[object, int]] = []

    def grant(self, n: int) -> None:
        self.granted.append(n)

    def deliver(self, event: Event | ProtocolError, credit: int = 0) -> None:
        self.delivered.append((event, credit))


def _conn(
    capacity: int = 100, *, policy: bool = True, max_open: int = 10
) -> CartridgeConnection[str]:
    conn = CartridgeConnection[str](
        limits=DEFAULT_LIMITS,
        handlers=_Handlers(),
        pools=_Pools(capacity),
        manifest=b'{"name":"t"}',
        max_open_requests=max_open,
    )
    assert isinstance(conn.receive(frames.hello(DEFAULT_LIMITS)), Handshaken)
    if policy:
        assert conn.receive(frames.policy("offline")) is None
    return conn


def _errs(conn: CartridgeConnection[str]) -> list[tuple[MessageId, str, str, str]]:
    out = [
        (f.id, (f.meta or {})["code"], (f.meta or {})["attribution_class"], f.meta["message"])
        for f in conn.outbox
        if f.frame_type is FrameType.ERR and f.meta is not None
    ]
    conn.outbox.clear()
    return out


def _admit(conn: CartridgeConnection[str], cap: str = ECHO) -> ServedRequest[str]:
    event = conn.receive(frames.req(MessageId.new(), cap))
    assert isinstance(event, RequestAdmitted)
    return event.request


# -- phases ------------------------------------------------------------------------------------


def test_the_phase_table_moves_forward_only() -> None:
    assert PHASE_TRANSITIONS[ConnPhase.AWAITING_HELLO] == {ConnPhase.SERVING, ConnPhase.CLOSED}
    assert PHASE_TRANSITIONS[ConnPhase.SERVING] == {ConnPhase.CLOSED}
    assert PHASE_TRANSITIONS[ConnPhase.CLOSED] == frozenset()


def test_the_hello_exchange_answers_with_manifest_and_pools() -> None:
    conn = CartridgeConnection[str](
        limits=DEFAULT_LIMITS,
        handlers=_Handlers(),
        pools=_Pools(),
        manifest=b'{"name":"t"}',
        max_open_requests=4,
    )
    assert conn.phase is ConnPhase.AWAITING_HELLO
    event = conn.receive(frames.hello(attrs.evolve(DEFAULT_LIMITS, max_chunk=1000)))
    assert isinstance(event, Handshaken)
    assert event.limits.max_chunk == 1000 and conn.limits == event.limits
    meta = event.hello.meta or {}
    assert event.hello.frame_type is FrameType.HELLO
    assert meta["manifest"] == b'{"name":"t"}' and meta["pools"] == b'{"all":{}}'
    assert conn.phase is ConnPhase.SERVING and conn.outbox == []


@pytest.mark.parametrize(
    "first",
    [
        frames.policy("full"),
        frames.req(MessageId.new(), ECHO),
        Frame(frame_type=FrameType.HELLO, id=MessageId(0)),
    ],
)
def test_anything_but_a_valid_hello_first_closes_the_connection(first: Frame) -> None:
    conn = CartridgeConnection[str](
        limits=DEFAULT_LIMITS,
        handlers=_Handlers(),
        pools=_Pools(),
        manifest=b"{}",
        max_open_requests=4,
    )
    event = conn.receive(first)
    assert isinstance(event, ConnectionClosed)
    assert event.reason is CloseReason.HANDSHAKE_FAILED
    assert event.message.startswith("handshake failed: ")
    assert conn.phase is ConnPhase.CLOSED
    assert conn.receive(frames.hello(DEFAULT_LIMITS)) is None  # closed: ignored
    assert conn.outbox == []


def test_a_late_hello_is_answered_on_id_0() -> None:
    conn = _conn()
    assert conn.receive(frames.hello(DEFAULT_LIMITS)) is None
    assert _errs(conn) == [
        (MessageId(0), "PROTOCOL_ERROR", "internal", "HELLO after the handshake")
    ]
    assert conn.phase is ConnPhase.SERVING


@pytest.mark.parametrize("ft", [FrameType.RELAY_NOTIFY, FrameType.RELAY_STATE])
def test_a_relay_frame_is_fatal(ft: FrameType) -> None:
    conn = _conn()
    event = conn.receive(Frame(frame_type=ft, id=MessageId(0), meta={}))
    assert isinstance(event, ConnectionClosed) and event.reason is CloseReason.RELAY_FRAME
    assert ft.name in event.message
    assert conn.phase is ConnPhase.CLOSED
    assert conn.receive(frames.req(MessageId.new(), ECHO)) is None and conn.outbox == []


def test_policy_is_kept_and_replaced() -> None:
    conn = _conn(policy=False)
    assert conn.policy is None
    conn.receive(frames.policy("full"))
    conn.receive(frames.policy("no_telemetry"))
    assert conn.policy == "no_telemetry"


# -- REQ admission -----------------------------------------------------------------------------


def test_the_req_rules_come_in_their_documented_order() -> None:
    assert [outcome for outcome, _ in REQ_RULES] == [
        Admission.DUPLICATE,
        Admission.NO_CAP,
        Admission.PAYLOAD,
        Admission.BEFORE_POLICY,
        Admission.TOO_MANY,
    ]


def _req(cap: str | None = ECHO, payload: bytes | None = b"") -> Frame:
    return Frame(
        frame_type=FrameType.REQ,
        id=MessageId.new(),
        cap=cap,
        payload=payload,
        routing_id=MessageId.new(),
        content_type="application/cbor",
    )


@pytest.mark.parametrize(
    ("frame", "policy", "code", "cls"),
    [
        (_req(cap=None), True, "INVALID_REQUEST", "internal"),
        (_req(payload=b"\x01"), True, "PROTOCOL_ERROR", "internal"),
        (_req(payload=b"\x01"), False, "PROTOCOL_ERROR", "internal"),  # payload before policy
        (_req(), False, "PROTOCOL_VIOLATION", "internal"),
        (_req(cap=OTHER), True, "NO_HANDLER", "environment"),
    ],
)
def test_a_refused_req_is_answered_with_its_rules_err(
    frame: Frame, policy: bool, code: str, cls: str
) -> None:
    conn = _conn(policy=policy)
    assert conn.receive(frame) is None
    assert [f.routing_id for f in conn.outbox] == [frame.routing_id]
    [(rid, got_code, got_cls, _)] = _errs(conn)
    assert (rid, got_code, got_cls) == (frame.id, code, cls)
    assert conn.requests == {}


def test_the_identity_check_may_come_before_policy() -> None:
    conn = _conn(policy=False)
    request = _admit(conn, IDENTITY_CAP)
    assert request.phase is RequestPhase.RUNNING and request.handler == f"factory:{IDENTITY_CAP}"


def test_too_many_open_requests_are_refused_as_a_resource_error() -> None:
    conn = _conn(max_open=2)
    _admit(conn)
    _admit(conn)
    frame = _req()
    assert conn.receive(frame) is None
    [(rid, code, cls, message)] = _errs(conn)
    assert (rid, code, cls) == (frame.id, "TOO_MANY_REQUESTS", "resource")
    assert "at most 2" in message


def test_a_second_req_for_an_open_request_fails_its_input() -> None:
    conn = _conn()
    request = _admit(conn)
    event = conn.receive(frames.req(request.rid, ECHO))
    assert isinstance(event, InputFailed) and event.rid == request.rid
    assert request.input_error is event.error and "second REQ" in str(event.error)
    assert conn.outbox == []  # running: the handler's terminal carries it
    frame = conn.terminal(request, None)
    assert frame is not None and (frame.meta or {})["code"] == "PROTOCOL_ERROR"


def test_a_queued_request_is_announced_then_dequeued_when_a_slot_frees() -> None:
    conn = _conn(capacity=1)
    first = _admit(conn)
    event = conn.receive(frames.req(MessageId.new(), ECHO))
    assert isinstance(event, RequestAdmitted) and event.queued
    second = event.request
    assert second.phase is RequestPhase.QUEUED and not second.started
    [log] = conn.outbox
    assert log.frame_type is FrameType.LOG and (log.meta or {})["level"] == "queued"
    assert "position 1" in (log.meta or {})["message"]
    conn.outbox.clear()
    assert conn.finish(first) == (second,)
    assert second.phase is RequestPhase.RUNNING and first.phase is RequestPhase.DONE
    assert first.rid not in conn.requests
    assert (conn.dequeued(second).meta or {})["level"] == "dequeued"


# -- body frames and peer calls ----------------------------------------------------------------


def test_body_frames_come_back_as_the_requests_events() -> None:
    conn = _conn()
    request = _admit(conn)
    rid = request.rid
    events = conn.receive(frames.stream_start(rid, "in", "media:"))
    assert isinstance(events, list) and isinstance(events[0], StreamOpened)
    events = conn.receive(frames.chunk(rid, "in", 0, cbor2.dumps(b"abc")))
    assert isinstance(events, list) and isinstance(events[0], StreamData)
    assert events[0].value == b"abc"
    assert conn.receive(frames.chunk(MessageId.new(), "in", 0, b"\x40")) is None  # unknown id


def test_an_argument_stream_with_an_output_name_fails_the_input() -> None:
    conn = _conn()
    request = _admit(conn)
    event = conn.receive(frames.stream_start(request.rid, "in", "media:", output="media:x"))
    assert isinstance(event, InputFailed) and "output name" in str(event.error)
    # Later frames of the request produce nothing.
    assert conn.receive(frames.stream_end(request.rid, "in", 0)) is None


def test_a_rule_broken_by_a_queued_request_is_answered_at_once() -> None:
    conn = _conn(capacity=1)
    _admit(conn)
    queued = conn.receive(frames.req(MessageId.new(), ECHO))
    assert isinstance(queued, RequestAdmitted)
    conn.outbox.clear()
    rid = queued.request.rid
    event = conn.receive(frames.chunk(rid, "nope", 0, b"\x40"))
    assert isinstance(event, InputFailed)
    [(got, code, cls, _)] = _errs(conn)
    assert (got, cls) == (rid, "internal") and code == event.error.code
    assert rid not in conn.requests and queued.request.phase is RequestPhase.DONE


def test_the_requesters_err_ends_the_request_without_a_terminal() -> None:
    conn = _conn()
    request = _admit(conn)
    events = conn.receive(frames.err(request.rid, "UPSTREAM", "gone", "environment"))
    assert isinstance(events, list) and isinstance(events[0], ErrorReport)
    assert request.terminal_sent and request.cancel is not None
    assert request.cancel.code == "UPSTREAM"
    assert conn.terminal(request, None) is None


def test_peer_call_frames_go_to_the_calls_sink_with_credit_marks() -> None:
    conn = _conn()
    parent = _admit(conn)
    sink = _Sink()
    route = conn.open_peer_call(parent, sink)
    assert conn.peer_calls[route.rid] is route and parent.peer_ids == [route.rid]
    rid = route.rid
    assert conn.receive(frames.stream_start(rid, "r", "media:")) is None
    assert conn.receive(frames.chunk(rid, "r", 0, cbor2.dumps(b"x"))) is None
    assert conn.receive(frames.stream_end(rid, "r", 1)) is None
    assert conn.receive(frames.end(rid)) is None
    kinds = [(type(e).__name__, c) for e, c in sink.delivered]
    assert kinds[:2] == [("StreamOpened", 0), ("StreamData", 1)]
    assert kinds[-1] == ("BodyEnded", 0) and isinstance(sink.delivered[-1][0], BodyEnded)
    assert rid not in conn.peer_calls


def test_a_broken_peer_response_delivers_the_error() -> None:
    conn = _conn()
    sink = _Sink()
    route = conn.open_peer_call(_admit(conn), sink)
    conn.receive(frames.chunk(route.rid, "never-started", 0, b"\x40"))
    [(error, credit)] = sink.delivered
    assert isinstance(error, ProtocolError) and credit == 0
    assert route.rid not in conn.peer_calls


# -- credit ------------------------------------------------------------------------------------


def test_credit_goes_to_the_named_stream_or_the_only_one() -> None:
    conn = _conn()
    request = _admit(conn)
    a, b = _Sink(), _Sink()
    request.outputs["a"] = a
    conn.receive(frames.credit(request.rid, 3, "response", stream_id="a"))
    conn.receive(frames.credit(request.rid, 2, "response"))
    assert a.granted == [3, 2]
    request.outputs["b"] = b
    event = conn.receive(frames.credit(request.rid, 1, "response"))
    assert isinstance(event, Notice) and "2 streams" in event.message
    conn.receive(frames.credit(request.rid, 5, "response", stream_id="b"))
    assert (a.granted, b.granted) == ([3, 2], [5])
    assert conn.receive(frames.credit(MessageId.new(), 1, "response")) is None


def test_credit_for_a_peer_calls_argument_reaches_it() -> None:
    conn = _conn()
    route = conn.open_peer_call(_admit(conn), _Sink())
    arg = _Sink()
    route.outputs["arg"] = arg
    conn.receive(frames.credit(route.rid, 4, "request", stream_id="arg"))
    assert arg.granted == [4]


# -- cancel ------------------------------------------------------------------------------------


def test_cancel_of_a_queued_request_answers_it_while_queued() -> None:
    conn = _conn(capacity=1)
    _admit(conn)
    queued = conn.receive(frames.req(MessageId.new(), ECHO))
    assert isinstance(queued, RequestAdmitted)
    conn.outbox.clear()
    rid = queued.request.rid
    event = conn.receive(frames.cancel(rid, code="ABORTED", attribution_class="user", message="x"))
    assert event == Cancelled(rid, False)
    assert _errs(conn) == [
        (rid, "ABORTED", "user", "Request aborted by the host: x (while queued)")
    ]
    assert rid not in conn.requests and conn.pools.remove_queued(lambda i: True) is None


def test_cancel_of_a_running_request_cancels_its_peer_calls_with_the_reason() -> None:
    conn = _conn()
    request = _admit(conn)
    route = conn.open_peer_call(request, _Sink())
    event = conn.receive(frames.cancel(request.rid))
    assert event == Cancelled(request.rid, True)
    [peer_cancel] = conn.outbox
    assert peer_cancel.frame_type is FrameType.CANCEL and peer_cancel.id == route.rid
    assert (peer_cancel.meta or {})["code"] == "CANCELLED"
    conn.outbox.clear()
    second = conn.receive(frames.cancel(request.rid))
    assert isinstance(second, Notice) and "second CANCEL" in second.message
    unknown = conn.receive(frames.cancel(MessageId.new()))
    assert isinstance(unknown, Notice) and conn.outbox == []


def test_a_finished_request_cancels_and_forgets_its_open_peer_calls() -> None:
    conn = _conn()
    request = _admit(conn)
    done = conn.open_peer_call(request, _Sink())
    conn.receive(frames.end(done.rid))  # this call's response ended: nothing to cancel
    sink = _Sink()
    open_call = conn.open_peer_call(request, sink)
    conn.receive(frames.stream_start(open_call.rid, "r", "media:"))
    conn.outbox.clear()
    assert conn.terminal(request, None) is not None
    conn.outbox.clear()
    conn.finish(request)
    [peer_cancel] = conn.outbox
    assert peer_cancel.frame_type is FrameType.CANCEL and peer_cancel.id == open_call.rid
    assert conn.peer_calls == {} and request.peer_ids == []
    # The peer's late frames are stragglers: ignored as for any unknown id, the sink hears none.
    conn.outbox.clear()
    before = len(sink.delivered)
    assert conn.receive(frames.chunk(open_call.rid, "r", 0, cbor2.dumps(b"x"))) is None
    assert conn.receive(frames.credit(open_call.rid, 1, "request")) is None
    assert conn.receive(frames.end(open_call.rid)) is None
    assert len(sink.delivered) == before and conn.outbox == []
    assert conn.peer_cancel_frame(request, open_call.rid) is None


def test_a_cancelled_requests_peer_calls_get_one_cancel_and_are_forgotten() -> None:
    conn = _conn()
    request = _admit(conn)
    route = conn.open_peer_call(request, _Sink())
    conn.receive(frames.cancel(request.rid, code="ABORTED", attribution_class="user", message="x"))
    [peer_cancel] = conn.outbox
    assert peer_cancel.id == route.rid and (peer_cancel.meta or {})["code"] == "ABORTED"
    conn.outbox.clear()
    conn.finish(request)
    assert conn.outbox == [] and route.rid not in conn.peer_calls


def test_an_abandoned_requests_peer_calls_are_cancelled_with_its_reason() -> None:
    conn = _conn()
    request = _admit(conn)
    route = conn.open_peer_call(request, _Sink())
    conn.receive(frames.err(request.rid, "UPSTREAM", "gone", "environment"))
    conn.outbox.clear()
    conn.finish(request)
    [peer_cancel] = conn.outbox
    assert peer_cancel.id == route.rid and (peer_cancel.meta or {})["code"] == "UPSTREAM"
    assert conn.peer_calls == {}


def test_force_kill_sends_the_cancels_err_then_closes() -> None:
    conn = _conn()
    request = _admit(conn)
    event = conn.receive(frames.cancel(request.rid, force_kill=True))
    assert isinstance(event, Cancelled) and event.closed is not None
    assert event.closed.reason is CloseReason.FORCE_KILLED
    assert _errs(conn) == [(request.rid, "CANCELLED", "internal", "Request cancelled")]
    assert conn.phase is ConnPhase.CLOSED and conn.terminal(request, None) is None


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (None, ("CANCELLED", "internal", "Request cancelled")),
        (
            {"code": "ABORTED", "message": "m"},
            ("ABORTED", "internal", "Request aborted by the host: m"),
        ),
        (
            {"code": "ABORTED_COLLATERAL", "attribution_class": "user", "message": "m"},
            (
                "ABORTED_COLLATERAL",
                "user",
                "Request aborted as collateral of a failure elsewhere in the run: m",
            ),
        ),
        ({"code": "X", "attribution_class": "bogus"}, ("X", "internal", "X")),
        ({"code": "CANCELLED", "message": "why"}, ("CANCELLED", "internal", "why")),
    ],
)
def test_the_cancel_reason_follows_the_meta(
    meta: dict[str, Any] | None, expected: tuple[str, str, str]
) -> None:
    reason = ErrorReport.for_cancel(meta)
    assert (reason.code, reason.attribution_class, reason.message) == expected


def test_close_stream_is_routed_to_an_open_request() -> None:
    conn = _conn()
    request = _admit(conn)
    assert conn.receive(frames.close_stream(request.rid, stream_id="feed")) == CloseInputs(
        request.rid, "feed"
    )
    assert isinstance(conn.receive(frames.close_stream(MessageId.new())), Notice)


# -- the terminal order ------------------------------------------------------------------------

_CANCEL = ErrorReport(code="CANCELLED", attribution_class="user", message="stop")
_FAILURE = ErrorReport(code="BAD", attribution_class="input", message="bad", arg_urn="media:x")


@pytest.mark.parametrize(
    ("cancel", "input_error", "failure", "expected"),
    [
        (True, True, True, ("ERR", "CANCELLED", "user")),
        (False, True, True, ("ERR", "CREDIT_VIOLATION", "internal")),
        (False, False, True, ("ERR", "BAD", "input")),
        (False, False, False, ("END", None, None)),
        (True, False, False, ("ERR", "CANCELLED", "user")),
    ],
)
def test_cancel_beats_input_error_beats_handler_err_beats_end(
    cancel: bool, input_error: bool, failure: bool, expected: tuple[str, Any, Any]
) -> None:
    request = ServedRequest(MessageId.new(), None, ECHO, ECHO, "f", "pool", 8)
    if cancel:
        request.cancel = _CANCEL
    if input_error:
        request.input_error = ProtocolError("over", code=ErrorCode.CREDIT_VIOLATION)
    frame = terminal_frame(request, _FAILURE if failure else None, 0.5, "done")
    meta = frame.meta or {}
    assert (frame.frame_type.name, meta.get("code"), meta.get("attribution_class")) == expected
    if expected[0] == "END":
        assert meta.get("message") == "done"


def test_an_unknown_attribution_class_of_a_handler_err_is_sent_as_internal() -> None:
    request = ServedRequest(MessageId.new(), None, ECHO, ECHO, "f", "pool", 8)
    failure = ErrorReport(code="X", attribution_class="whoever", message="m")
    frame = terminal_frame(request, failure)
    assert (frame.meta or {})["attribution_class"] == AttributionClass.INTERNAL


def test_only_one_terminal_is_ever_sent() -> None:
    conn = _conn()
    request = _admit(conn)
    assert conn.terminal(request, None) is not None
    assert conn.terminal(request, _FAILURE) is None


# -- heartbeats and a broken stream ------------------------------------------------------------


def test_a_heartbeat_is_answered_with_the_counters_and_pools() -> None:
    conn = _conn()
    hid = MessageId.new()
    event = conn.receive(frames.heartbeat(hid))
    assert event == HeartbeatProbe(hid, ())
    reply = conn.heartbeat_reply(hid, drops=1, stragglers=2, overruns=3)
    assert reply.meta == {
        "drops_total": 1,
        "stragglers_total": 2,
        "overruns_total": 3,
        "pools": b'{"all":{}}',
    }


def test_a_heartbeat_naming_an_unknown_pool_is_refused() -> None:
    conn = _conn()
    hid = MessageId.new()
    assert conn.receive(frames.heartbeat(hid, meta={"desired_capacities": b'{"nope":1}'})) is None
    [(rid, code, cls, message)] = _errs(conn)
    assert (rid, code, cls) == (hid, "UNKNOWN_POOL", "internal") and "nope" in message


def test_a_broken_stream_ends_every_open_request_with_protocol_error() -> None:
    conn = _conn(capacity=1)
    running = _admit(conn)
    queued = conn.receive(frames.req(MessageId.new(), ECHO))
    assert isinstance(queued, RequestAdmitted)
    conn.outbox.clear()
    assert conn.fail_all("broken") == [running]
    assert _errs(conn) == [(queued.request.rid, "PROTOCOL_ERROR", "internal", "broken")]
    frame = conn.terminal(running, None)
    assert frame is not None and (frame.meta or {})["code"] == "PROTOCOL_ERROR"
    assert conn.connection_error(ProtocolError("bad bytes")).id == MessageId(0)


# -- any frame sequence ------------------------------------------------------------------------

_IDS = [MessageId.new() for _ in range(3)] + [MessageId(0), MessageId(7)]
_metas = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(
            ["network", "code", "message", "attribution_class", "desired_capacities", "version"]
        ),
        st.one_of(st.text(max_size=5), st.integers(-2, 8), st.binary(max_size=4), st.none()),
        max_size=3,
    ),
)


@st.composite
def _frames(draw: st.DrawFn) -> Frame:
    ft = draw(st.sampled_from(list(FrameType)))
    return Frame(
        frame_type=ft,
        id=draw(st.sampled_from(_IDS)),
        meta=draw(_metas),
        payload=draw(st.one_of(st.none(), st.binary(max_size=6), st.just(cbor2.dumps(b"ab")))),
        cap=draw(st.one_of(st.none(), st.sampled_from([ECHO, OTHER, IDENTITY_CAP, "not a urn"]))),
        stream_id=draw(st.one_of(st.none(), st.sampled_from(["a", "b"]))),
        media_urn=draw(st.one_of(st.none(), st.just("media:"))),
        routing_id=draw(st.one_of(st.none(), st.sampled_from(_IDS[:2]))),
        chunk_index=draw(st.one_of(st.none(), st.integers(0, 2))),
        chunk_count=draw(st.one_of(st.none(), st.integers(0, 2))),
        checksum=draw(st.one_of(st.none(), st.integers(0, 2**64 - 1))),
        is_sequence=draw(st.one_of(st.none(), st.booleans())),
        force_kill=draw(st.one_of(st.none(), st.booleans())),
        credit=draw(st.one_of(st.none(), st.integers(0, 4))),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_frames(), max_size=25), st.booleans())
def test_any_frame_sequence_raises_nothing_but_protocol_errors(
    sequence: list[Frame], hello_first: bool
) -> None:
    conn = CartridgeConnection[str](
        limits=DEFAULT_LIMITS,
        handlers=_Handlers(),
        pools=_Pools(capacity=1),
        manifest=b"{}",
        max_open_requests=3,
    )
    if hello_first:
        conn.receive(frames.hello(DEFAULT_LIMITS))
    for frame in sequence:
        try:
            event = conn.receive(frame)
        except ProtocolError:
            continue
        if isinstance(event, RequestAdmitted) and not event.queued:
            conn.finish(event.request)  # handlers end at once: slots free, the queue moves
        assert all(isinstance(f, Frame) for f in conn.outbox)
        conn.outbox.clear()
        assert len(conn.requests) <= 3
        assert conn.phase in PHASE_TRANSITIONS
