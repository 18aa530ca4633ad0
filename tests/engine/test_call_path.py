"""The compiled call path (``protocol.response_router``, ``protocol.request_frames``)
against the Python one.

The C router takes the common valid frames of a plain response (STREAM_START, a scalar
CHUNK, STREAM_END, END) to an engine call whole, and hands everything else to the Python
router before it has changed anything. These tests feed the same frames, right and wrong, to
two calls, one behind each router, and demand the same events, errors, counters and call
state afterwards; and they check that the frames of a small response are the C path's own.
A small request's frames are compared field by field, in order, and as encoded bytes.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import anyio
import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cartridge_runtime import protocol as P
from cartridge_runtime.engine._call import CallState
from cartridge_runtime.engine._connection._counters import Counters
from cartridge_runtime.engine._inputs import INLINE_MAX, inline_frames
from cartridge_runtime.protocol import (
    DEFAULT_LIMITS,
    Frame,
    HostConnection,
    MessageId,
    checksum,
    frames,
)

BUILT = importlib.util.find_spec("cartridge_runtime.protocol._speedups") is not None
needs_c = pytest.mark.skipif(
    not BUILT or os.environ.get("CARTRIDGE_RUNTIME_PURE_PYTHON") is not None,
    reason="the C fast paths are not built here, or switched off",
)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

OTHER = MessageId(b"\x02" * 16)


class _Wake:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def set(self) -> None:
        self.log.append("woken")


class _Gate:
    def release(self, chain: Any) -> None:  # pragma: no cover - calls here hold no chain
        raise AssertionError("no chain to release")


class _Link:
    """The connection a call runs on, over a real :class:`HostConnection` core."""

    name = "fake"
    limits = DEFAULT_LIMITS
    gate = _Gate()

    def __init__(self) -> None:
        self.counters = Counters()
        self.core: HostConnection[Any, Any] = HostConnection(
            limits=DEFAULT_LIMITS, policy=None, counters=self.counters
        )
        self.core._routing = True  # as after the start-up
        self.sent: list[Frame] = []
        self.metric_totals: dict[str, float] = {}

    def next_xid(self) -> MessageId:
        return self.core.next_xid()

    def add_flow(self, rid: MessageId, flow: Any) -> None:
        self.core.add_flow(rid, flow)

    def forget(self, rid: MessageId) -> None:
        self.core.forget(rid)

    def send(self, frame: Frame) -> None:
        self.sent.append(frame)


def _call(link: _Link) -> CallState:
    state = CallState(
        link,  # type: ignore[arg-type]
        cap="cap:x",
        handler_cap="cap:x",
        inputs=[],
        chain=None,
        cancel_grace=1.0,
    )
    link.add_flow(state.rid, state)
    return state


def _python_router(link: _Link) -> Callable[[Frame], None]:
    def route(frame: Frame) -> None:
        event = link.core.receive_frame(frame)
        assert event is None or isinstance(event, P.FrameRefused)

    return route


def _snapshot(link: _Link, state: CallState, wakes: list[str]) -> Any:
    c = link.counters
    rx = state.receiver
    streams = {sid: (s.state, s.window, s.chunks, s.pending) for sid, s in rx._streams.items()}
    return (
        [(type(ev), attrs_of(ev), cost) for ev, cost in state.events],
        state.done,
        repr(state.error),
        state.end_meta,
        state.frames,
        state._queued,
        dict(state._outputs),
        rx.state,
        streams,
        [(f.frame_type, f.stream_id, f.credit) for f in link.sent],
        (c.drops, c.stragglers, c.no_route, c.protocol_errors, c.late_credits),
        list(wakes),
        [flow is state for flow in link.core.calls.values()],
    )


def attrs_of(ev: Any) -> Any:
    return {name: getattr(ev, name) for name in ev.__slots__ if not name.startswith("__")}


def _run(
    build: Callable[[CallState], list[Frame]], compiled: bool, *, waiting: bool, abandoned: bool
) -> list[Any]:
    link = _Link()
    state = _call(link)
    wakes: list[str] = []
    python = _python_router(link)
    route = P.response_router(link.core, python) if compiled else python
    assert route is not None
    state.abandoned = abandoned
    out = []
    for frame in build(state):
        if waiting and state._waiter is None:
            state._waiter = _Wake(wakes)  # type: ignore[assignment]
        try:
            route(frame)
            out.append("ok")
        except Exception as exc:  # compared by type and message
            out.append((type(exc), str(exc)))
        out.append(_snapshot(link, state, wakes))
    return out


def _same(build: Callable[[CallState], list[Frame]], **kw: Any) -> list[Any]:
    compiled = _run(build, True, **kw)
    pure = _run(build, False, **kw)
    assert compiled == pure
    return compiled


def _small(state: CallState) -> list[Frame]:
    rid, xid = state.rid, state.xid
    payload = cbor2.dumps("42")
    return [
        frames.stream_start(rid, "r0", "media:json", xid=xid),
        frames.chunk(rid, "r0", 0, payload, xid=xid),
        frames.stream_end(rid, "r0", 1, xid=xid),
        frames.end(rid, xid=xid),
    ]


@needs_c
def test_a_small_response_is_delivered_the_same_on_both_paths() -> None:
    out = _same(_small, waiting=True, abandoned=False)
    assert out[0::2] == ["ok"] * 4
    last = out[-1]
    kinds = [kind.__name__ for kind, _, _ in last[0]]
    assert kinds == ["OutputStarted", "OutputData", "OutputEnded"]
    assert last[1] is True  # done
    _same(_small, waiting=False, abandoned=True)


@needs_c
def test_the_frames_of_a_small_response_are_the_compiled_paths_own() -> None:
    link = _Link()
    state = _call(link)
    refused: list[Frame] = []
    route = P.response_router(link.core, refused.append)
    assert route is not None
    for frame in _small(state):
        route(frame)
    assert refused == []
    assert state.done and state.error is None
    values = [getattr(ev, "value", None) for ev, _ in state.events]
    assert values == [None, "42", None]
    assert link.core.calls == {}


@st.composite
def _frame(draw: st.DrawFn, state: CallState) -> Frame:
    kind = draw(
        st.sampled_from(["start", "chunk", "chunk", "end_stream", "end", "log", "err", "credit"])
    )
    rid = draw(st.sampled_from([state.rid, state.rid, state.rid, OTHER]))
    xid = draw(st.sampled_from([state.xid, state.xid, None, MessageId(99)]))
    sid = draw(st.sampled_from(["a", "a", "b", ""]))
    if kind == "start":
        return frames.stream_start(
            rid,
            sid,
            draw(st.sampled_from(["media:x", ""])),
            xid=xid,
            is_sequence=draw(st.sampled_from([None, None, True])),
            output=draw(st.sampled_from([None, None, "media:y"])),
        )
    if kind == "chunk":
        payload = draw(
            st.one_of(
                st.text(max_size=20).map(cbor2.dumps),
                st.binary(max_size=20).map(cbor2.dumps),
                st.integers().map(cbor2.dumps),
                st.binary(max_size=6),
            )
        )
        f = frames.chunk(rid, sid, draw(st.integers(0, 2)), payload, xid=xid)
        if draw(st.booleans()) and draw(st.booleans()):
            f = f.replace(checksum=(checksum(payload) + 1) % (1 << 64))
        return f
    if kind == "end_stream":
        return frames.stream_end(rid, sid, draw(st.sampled_from([0, 1, 2, None])), xid=xid)
    if kind == "end":
        return frames.end(rid, xid=xid)
    if kind == "log":
        return frames.log(rid, "info", "hello", xid=xid)
    if kind == "err":
        return frames.err(rid, "HANDLER_ERROR", "no", xid=xid)
    return frames.credit(rid, 1, "response", stream_id=sid, xid=xid)


@needs_c
@FAST
@given(data=st.data(), waiting=st.booleans(), abandoned=st.booleans())
def test_any_frames_give_the_same_events_errors_and_state(
    data: st.DataObject, waiting: bool, abandoned: bool
) -> None:
    drawn: list[list[Frame]] = []

    def build(state: CallState) -> list[Frame]:
        # The same frames for both calls: drawn once, their ids mapped onto each call's.
        if not drawn:
            drawn.append(data.draw(st.lists(_frame(state), max_size=10)))
            drawn.append([state.rid, state.xid])  # type: ignore[list-item]
            return drawn[0]
        old_rid, old_xid = drawn[1]
        out = []
        for f in drawn[0]:
            changes: dict[str, Any] = {}
            if f.id is old_rid:
                changes["id"] = state.rid
            if f.routing_id is old_xid and old_xid is not None:
                changes["routing_id"] = state.xid
            out.append(f.replace(**changes) if changes else f)
        return out

    compiled = _run(build, True, waiting=waiting, abandoned=abandoned)
    pure = _run(build, False, waiting=waiting, abandoned=abandoned)
    assert compiled == pure


def test_the_router_is_switched_off_on_the_pure_python_path() -> None:
    import subprocess
    import sys

    check = (
        "from cartridge_runtime import protocol as P\n"
        "import cartridge_runtime.engine._call\n"
        "assert P.response_router(object(), print) is None\n"
        "assert P.request_wire(P.MessageId(1), None, 'cap:x', [('m', b'x')], 9, 9, 9, 99) is None\n"
    )
    env = dict(os.environ, CARTRIDGE_RUNTIME_PURE_PYTHON="1")
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def _python_request(
    rid: MessageId, xid: MessageId | None, inputs: list[tuple[str, Any]]
) -> list[Frame] | None:
    body = inline_frames(inputs, rid, xid, DEFAULT_LIMITS)
    if body is None:
        return None
    return [frames.req(rid, "cap:x", xid=xid), *body]


def _wire(frame_list: list[Frame]) -> list[Any]:
    return [
        (list(f.__dict__.items()), P.encode_frame(f, 1 << 20, i)) for i, f in enumerate(frame_list)
    ]


_values = st.one_of(
    st.binary(min_size=1, max_size=300),
    st.binary(max_size=0),
    st.text(max_size=5),
    st.lists(st.binary(max_size=3), max_size=2),
    st.just(bytearray(b"abc")),
)


@needs_c
@FAST
@given(
    values=st.lists(_values, max_size=4),
    xid=st.sampled_from([None, MessageId(3)]),
    chunk=st.sampled_from([1, 8, 256, DEFAULT_LIMITS.effective_chunk]),
)
def test_a_small_request_is_made_the_same_on_both_paths(
    values: list[Any], xid: MessageId | None, chunk: int
) -> None:
    rid = MessageId(b"\x05" * 16)
    inputs = [(f"media:m{i}", v) for i, v in enumerate(values)]
    compiled = P.request_frames(rid, xid, "cap:x", inputs, chunk, 16, INLINE_MAX)
    plain = all(type(v) is bytes and 0 < len(v) <= chunk for v in values)
    if not plain:
        assert compiled is None  # the engine builds it in Python
        assert P.request_wire(rid, xid, "cap:x", inputs, chunk, 16, INLINE_MAX, 1 << 20) is None
        return
    assert compiled is not None
    pure = _python_request(rid, xid, inputs)
    assert pure is not None
    assert compiled == pure
    assert _wire(compiled) == _wire(pure)
    # Written straight to the wire: the bytes the encoder gives the same frames, numbered
    # 0, 1, 2... as a flow queued whole.
    wire = P.request_wire(rid, xid, "cap:x", inputs, chunk, 16, INLINE_MAX, 1 << 20)
    assert wire == b"".join(P.encode_frame(f, 1 << 20, i) for i, f in enumerate(pure))


@needs_c
def test_a_request_over_its_bounds_is_left_to_python() -> None:
    rid = MessageId(b"\x05" * 16)
    inputs = [("media:a", b"x" * 10), ("media:b", b"y" * 10)]
    assert P.request_frames(rid, None, "cap:x", inputs, 16, 0, INLINE_MAX) is None  # no credit
    assert P.request_frames(rid, None, "cap:x", inputs, 16, 4, 15) is None  # over the total
    assert P.request_frames(rid, None, "cap:x", inputs, 16, 4, 20) is not None
    wire = P.request_wire
    assert wire(rid, None, "cap:x", inputs, 16, 0, INLINE_MAX, 1 << 20) is None  # no credit
    assert wire(rid, None, "cap:x", inputs, 16, 4, 15, 1 << 20) is None  # over the total
    assert wire(rid, None, "cap:x", inputs, 16, 4, 20, 40) is None  # a body over max_frame
    assert wire(rid, None, "cap:x", inputs, 16, 4, 20, 1 << 20) is not None
    many = [("media:a", b"x")] * 33  # more inputs than it writes in one go
    assert wire(rid, None, "cap:x", many, 16, 4, INLINE_MAX, 1 << 20) is None
    assert P.request_frames(rid, None, "cap:x", many, 16, 4, INLINE_MAX) is not None


def test_a_small_calls_request_reaches_the_outbox_as_its_wire_bytes() -> None:
    # The engine queues a small request as the bytes the encoder gives its frames, on both
    # paths (compiled: one buffer, numbered 0, 1, 2...; pure: the frames, encoded there).
    from cartridge_runtime._plumbing import FrameOutbox
    from cartridge_runtime.engine._connection._sending import CallSending

    class _Sending(CallSending):
        def __init__(self) -> None:
            self.name = "fake"
            self._tap = None
            self._tg = None
            self.core = HostConnection(limits=DEFAULT_LIMITS, policy=None, counters=Counters())
            self.outbox = FrameOutbox(None, lambda: 1 << 20, number=self.core.seq.number)

    class _Conn(_Link):
        def __init__(self) -> None:
            super().__init__()
            self.sending = _Sending()
            self.outbox = self.sending.outbox

        def __getattr__(self, name: str) -> Any:
            return getattr(self.sending, name)

    conn = _Conn()
    state = CallState(
        conn,  # type: ignore[arg-type]
        cap="cap:x",
        handler_cap="cap:x",
        inputs=[("media:a", b"abc"), ("media:b", b"de")],
        chain=None,
        cancel_grace=1.0,
    )
    state.start()
    queued = b"".join(bytes(b) for b in conn.outbox._out)
    pure = _python_request(state.rid, state.xid, state.inputs)
    assert pure is not None
    assert queued == b"".join(P.encode_frame(f, 1 << 20, i) for i, f in enumerate(pure))
    assert state._queued is not None and conn.outbox.withdraw(*state._queued)
    assert b"".join(bytes(b) for b in conn.outbox._out) == b""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_streamed_small_calls_give_the_same_events_on_both_backends(backend: str) -> None:
    # The compiled router queues the events, the response iterator hands them out without a
    # coroutine; on either backend a streamed call sees every event, then its end.
    from _engine_helpers import INTEROP, interop_caps

    from cartridge_runtime.engine import Engine, OutputData, OutputEnded, OutputStarted

    echo = interop_caps()["echo"]

    async def main() -> list[list[Any]]:
        seen: list[list[Any]] = []
        async with Engine() as engine:
            engine.add_cartridge(INTEROP)
            for payload in (b"x", b"y" * 1000, b"z" * 200_000):
                kinds: list[Any] = []
                async with engine.call(echo, [("media:", payload)]) as response:
                    async for event in response:
                        kinds.append(type(event))
                        if isinstance(event, OutputData):
                            kinds.append(len(event.value))
                    assert response.done
                seen.append(kinds)
        return seen

    seen = anyio.run(main, backend=backend)
    assert seen[0] == [OutputStarted, OutputData, 1, OutputEnded]
    assert seen[1] == [OutputStarted, OutputData, 1000, OutputEnded]
    assert seen[2][0] is OutputStarted and seen[2][-1] is OutputEnded
    assert sum(n for n in seen[2] if isinstance(n, int)) == 200_000


@needs_c
def test_ids_hash_by_their_value_from_the_types_own_slot() -> None:
    from cartridge_runtime.protocol import _speedups

    made = [MessageId.new(), MessageId(7), MessageId(b"\x01" * 16)]
    assert all(hash(m) == hash(m.value) for m in made)
    table = {m: i for i, m in enumerate(made)}
    assert _speedups.install_id_hash(MessageId) is True  # again: the same hashes
    assert [table[MessageId(m.value)] for m in made] == [0, 1, 2]

    class Other:
        __slots__ = ("value",)

    assert _speedups.install_id_hash(Other) is False  # its hash is not hash(value): left
    assert _speedups.install_id_hash(int) is False


@pytest.mark.parametrize("credit", [0, 1, 3, 16, 1 << 40])
def test_a_calls_receiver_is_made_as_its_class_makes_it(credit: int) -> None:
    # Compiled, the receiver's dict is filled without running __init__: the same fields, in
    # the same order, as BodyReceiver's own (on the pure path, it is BodyReceiver's own).
    rid, xid = MessageId.new(), MessageId(5)
    made = P.receiver_factory()(rid, xid, credit)
    own = P.BodyReceiver(rid, xid=xid, initial_credit=credit, expect_req=False)
    assert type(made) is P.BodyReceiver
    assert list(vars(made).items()) == list(vars(own).items())
    assert made.data_to_send() == [] and made.stream_state("x") is P.StreamState.NEW
