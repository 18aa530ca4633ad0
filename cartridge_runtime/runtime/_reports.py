"""Progress, logs and the final status of a request, as a handler reports them: the rules
:class:`~cartridge_runtime.runtime.Request` and every
:class:`~cartridge_runtime.runtime.OutputStream` share, told once.

Both hand the work to the request's :class:`Reporter` (frames on the wire, or a
terminal in CLI mode); none of these waits for credit.
"""

from __future__ import annotations

from typing import Any, Protocol

from ._errors import OutputError

__all__ = ("Reporter", "report_progress", "report_log", "report_final")


class Reporter(Protocol):
    """Where progress, logs and the final status of a request go (never blocks on credit)."""

    async def progress(self, fraction: float | None, message: str) -> None: ...
    async def log(
        self, level: str, message: str, attribution_class: str, arg_urn: str | None
    ) -> None: ...
    async def telemetry(self, level: str, message: str, data: Any) -> None: ...
    def finish(self, progress: float, message: str | None) -> None: ...


async def report_progress(reporter: Reporter, fraction: float | None, message: str) -> None:
    """Progress in 0..1; ``None`` is indeterminate (work goes on, how far is unknown)."""
    await reporter.progress(None if fraction is None else float(fraction), message)


async def report_log(
    reporter: Reporter, level: str, message: str, attribution_class: str, arg_urn: str | None
) -> None:
    """A LOG of ``level`` (``info``, ``warn``...).

    :raises OutputError: ``level`` is ``progress``, which :func:`report_progress` sends.
    """
    if level == "progress":
        raise OutputError("use progress() for progress reports")
    await reporter.log(level, message, str(attribution_class), arg_urn)


def report_final(reporter: Reporter, progress: float, message: str | None) -> None:
    """The progress and message the request's final END carries."""
    reporter.finish(float(progress), message)
