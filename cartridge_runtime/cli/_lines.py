"""The one line a command prints for a failure: ``CODE (class): message [arg=URN]``.

A cartridge that failed to start says why in that line: the last line it wrote to stderr is
appended (``(stderr: ...)``, as the conformance kit reports it), so the reason is never a
separate screen away from the error.
"""

from __future__ import annotations

from typing import Any, Final

from ..protocol import ErrorReport

__all__ = ("error_line", "start_failure_line", "last_stderr_line")

#: Characters of a cartridge's last stderr line kept in an error line.
REASON_CHARS: Final = 200


def error_line(report: ErrorReport) -> str:
    """``CODE (class): message [arg=URN]`` on one line, as the ``cartridge`` commands print
    it. A message's own appended stderr tail (``... stderr:`` and the lines after it) is left out."""
    text = report.one_line()
    for cut in (". stderr:", " stderr:"):
        if text.endswith(cut):
            text = text[: -len(cut)]
    if report.arg_urn:
        text += f" arg={report.arg_urn}"
    return text


def last_stderr_line(tail: str) -> str | None:
    """The last non-blank line of a stderr tail (``None``: it had none)."""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:REASON_CHARS] if lines else None


def start_failure_line(error: Any) -> str:
    """The error line of a cartridge that could not start (or died), with the reason it gave
    on stderr when it gave one and the message does not already hold it."""
    line = error_line(error.report)
    reason = last_stderr_line(getattr(error, "stderr_tail", "") or "")
    if reason is not None and reason not in line:
        line += f" (stderr: {reason})"
    return line
