"""What ``cartridge run`` shows while and after it runs: the live table of steps on a
terminal, and the summary of every step at the end (whole numbers, never cut)."""

from __future__ import annotations

import sys
from typing import Any

from ._table import columns, human_size


class RunView:
    """The live table of steps (a terminal only) and the summary."""

    def __init__(self, steps: list[str], live: bool) -> None:
        self.state = {name: "waiting" for name in steps}
        self.runs = dict.fromkeys(steps, 0)
        self.items: dict[str, int] = {}
        self.live: Any = None
        if live:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(self.table(), console=Console(stderr=True), transient=True)
            self.live.start()

    def table(self) -> Any:
        from rich.table import Table

        table = Table(title="machine run")
        for column in ("step", "state", "runs", "items"):
            table.add_column(column)
        for name, state in self.state.items():
            table.add_row(name, state, str(self.runs[name]), str(self.items.get(name, "")))
        return table

    def on(self, event: Any) -> None:
        from ..engine import ItemStarted, StepFinished, StepStarted

        if isinstance(event, StepStarted) and event.step in self.state:
            self.state[event.step] = "running"
        elif isinstance(event, StepFinished) and event.step in self.state:
            self.runs[event.step] += 1
            self.state[event.step] = "skipped" if event.outcome == "skipped" else "done"
        elif isinstance(event, ItemStarted):
            self.items[event.map] = self.items.get(event.map, 0) + 1
        if self.live is not None:
            self.live.update(self.table())

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()


#: The summary's columns and what each counts (the note printed under the table).
SUMMARY_HEAD = ("step", "calls", "map items", "cache hits", "skipped", "absent", "read",
                "written", "seconds")  # fmt: skip
SUMMARY_NOTE = (
    "calls: calls made (retries included); map items: items the step ran on in a map; "
    "read/written: bytes the step took in and gave out (a cache hit reads its input to find "
    "the stored call, and gives out what was stored)"
)


def summary_lines(result: Any) -> list[str]:
    """The run's summary: whole numbers and human sizes, one line per step, never cut."""
    rows = [
        (
            name,
            str(report.calls),
            str(report.items),
            str(report.cache_hits),
            str(report.skipped),
            str(report.absent),
            human_size(report.bytes_in),
            human_size(report.bytes_out),
            f"{report.seconds:.2f}",
        )
        for name, report in result.steps.items()
    ]
    table = columns(rows, SUMMARY_HEAD, right=set(range(1, len(SUMMARY_HEAD))))
    return [f"machine run: {result.seconds:.2f} s", *table, SUMMARY_NOTE]


def write_summary(result: Any) -> None:
    """Print the run's summary to stderr."""
    sys.stderr.write("\n".join(summary_lines(result)) + "\n")
