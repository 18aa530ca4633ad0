"""The one ERR value: read from a frame's meta, written back, and judged for retry."""

from __future__ import annotations

import pytest

from cartridge_runtime.protocol import (
    AttributionClass,
    BodyReceiver,
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
