"""Progress, logs and the final status: one set of rules for the request and its outputs."""

from __future__ import annotations

from typing import Any

import pytest

from cartridge_runtime.runtime import OutputError
from cartridge_runtime.runtime._output import OutputSpec, OutputStream
from cartridge_runtime.runtime._reports import report_log, report_progress


class _Reporter:
    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    async def progress(self, fraction: float | None, message: str) -> None:
        self.seen.append(("progress", fraction, message))

    async def log(
        self, level: str, message: str, attribution_class: str, arg_urn: str | None
    ) -> None:
        self.seen.append(("log", level, message, attribution_class, arg_urn))

    async def telemetry(self, level: str, message: str, data: Any) -> None:
        self.seen.append(("telemetry", level, message))

    def finish(self, progress: float, message: str | None) -> None:
        self.seen.append(("finish", progress, message))


@pytest.mark.asyncio
async def test_the_rules_are_applied_once_for_every_reporter() -> None:
    reporter = _Reporter()
    await report_progress(reporter, 1, "half")
    await report_progress(reporter, None, "spinning")
    await report_log(reporter, "info", "hello", "input", "media:x")
    with pytest.raises(OutputError, match="use progress"):
        await report_log(reporter, "progress", "0.5", "internal", None)
    assert reporter.seen == [
        ("progress", 1.0, "half"),
        ("progress", None, "spinning"),
        ("log", "info", "hello", "input", "media:x"),
    ]
    assert isinstance(reporter.seen[0][1], float)


@pytest.mark.asyncio
async def test_an_output_stream_reports_through_the_shared_rules() -> None:
    reporter = _Reporter()
    stream = OutputStream(OutputSpec(media_urn="media:", declared_urn="media:"), None, reporter)  # type: ignore[arg-type]
    await stream.progress(0, "start")
    with pytest.raises(OutputError):
        await stream.log("progress", "no")
    stream.finish(1, "done")
    assert reporter.seen == [("progress", 0.0, "start"), ("finish", 1.0, "done")]
