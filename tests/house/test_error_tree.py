"""The package's one error tree: a root holding the ERR's fields, three sibling branches."""

from __future__ import annotations

import pickle

import pytest

import cartridge_runtime
from cartridge_runtime.engine import CallError, CallTimeout, CartridgeDied, EngineError, NoRoute
from cartridge_runtime.protocol import (
    AttributionClass,
    CartridgeRuntimeError,
    ChecksumMismatchError,
    ErrorCode,
    ErrorReport,
    HandshakeError,
    ProtocolError,
)
from cartridge_runtime.runtime import CartridgeError, MissingInput, OpError


def test_the_three_branches_are_siblings_under_one_root() -> None:
    for branch in (ProtocolError, EngineError, CartridgeError):
        assert issubclass(branch, CartridgeRuntimeError)
    assert not issubclass(EngineError, ProtocolError)
    assert not issubclass(CartridgeError, ProtocolError)
    assert not issubclass(ProtocolError, (EngineError, CartridgeError))
    assert cartridge_runtime.CartridgeRuntimeError is CartridgeRuntimeError
    assert cartridge_runtime.ErrorReport is ErrorReport


def test_the_fields_are_held_once_by_the_root() -> None:
    for branch in (ProtocolError, EngineError, CallError, CartridgeError, OpError):
        for name in ("report", "retryable", "to_err_meta"):
            assert name not in vars(branch), (branch, name)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ProtocolError("bad frame"), ("PROTOCOL_ERROR", "internal", "bad frame", None)),
        (ChecksumMismatchError("sum"), ("HANDLER_ERROR", "internal", "sum", None)),
        (HandshakeError("no"), ("SPAWN_FAILED", "environment", "no", None)),
        (EngineError("misused"), ("PROTOCOL_ERROR", "internal", "misused", None)),
        (NoRoute("none"), ("NO_HANDLER", "environment", "none", None)),
        (CartridgeDied("gone", returncode=1), ("CARTRIDGE_DIED", "environment", "gone", None)),
        (
            CallError("PEER_BAD_INPUT", "input", "bad", "media:a"),
            ("PEER_BAD_INPUT", "input", "bad", "media:a"),
        ),
        (CartridgeError(), ("HANDLER_ERROR", "internal", "CartridgeError", None)),
        (OpError("BAD_PAGE", "page 3", "input"), ("BAD_PAGE", "input", "page 3", None)),
        (
            MissingInput("media:pdf", []),
            (
                "MISSING_INPUT",
                "input",
                "Missing required arg: media:pdf (streams that arrived: none)",
                "media:pdf",
            ),
        ),
    ],
    ids=lambda e: type(e).__name__ if isinstance(e, Exception) else "",
)
def test_every_branch_describes_itself_as_the_one_err_value(
    error: CartridgeRuntimeError, expected: tuple[str, str, str, str | None]
) -> None:
    code, attribution, message, arg_urn = expected
    report = error.report
    assert report == ErrorReport(
        code=code, attribution_class=attribution, message=message, arg_urn=arg_urn
    )
    assert (error.code, error.attribution_class, error.message, error.arg_urn) == expected
    assert error.to_err_meta() == report.to_meta()
    assert error.retryable is report.retryable


def test_known_codes_and_classes_become_enum_members() -> None:
    error = OpError("CANCELLED", "stop", "user")
    assert error.code is ErrorCode.CANCELLED
    assert error.attribution_class is AttributionClass.USER
    assert not error.retryable
    own = OpError("BAD_PAGE", "page 3", "input")
    assert type(own.code) is str and own.code == "BAD_PAGE"


def test_a_call_error_is_made_from_a_report_and_keeps_its_text_forms() -> None:
    report = ErrorReport(code="BAD", attribution_class="input", message="one\ntwo", arg_urn="m:a")
    error = CallError.from_report(report)
    assert type(error) is CallError and error.report == report
    assert str(error) == "BAD (input): one" == error.one_line()
    assert repr(error) == "CallError('BAD', 'input', 'one\\ntwo', 'm:a')"
    assert repr(CallError(ErrorCode.TIMEOUT, "resource", "t")) == (
        "CallError('TIMEOUT', 'resource', 't', None)"
    )
    back = pickle.loads(pickle.dumps(error))
    assert back.report == report


def test_except_protocol_error_no_longer_catches_a_failed_call() -> None:
    with pytest.raises(CallError):
        try:
            raise CallError("HANDLER_ERROR", "internal", "boom")
        except ProtocolError:  # pragma: no cover - the point: not taken
            pytest.fail("a failed call is not a protocol fault")
    with pytest.raises(CartridgeRuntimeError):
        raise CallError("HANDLER_ERROR", "internal", "boom")


def test_an_observed_call_outcome_carries_the_err_value() -> None:
    from cartridge_runtime.engine import CallOutcome

    report = CallTimeout("too long").report
    failed = CallOutcome(error=report, bytes_out=3)
    assert not failed.ok and failed.code is ErrorCode.TIMEOUT
    assert failed.attribution_class is AttributionClass.RESOURCE
    done = CallOutcome(error=None, bytes_out=3)
    assert done.ok and done.code is None and done.attribution_class is None


def test_a_branch_error_is_made_from_a_report() -> None:
    from cartridge_runtime.runtime import PeerCallError

    report = ErrorReport(
        code="PEER_BAD_INPUT", attribution_class="input", message="no", arg_urn="m:a"
    )
    for cls in (PeerCallError, OpError, ProtocolError, EngineError, CallError):
        error = cls.from_report(report)
        assert type(error) is cls and error.report == report


def test_the_tree_has_one_public_home() -> None:
    from cartridge_runtime import errors

    assert errors.CartridgeRuntimeError is CartridgeRuntimeError
    assert errors.ProtocolError is ProtocolError
    assert errors.EngineError is EngineError
    assert errors.CartridgeError is CartridgeError
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), CartridgeRuntimeError)


def test_refused_text_launch_and_telemetry_errors_join_the_tree() -> None:
    from cartridge_runtime.engine import LaunchError
    from cartridge_runtime.errors import DefinitionError
    from cartridge_runtime.machine import MachineError, MachineSourceError
    from cartridge_runtime.manifest import ManifestError
    from cartridge_runtime.protocol import TelemetryError
    from cartridge_runtime.urn import UrnError

    for refused in (UrnError, ManifestError, MachineError, MachineSourceError, TelemetryError):
        assert issubclass(refused, DefinitionError)
        assert issubclass(refused, ValueError)  # still caught where a ValueError was
    assert issubclass(LaunchError, EngineError)
    launch = LaunchError("no such program")
    assert (launch.code, launch.attribution_class, str(launch)) == (
        "SPAWN_FAILED",
        "environment",
        "no such program",
    )
    refused = UrnError("bad urn")
    assert (refused.report.code, refused.report.attribution_class) == ("INVALID_INPUT", "input")
    assert pickle.loads(pickle.dumps(launch)).message == "no such program"


def test_every_public_exception_is_in_the_tree() -> None:
    import importlib

    packages = [
        "cartridge_runtime.protocol",
        "cartridge_runtime.urn",
        "cartridge_runtime.manifest",
        "cartridge_runtime.machine",
        "cartridge_runtime.runtime",
        "cartridge_runtime.engine",
        "cartridge_runtime.planner",
        "cartridge_runtime.discovery",
    ]
    outside = []
    for name in packages:
        module = importlib.import_module(name)
        for public in module.__all__:
            value = getattr(module, public)
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and not issubclass(value, CartridgeRuntimeError)
            ):
                outside.append(f"{name}.{public}")
    assert outside == []
