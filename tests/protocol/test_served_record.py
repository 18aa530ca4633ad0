"""A request's record made in one C call (``new_served_request``) is the record
``ServedRequest(...)`` makes: the same slots, the same receiver, its dict in the same order,
and it serves the REQ and the body the same way."""

from __future__ import annotations

import os
from typing import Any

import pytest

from cartridge_runtime.protocol import Frame, FrameType, MessageId, RequestState
from cartridge_runtime.protocol import _cartridge_state as state
from cartridge_runtime.protocol._request_state import BodyReceiver

_speedups: Any
try:
    from cartridge_runtime.protocol import _speedups
except ImportError:  # pragma: no cover - the extension is optional
    _speedups = None

compiled = pytest.mark.skipif(
    _speedups is None or bool(os.environ.get("CARTRIDGE_RUNTIME_PURE_PYTHON")),
    reason="the compiled path is not built or switched off",
)


def _pair(xid: MessageId | None, credit: Any) -> tuple[Any, Any]:
    rid = MessageId.new()
    handler = object()
    made = state.new_served_request(rid, xid, "cap:op=x", "urn:h", handler, "pool", credit)
    plain = state.ServedRequest(rid, xid, "cap:op=x", "urn:h", handler, "pool", credit)
    return made, plain


@pytest.mark.parametrize("credit", [0, 1, 2, 7, 16, 1 << 20, True])
@pytest.mark.parametrize("routed", [False, True])
def test_the_record_is_the_one_the_class_makes(credit: Any, routed: bool) -> None:
    made, plain = _pair(MessageId.new() if routed else None, credit)
    assert type(made) is state.ServedRequest
    for name in state.ServedRequest.__slots__:
        if name != "receiver":
            assert getattr(made, name) == getattr(plain, name), name
    assert type(made.receiver) is BodyReceiver
    assert list(vars(made.receiver).items()) == list(vars(plain.receiver).items())
    assert made.receiver.state is RequestState.EXPECT_REQ
    # Fresh containers per record: nothing shared between two requests.
    other, _ = _pair(None, credit)
    assert made.outputs is not other.outputs and made.peer_ids is not other.peer_ids
    assert made.receiver._streams is not other.receiver._streams


def test_the_record_serves_a_body_as_the_class_does() -> None:
    made, plain = _pair(None, 8)
    rid = made.rid
    body = [
        Frame(frame_type=FrameType.REQ, id=rid, cap="cap:op=x", payload=b""),
        Frame(frame_type=FrameType.STREAM_START, id=rid, stream_id="a", media_urn="media:"),
        Frame(frame_type=FrameType.STREAM_END, id=rid, stream_id="a", chunk_count=0),
        Frame(frame_type=FrameType.END, id=rid),
    ]
    for frame in body:
        assert repr(made.receiver.receive(frame)) == repr(plain.receiver.receive(frame))
    assert made.receiver.state is plain.receiver.state is RequestState.DONE


@compiled
def test_a_credit_that_is_not_an_int_goes_to_the_class() -> None:
    with pytest.raises(TypeError):
        state.new_served_request(MessageId.new(), None, "c", "u", None, "p", "8")


@compiled
def test_registration_refuses_a_record_with_other_slots() -> None:
    class Wider(state.ServedRequest[Any]):
        __slots__ = ("extra",)

    try:
        with pytest.raises(ValueError):
            _speedups.configure_served(Wider, BodyReceiver, None, None, None)
        with pytest.raises(RuntimeError):
            _speedups.new_served(MessageId.new(), None, "c", "u", None, "p", 8)
    finally:
        assert state._compiled_served() is _speedups.new_served
    assert type(state.new_served_request(MessageId.new(), None, "c", "u", None, "p", 8)) is (
        state.ServedRequest
    )


def test_the_pure_python_switch_gives_the_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARTRIDGE_RUNTIME_PURE_PYTHON", "1")
    assert state._compiled_served() is state.ServedRequest


@pytest.mark.parametrize("queued", [False, True])
def test_the_admission_event_is_the_one_the_class_makes(queued: bool) -> None:
    made, _ = _pair(None, 8)
    event = state.new_admitted(made, queued)
    assert type(event) is state.RequestAdmitted
    assert event == state.RequestAdmitted(made, queued)
    assert event.request is made and event.queued is queued
    with pytest.raises(AttributeError):
        event.queued = not queued  # type: ignore[misc]
