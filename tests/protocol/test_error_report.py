"""The one ERR value: read from a frame's meta, written back, and judged for retry."""

from __future__ import annotations

import pytest

from cartridge_runtime.protocol import (
    AttributionClass,
    BodyReceiver,
    ErrorCode,
    ErrorReport,
    FrameType,
    MessageId,
    decode_frame,
    encode_frame,
    frames,
)


def test_a_report_survives_the_wire_both_ways() -> None:
    report = ErrorReport(
        code="BAD_INPUT", attribution_class="input", message="no such word", arg_urn="media:txt"
    )
    meta = report.to_meta()
    frame = frames.err(
        MessageId(7), report.code, report.message, report.attribution_class, arg_urn="media:txt"
    )
    assert frame.meta == meta
    decoded = decode_frame(encode_frame(frame))
    assert decoded.frame_type is FrameType.ERR
    assert ErrorReport.from_meta(decoded.meta) == report


def test_missing_keys_read_as_empty_and_internal() -> None:
    report = ErrorReport.from_meta({})
    assert report == ErrorReport(code="", attribution_class="internal", message="")
    assert report.to_meta()["message"] == ""
    assert ErrorReport.from_meta(None) == report


@pytest.mark.parametrize(
    ("word", "retryable"),
    [
        ("input", False),
        ("user", False),
        ("resource", True),
        ("environment", True),
        ("internal", True),
        ("weird", True),
    ],
)
def test_retry_follows_the_attribution_class(word: str, retryable: bool) -> None:
    report = ErrorReport(code="X", attribution_class=word, message="m")
    assert report.retryable is retryable
    expected = AttributionClass(word) if word != "weird" else AttributionClass.INTERNAL
    assert report.attribution is expected


def test_the_receiver_yields_the_report_for_an_err() -> None:
    receiver = BodyReceiver(MessageId(1), initial_credit=4, expect_req=True)
    receiver.receive(frames.req(MessageId(1), "cap:effect=none"))
    (event,) = receiver.receive(frames.err(MessageId(1), "OOPS", "it broke", "resource"))
    assert event == ErrorReport(code="OOPS", attribution_class="resource", message="it broke")


def test_message_falls_back_to_the_code() -> None:
    assert ErrorReport(code="C", attribution_class="user", message="").to_meta()["message"] == "C"


def test_known_codes_and_classes_are_held_as_enums_unknown_ones_as_text() -> None:
    report = ErrorReport(code="CANCELLED", attribution_class="user", message="m")
    assert report.code is ErrorCode.CANCELLED
    assert report.attribution_class is AttributionClass.USER
    odd = ErrorReport(code="BAD_PAGE", attribution_class="weird", message="m")
    assert type(odd.code) is str and type(odd.attribution_class) is str
    assert odd.to_meta() == {"code": "BAD_PAGE", "attribution_class": "weird", "message": "m"}
    assert all(type(v) is str for v in report.to_meta().values())


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (None, ("CANCELLED", "internal", "Request cancelled")),
        ({}, ("CANCELLED", "internal", "Request cancelled")),
        (
            {"code": "CANCELLED", "attribution_class": "user", "message": "Cancelled by user"},
            ("CANCELLED", "user", "Cancelled by user"),
        ),
        (
            {"code": "CANCELLED", "attribution_class": "user"},
            ("CANCELLED", "user", "Request cancelled"),
        ),
        (
            {"code": "ABORTED", "attribution_class": "resource", "message": "disk gone"},
            ("ABORTED", "resource", "Request aborted by the host: disk gone"),
        ),
        (
            {"code": "ABORTED_COLLATERAL", "attribution_class": "input", "message": "x"},
            (
                "ABORTED_COLLATERAL",
                "input",
                "Request aborted as collateral of a failure elsewhere in the run: x",
            ),
        ),
        ({"code": "MY_STOP", "message": "stop"}, ("MY_STOP", "internal", "stop")),
        ({"code": "MY_STOP", "attribution_class": "nonsense"}, ("MY_STOP", "internal", "MY_STOP")),
    ],
)
def test_a_cancel_ends_the_request_with_the_err_of_the_table(
    meta: dict[str, str] | None, expected: tuple[str, str, str]
) -> None:
    report = ErrorReport.for_cancel(meta)
    assert (report.code, report.attribution_class, report.message) == expected
    assert report.arg_urn is None


def test_for_sending_replaces_a_class_err1_does_not_allow() -> None:
    good = ErrorReport(code="X", attribution_class="input", message="m")
    assert good.for_sending() is good
    odd = ErrorReport(code="X", attribution_class="Input", message="m", arg_urn="media:a")
    assert odd.for_sending() == ErrorReport(
        code="X", attribution_class="internal", message="m", arg_urn="media:a"
    )


def test_err_for_writes_the_report_and_one_line_reads_it() -> None:
    report = ErrorReport(code="BAD", attribution_class="input", message="first\nsecond")
    frame = frames.err_for(MessageId(3), report, xid=MessageId(9))
    assert frame.frame_type is FrameType.ERR and frame.routing_id == MessageId(9)
    assert frame.meta == frames.err(MessageId(3), "BAD", "first\nsecond", "input").meta
    assert report.one_line() == "BAD (input): first"
