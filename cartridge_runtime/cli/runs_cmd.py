"""``cartridge runs``, ``cartridge log RUN`` and ``cartridge report RUN``: the run records.

Every ``cartridge run`` writes a run folder (see ``docs/runs.md``) under ``$CARTRIDGE_HOME/runs``
(default ``~/.cache/cartridge/runs``, or ``--runs-dir``). ``runs`` lists the recent ones, ``log``
shows one (its outcome, per-step totals and events; ``--json`` for one JSON object), and
``report`` writes its HTML page. ``RUN`` is a run id, a unique prefix of one, or ``last``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ..engine import (
    RunRecord,
    default_runs_dir,
    list_runs,
    read_events,
    step_totals,
)
from ._app import app
from ._table import columns, human_size
from ._usage import UsageError

__all__ = ("find_run", "reused_from", "write_report")

_RunsDir = Annotated[
    Path | None, typer.Option("--runs-dir", help="The runs folder (default: $CARTRIDGE_HOME/runs).")
]


def find_run(runs_dir: Path, wanted: str) -> RunRecord:
    """The run ``wanted`` names: an id, a unique prefix of one, or ``last``.

    :raises UsageError: none, or several, match.
    """
    runs = list_runs(runs_dir)
    if not runs:
        raise UsageError(f"no runs recorded in {runs_dir}")
    if wanted == "last":
        return runs[0]
    exact = [r for r in runs if r.id == wanted]
    if exact:
        return exact[0]
    found = [r for r in runs if r.id.startswith(wanted)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageError(f"no run {wanted!r} in {runs_dir} (see `cartridge runs`)")
    raise UsageError(f"{wanted!r} names {len(found)} runs; give more of the id")


def _when(started: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started))


def _summary(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id,
        "machine": run.machine,
        "started": run.started,
        "seconds": run.seconds,
        "status": run.status,
    }


def _fail(line: str) -> typer.Exit:
    print(f"error: {line}", file=sys.stderr)
    return typer.Exit(2)


@app.command("runs")
def runs_command(
    runs_dir: _RunsDir = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most N runs.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List recent machine runs: id, machine, start, duration, status."""
    folder = runs_dir or default_runs_dir()
    runs = list_runs(folder)[: max(limit, 0)]
    if as_json:
        for run in runs:
            print(json.dumps(_summary(run)))
        return
    if not runs:
        print(f"no runs recorded in {folder}", file=sys.stderr)
        return
    print(f"{'id':<24} {'started (UTC)':<19} {'duration':>9}  {'status':<11} machine")
    for run in runs:
        seconds = f"{run.seconds:.2f}s" if run.seconds is not None else "-"
        print(f"{run.id:<24} {_when(run.started):<19} {seconds:>9}  {run.status:<11} {run.machine}")


@app.command("log")
def log_command(
    run: Annotated[str, typer.Argument(help="A run id, a prefix of one, or 'last'.")],
    runs_dir: _RunsDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="The record as one JSON object.")] = False,
    events: Annotated[bool, typer.Option("--events", help="List every event too.")] = False,
) -> None:
    """Show one run: what it was given, how each step went, how it ended."""
    folder = runs_dir or default_runs_dir()
    try:
        record = find_run(folder, run)
    except UsageError as error:
        raise _fail(str(error)) from None
    log = read_events(record.folder)
    totals = step_totals(log)
    if as_json:
        print(json.dumps({**record.facts, "status": record.status, "steps": totals, "events": log},
                         default=str))  # fmt: skip
        return
    facts = record.facts
    seconds = f"{record.seconds:.3f} s" if record.seconds is not None else "not ended"
    print(f"run {record.id}: {record.status} ({seconds})")
    print(f"machine: {record.machine}  started {_when(record.started)} UTC")
    if facts.get("cache"):
        print(f"step cache: {facts['cache']}")
    for name, given in facts.get("inputs", {}).items():
        digest = str(given.get("sha256", ""))[:16]
        size = human_size(int(given["size"])) if given.get("size") is not None else "? bytes"
        where = f" from {given['path']}" if given.get("path") else ""
        print(f"input {name}: {size}{where} {digest}".rstrip())
    rows = [
        (name, str(t["calls"]), str(t["items"]), str(t["hits"]), str(t["misses"]),
         str(t["skipped"]), human_size(t["bytes_in"]), human_size(t["bytes_out"]),
         f"{t['seconds']:.3f}")
        for name, t in totals.items()
    ]  # fmt: skip
    head = ("step", "calls", "map items", "cache hits", "misses", "skipped", "read", "written",
            "seconds")  # fmt: skip
    if rows:
        print("\n".join(columns(rows, head, right=set(range(1, len(head))))))
    for e in log:
        if e.get("event") == "StepInterrupted":
            items = f" (items {', '.join(map(str, e['items']))})" if e.get("items") else ""
            print(f"interrupted in step {e['step']}{items} after {e.get('seconds', 0):.3f} s: "
                  f"{human_size(int(e.get('bytes_in', 0)))} read, "
                  f"{human_size(int(e.get('bytes_out', 0)))} written")  # fmt: skip
    failure = facts.get("error") or facts.get("failure")
    if failure:
        where = f"step {failure.get('step')}" if failure.get("step") else "the run"
        if failure.get("item") is not None:
            where += f" item {failure['item']}"
        print(f"failed at {where}: {failure.get('code')} ({failure.get('class')}): "
              f"{failure.get('message')}")  # fmt: skip
    if record.status == "stale":
        print("stale: the process that ran it is gone (killed outright); it never ended")
    if events:
        for e in log:
            fields = " ".join(f"{k}={v}" for k, v in e.items() if k not in ("t", "event"))
            print(f"{e['t']:>10.4f} {e['event']} {fields}")


def reused_from(record: RunRecord, events: list[dict[str, Any]]) -> dict[str, str]:
    """By step: the earlier run (of the same machine, over the same step cache) that stored
    the call a cache hit of ``record`` replayed, the most recent one that did."""
    hits = {
        e["step"] for e in events if e.get("event") == "StepFinished" and e.get("cache") == "hit"
    }
    found: dict[str, str] = {}
    if not hits:
        return found
    same = ("machine_sha256", "cache")
    for earlier in list_runs(record.folder.parent):  # the most recent first
        if earlier.started > record.started or earlier.id == record.id:
            continue
        if any(earlier.facts.get(k) != record.facts.get(k) for k in same):
            continue
        for e in read_events(earlier.folder):
            step = str(e.get("step"))
            stored = e.get("event") == "StepFinished" and e.get("cache") == "miss"
            if stored and step in hits and step not in found:
                found[step] = earlier.id
        if len(found) == len(hits):
            break
    return found


def write_report(record: RunRecord, path: Path) -> None:
    """Write ``record``'s HTML report to ``path`` (a temporary file renamed)."""
    from .report_html import render_report

    try:
        text = (record.folder / "machine.txt").read_text(encoding="utf-8")
    except OSError:
        text = ""
    events = read_events(record.folder)
    page = render_report(record, events, text, reused_from(record, events))
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(page, encoding="utf-8")
    temp.replace(path)


@app.command("report")
def report_command(
    run: Annotated[str, typer.Argument(help="A run id, a prefix of one, or 'last'.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="The HTML file (default: RUN.html).")
    ] = None,
    runs_dir: _RunsDir = None,
) -> None:
    """Write one run's HTML report: graph, timeline, per-step totals, errors."""
    folder = runs_dir or default_runs_dir()
    try:
        record = find_run(folder, run)
    except UsageError as error:
        raise _fail(str(error)) from None
    path = output or Path(f"{record.id}.html")
    try:
        write_report(record, path)
    except OSError as error:
        raise _fail(f"cannot write {path}: {error.strerror or error}") from None
    print(path)
