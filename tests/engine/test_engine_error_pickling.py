"""Engine errors cross process boundaries (a Ray actor's, a worker pool's): each survives a
``pickle`` round trip with its class, code, attribution class, message, ``arg_urn`` and the
fields of its own."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from cartridge_runtime.engine import (
    CallError,
    CallTimeout,
    CartridgeDied,
    CartridgeNotFound,
    CartridgeUnhealthy,
    EngineClosed,
    EngineError,
    MachineInputError,
    MachineRunError,
    NoRoute,
    SpawnFailed,
)

CAUSE = CallError("HANDLER_ERROR", "input", "bad number", "media:number")

ERRORS: list[tuple[EngineError, dict[str, Any]]] = [
    (EngineError("misused"), {}),
    (CAUSE, {}),
    (CartridgeDied("died (exit status 3)", returncode=3, stderr_tail="boom"), {"returncode": 3}),
    (CartridgeUnhealthy("no heartbeat", returncode=-9, stderr_tail=""), {"returncode": -9}),
    (
        SpawnFailed("bad manifest", step="manifest", rule="RULE3", stderr_tail="t"),
        {"rule": "RULE3"},
    ),
    (CartridgeNotFound("/no/such.py"), {"path": "/no/such.py", "step": "spawn"}),
    (NoRoute("no cartridge handles cap:x"), {}),
    (CallTimeout("took too long"), {}),
    (EngineClosed(), {}),
    (MachineRunError("step", "cap:op=x", 4, CAUSE), {"step": "step", "item": 4}),
    (MachineInputError("doc", "missing"), {"node": "doc", "reason": "missing"}),
]


@pytest.mark.parametrize(("error", "fields"), ERRORS, ids=lambda e: type(e).__name__)
def test_an_engine_error_survives_a_pickle_round_trip(
    error: EngineError, fields: dict[str, Any]
) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert back.code == error.code
    assert back.attribution_class == error.attribution_class
    assert back.message == error.message and back.arg_urn == error.arg_urn
    assert str(back) == str(error) and repr(back) == repr(error)
    for name, value in fields.items():
        assert getattr(back, name) == value


def test_a_machine_run_error_keeps_its_cause_and_arg_urn() -> None:
    back = pickle.loads(pickle.dumps(MachineRunError("parse", "cap:op=parse", None, CAUSE)))
    assert back.arg_urn == "media:number" and back.code == "HANDLER_ERROR"
    assert type(back.cause) is CallError and back.cause.message == "bad number"


def test_a_pickled_error_can_still_be_raised_and_caught_by_its_class() -> None:
    back = pickle.loads(pickle.dumps(CartridgeDied("gone", returncode=1)))
    with pytest.raises(CallError) as info:
        raise back
    assert info.value.retryable and info.value.returncode == 1
