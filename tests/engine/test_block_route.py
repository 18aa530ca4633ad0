"""The compiled block router (``protocol.block_router``) against the decoder and the Python
router.

``route_block`` reads a block's frames straight from the bytes and routes the plain response
frames of an engine call with no frame made, up to the first frame it does not take whole;
the rest goes to the decoder and the routers as before. These tests feed the same bytes,
right and wrong (frames out of key order, unknown keys, nulls, values of the wrong type),
both ways and demand the same events, errors, counters and call state afterwards.
"""

from __future__ import annotations

import struct
from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_call_path import (
    BUILT,
    FAST,
    _call,
    _frame,
    _Link,
    _python_router,
    _small,
    _snapshot,
    needs_c,
)

from cartridge_runtime import protocol as P
from cartridge_runtime.engine._call import CallState
from cartridge_runtime.protocol import Frame

MAX = 1 << 20


def _body(frame: Frame, seq: int) -> dict[int, Any]:
    wire = P.encode_frame(frame, MAX, seq)
    body: dict[int, Any] = cbor2.loads(wire[4:])
    return body


def _prefixed(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _feed(link: _Link, state: CallState, block: bytes, compiled: bool) -> Any:
    wakes: list[str] = []
    python = _python_router(link)
    route = P.response_router(link.core, python) if compiled else python
    assert route is not None
    rest = block
    if compiled:
        router = P.block_router()
        assert router is not None
        end = router(link.core, memoryview(block), MAX)
        rest = block[end:]
    decoder = P.FrameDecoder(MAX)
    error = None
    try:
        decoder.feed(rest)
        while (frame := decoder.next_frame()) is not None:
            route(frame)
    except Exception as exc:  # compared by type and message
        error = (type(exc), str(exc))
    return error, _snapshot(link, state, wakes)


def _both(make: Any) -> Any:
    out = []
    for compiled in (True, False):
        link = _Link()
        state = _call(link)
        out.append(_feed(link, state, make(state), compiled))
    assert out[0] == out[1]
    return out[0]


@needs_c
def test_a_small_responses_block_is_routed_whole_with_no_frame_made() -> None:
    link = _Link()
    state = _call(link)
    block = b"".join(P.encode_frame(f, MAX, i) for i, f in enumerate(_small(state)))
    router = P.block_router()
    assert router is not None
    assert router(link.core, memoryview(block), MAX) == len(block)
    assert state.done and state.error is None
    kinds = [type(ev).__name__ for ev, _ in state.events]
    assert kinds == ["OutputStarted", "OutputData", "OutputEnded"]
    assert link.core.calls == {}
    _both(lambda s: b"".join(P.encode_frame(f, MAX, i) for i, f in enumerate(_small(s))))


@needs_c
def test_a_partial_frame_and_what_follows_are_left_to_the_decoder() -> None:
    link = _Link()
    state = _call(link)
    block = b"".join(P.encode_frame(f, MAX, i) for i, f in enumerate(_small(state)))
    router = P.block_router()
    assert router is not None
    first = len(P.encode_frame(_small(state)[0], MAX, 0))
    assert router(link.core, memoryview(block[: first + 3]), MAX) == first
    assert router(link.core, memoryview(block[:first]), 10) == 0  # over max_frame


_MUTATIONS = ["none", "none", "unknown key", "reversed", "null", "text id", "bad type"]


@needs_c
@FAST
@given(data=st.data())
def test_any_bytes_give_the_same_events_errors_and_state(data: st.DataObject) -> None:
    drawn: list[Any] = []

    def make(state: CallState) -> bytes:
        if not drawn:
            frames = data.draw(st.lists(_frame(state), max_size=8))
            mutations = [data.draw(st.sampled_from(_MUTATIONS)) for _ in frames]
            drawn.append((frames, mutations, state.rid, state.xid))
        frames, mutations, old_rid, old_xid = drawn[0]
        out = b""
        for i, (f, how) in enumerate(zip(frames, mutations, strict=True)):
            changes: dict[str, Any] = {}
            if f.id is old_rid:
                changes["id"] = state.rid
            if f.routing_id is old_xid and old_xid is not None:
                changes["routing_id"] = state.xid
            body = _body(f.replace(**changes) if changes else f, i)
            if how == "unknown key":
                body[30] = "x"
            elif how == "reversed":
                body = dict(reversed(list(body.items())))
            elif how == "null":
                body[11] = None
            elif how == "text id":
                body[2] = "id"
            elif how == "bad type":
                body[11] = 5
            out += _prefixed(cbor2.dumps(body))
        return out

    _both(make)


@pytest.mark.parametrize("compiled", [True, False])
def test_the_block_router_is_off_on_the_pure_python_path(compiled: bool) -> None:
    import os
    import subprocess
    import sys

    check = (
        "from cartridge_runtime import protocol as P\n"
        "import cartridge_runtime.engine._call\n"
        "assert (P.block_router() is None) == PURE\n"
    ).replace("PURE", str(not compiled))
    env = dict(os.environ)
    env.pop("CARTRIDGE_RUNTIME_PURE_PYTHON", None)
    if not compiled:
        env["CARTRIDGE_RUNTIME_PURE_PYTHON"] = "1"
    elif os.environ.get("CARTRIDGE_RUNTIME_PURE_PYTHON") or not BUILT:
        pytest.skip("the C fast paths are not built here, or switched off")
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
