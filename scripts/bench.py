#!/usr/bin/env python3
"""Side-by-side benchmark of this project against capdag 1.524.58 (issue 7).

Pairs (driver → cartridge):

  (a) physical reference: Python writing through ``cat`` and reading back
  (b) capdag's ``CartridgeHost`` → a capdag cartridge (the reference pair)
  (c) our engine → our ``cartridges/interop.py``
  (d) our engine → the capdag cartridge
  (e) capdag's ``CartridgeHost`` → our interop cartridge
  (f) the checksum floor (echo only): a bare echo through pipes that computes the FNV-1a 64
      checksums a Bifaci echo must compute (sender, cartridge, receiver) and nothing else:
      the part of the echo's cost no implementation of the protocol can avoid

Metrics: echo throughput (MB/s, 10^6 bytes), small ``double`` calls per second one at
a time and with 16 in flight, cold start (spawn to first result, ms, median) and the
peak RSS (VmHWM) of the driver (engine/host) process and of the cartridge process
during a large echo. Each (pair, metric) runs in its own worker process
(``scripts/_bench_worker.py``) so RSS and imports are isolated.

The reference pairs run at a few MB/s and about 24 calls/s, so the pairs that
involve capdag (b, d, e) use smaller sizes; the table says where. Targets are
printed as met / missed and never fail the run; a measurement that could not be
taken does (exit status 1).

Echo and the call rates run ``--repeat`` times (default 3) in interleaved rounds and the
median run is reported, because this kind of machine drifts by tens of percent.

Usage: ``scripts/bench.py [--quick] [--json FILE] [--repeat N] [--echo-mib N] [--rss-mib N]
[--pairs abcdef]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import PAIR_METRICS, PAIRS, RESULT_MARK, ROOT, SCRIPTS, venv_env

MIB = 1024 * 1024
WORKER = SCRIPTS / "_bench_worker.py"
#: Pairs with a capdag side: measured at reduced sizes (the reference is slow).
SLOW_PAIRS = frozenset("bde")

#: (row key, worker metric, result field, label, unit, higher is better)
ROWS: tuple[tuple[str, str, str, str, str, bool], ...] = (
    ("echo_mb_s", "echo", "mb_s", "echo throughput", "MB/s", True),
    ("seq_calls_s", "seq", "calls_s", "small calls, sequential", "calls/s", True),
    ("par_calls_s", "par", "calls_s", "small calls, 16 in flight", "calls/s", True),
    ("cold_ms", "cold", "ms", "cold start (spawn→1st result)", "ms", False),
    ("rss_driver_mib", "rss", "driver_mib", "peak RSS, engine/host proc.", "MiB", False),
    ("rss_cartridge_mib", "rss", "cartridge_mib", "peak RSS, cartridge proc.", "MiB", False),
)
ROW_KEYS = tuple(row[0] for row in ROWS)


def _plan(args: argparse.Namespace) -> dict[str, dict[str, list[str]]]:
    """Worker options per pair and metric (sizes scaled down for the slow pairs)."""
    if args.quick:
        fast = {"echo": 1 * MIB, "rss": 2 * MIB, "seq": 8, "par": 32, "reps": 1}
        slow = dict(fast)
    else:
        fast = {
            "echo": args.echo_mib * MIB,
            "rss": args.rss_mib * MIB,
            "seq": args.calls,
            "par": args.calls * 2,
            "reps": 3,
        }
        slow = {
            "echo": min(fast["echo"], args.slow_echo_mib * MIB),
            "rss": min(fast["rss"], args.slow_rss_mib * MIB),
            "seq": min(fast["seq"], args.slow_calls),
            "par": min(fast["par"], args.slow_calls * 2),
            "reps": 3,
        }
    plan: dict[str, dict[str, list[str]]] = {}
    for pair in args.pairs:
        sizes = slow if pair in SLOW_PAIRS else fast
        if pair == "d" and not args.quick:
            # our engine → capdag cartridge: the cartridge's pure-Python checksum bounds
            # echo, but its call rate is far above the capdag host's.
            sizes = dict(sizes, seq=min(fast["seq"], 400), par=min(fast["par"], 800))
        options = {
            "echo": ["--bytes", str(sizes["echo"])],
            "seq": ["--calls", str(sizes["seq"])],
            "par": ["--calls", str(sizes["par"]), "--inflight", "16"],
            "cold": ["--reps", str(sizes["reps"])],
            "rss": ["--bytes", str(sizes["rss"])],
        }
        only = PAIR_METRICS.get(pair)
        plan[pair] = {m: o for m, o in options.items() if only is None or m in only}
    return plan


#: Metrics measured ``--repeat`` times (the median run is reported), and the figure that
#: orders their runs.
REPEATED = {"echo": "mb_s", "seq": "calls_s", "par": "calls_s"}


def median_run(metric: str, group: list[dict[str, Any]]) -> dict[str, Any]:
    """The run to report among repeated runs of one measurement: the one with the median
    figure (the lower middle one for an even count), with every run's figure attached as
    ``runs``. A failed run makes the measurement failed."""
    failed = [r for r in group if "error" in r]
    if failed:
        return failed[0]
    field = REPEATED.get(metric)
    if field is None or len(group) == 1:
        return group[0]
    ordered = sorted(group, key=lambda r: float(r[field]))
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["runs"] = [r[field] for r in group]
    return chosen


def _run_worker(pair: str, metric: str, options: list[str], timeout: float) -> dict[str, Any]:
    """Run one measurement; a failure is returned as ``{"error": ...}``."""
    cmd = [sys.executable, str(WORKER), pair, metric, *options]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=venv_env()
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s"}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return dict(json.loads(line[len(RESULT_MARK) :]))
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def _size_note(metric: str, result: dict[str, Any]) -> str:
    if metric in ("echo", "rss") and "bytes" in result:
        return f"{result['bytes'] / MIB:g} MiB"
    if metric in ("seq", "par") and "calls" in result:
        return f"{result['calls']} calls"
    if metric == "cold" and "samples_ms" in result:
        return f"median of {len(result['samples_ms'])}"
    return ""


def _cpu_note(metric: str, result: dict[str, Any]) -> str:
    """CPU of driver + cartridge per unit of work (robust when the machine is busy)."""
    drv, cart = result.get("cpu_driver_s"), result.get("cpu_cartridge_s")
    if drv is None or cart is None:
        return ""
    if metric in ("echo", "rss") and result.get("bytes"):
        per = result["bytes"] / 1e6
        return f"{1000 * drv / per:.1f}+{1000 * cart / per:.1f} ms/MB"
    if metric in ("seq", "par") and result.get("calls"):
        per = result["calls"]
        return f"{1000 * drv / per:.2f}+{1000 * cart / per:.2f} ms/call"
    return ""


def _rows(results: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per (metric row, pair) with the value and its ratios to (b) and (a)."""
    rows: list[dict[str, Any]] = []
    for key, metric, field, label, unit, higher in ROWS:
        ref_b = results.get("b", {}).get(metric, {}).get(field)
        ref_a = results.get("a", {}).get(metric, {}).get(field)
        for pair, per_metric in results.items():
            if metric not in per_metric:
                continue  # not defined for this pair (the floor measures echo only)
            result = per_metric[metric]
            value = result.get(field)
            rows.append(
                {
                    "row": key,
                    "label": label,
                    "unit": unit,
                    "higher_is_better": higher,
                    "pair": pair,
                    "value": value,
                    "ratio_b": value / ref_b if value is not None and ref_b else None,
                    "ratio_a": value / ref_a if value is not None and ref_a else None,
                    "size": _size_note(metric, result),
                    "cpu": _cpu_note(metric, result),
                    "error": result.get("error"),
                }
            )
    return rows


def _targets(results: dict[str, dict[str, dict[str, Any]]], rss_bytes: int) -> list[dict[str, Any]]:
    """The issue's targets, each evaluated as met / missed (None when not measurable)."""

    def get(pair: str, metric: str, field: str) -> float | None:
        value = results.get(pair, {}).get(metric, {}).get(field)
        return float(value) if value is not None else None

    targets: list[dict[str, Any]] = []

    def add(name: str, value: float | None, ref: float | None, factor: float, higher: bool) -> None:
        if value is None or ref is None:
            met, detail = None, "not measured"
        elif higher:
            met = value >= factor * ref
            detail = (
                f"{value:.4g} vs {factor:g} x {ref:.4g} = {factor * ref:.4g} ({value / ref:.3g}x)"
            )
        else:
            met = value <= factor * ref
            detail = f"{value:.4g} vs {factor:g} x {ref:.4g} = {factor * ref:.4g}"
        targets.append({"target": name, "met": met, "detail": detail})

    add("echo (c) ≥ 40 x (b)", get("c", "echo", "mb_s"), get("b", "echo", "mb_s"), 40, True)
    add("echo (c) ≥ 30% of (a)", get("c", "echo", "mb_s"), get("a", "echo", "mb_s"), 0.3, True)
    floor, cat = get("f", "echo", "mb_s"), get("a", "echo", "mb_s")
    if floor is not None and cat is not None:
        targets[-1]["detail"] += (
            f"; the checksum floor (f) itself reaches {floor:.4g} = {100 * floor / cat:.0f}% of (a)"
        )
    ours = get("c", "echo", "mb_s")
    if floor is not None and ours is not None:
        targets[-1]["detail"] += f", and (c) = {100 * ours / floor:.0f}% of (f)"
    add(
        "sequential calls (c) ≥ 100 x (b)",
        get("c", "seq", "calls_s"),
        get("b", "seq", "calls_s"),
        100,
        True,
    )
    targets[-1]["detail"] += _rounds(results, "seq")
    add(
        "16 in flight (c) ≥ 200 x (b)",
        get("c", "par", "calls_s"),
        get("b", "par", "calls_s"),
        200,
        True,
    )
    targets[-1]["detail"] += _rounds(results, "par")
    add("cold start (c) ≤ (b)", get("c", "cold", "ms"), get("b", "cold", "ms"), 1, False)
    # Peak RSS of every process of ours: both of (c), the engine of (d), the cartridge of (e).
    for pair, field, who in (
        ("c", "driver_mib", "engine"),
        ("c", "cartridge_mib", "interop cartridge"),
        ("d", "driver_mib", "engine"),
        ("e", "cartridge_mib", "interop cartridge"),
    ):
        value = get(pair, "rss", field)
        size = results.get(pair, {}).get("rss", {}).get("bytes")
        at = f" at {size / MIB:g} MiB" if size else ""
        scaled = " (scaled down)" if size and size < rss_bytes else ""
        name = f"peak RSS ({pair}) {who} < 100 MiB{at}{scaled}"
        if value is None:
            targets.append({"target": name, "met": None, "detail": "not measured"})
        else:
            targets.append({"target": name, "met": value < 100, "detail": f"{value:.1f} MiB"})
    for pair in ("e", "d"):
        for metric, field, label, higher in (
            ("echo", "mb_s", "echo", True),
            ("seq", "calls_s", "sequential calls", True),
            ("par", "calls_s", "16 in flight", True),
            ("cold", "ms", "cold start", False),
        ):
            add(
                f"{label} ({pair}) {'≥' if higher else '≤'} (b)",
                get(pair, metric, field),
                get("b", metric, field),
                1,
                higher,
            )
            side = _slow_side(pair, metric, results.get(pair, {}).get(metric, {}))
            if side:
                targets[-1]["detail"] += f"; {side}"
    return targets


def _rounds(results: dict[str, dict[str, dict[str, Any]]], metric: str) -> str:
    """Each round's figure of (c), with (a)'s in the same round: the median alone hides how
    much a drifting machine moved during the run."""
    ours = results.get("c", {}).get(metric, {}).get("runs")
    cat = results.get("a", {}).get(metric, {}).get("runs")
    if not ours or len(ours) < 2:
        return ""
    text = " / ".join(f"{v:,.0f}" for v in ours)
    if cat and len(cat) == len(ours):
        text += " (with (a) at " + " / ".join(f"{v:,.0f}" for v in cat) + ")"
    return f"; rounds {text}"


def _slow_side(pair: str, metric: str, result: dict[str, Any]) -> str:
    """Which side of a mixed pair did the work: CPU of our side against capdag's side, per
    MB or per call (a slow side that waits, like a polling loop, shows in wall time only)."""
    drv, cart = result.get("cpu_driver_s"), result.get("cpu_cartridge_s")
    if drv is None or cart is None:
        return ""
    if metric == "echo" and result.get("bytes"):
        per, unit = result["bytes"] / 1e6, "ms/MB"
    elif metric in ("seq", "par") and result.get("calls"):
        per, unit = result["calls"], "ms/call"
    else:
        return ""
    ours, theirs = (drv, cart) if pair == "d" else (cart, drv)
    return f"CPU ours {1000 * ours / per:.2f} vs capdag's {1000 * theirs / per:.2f} {unit}"


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _fmt_ratio(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f}x"
    if value >= 1:
        return f"{value:.1f}x"
    return f"{value:.3g}x"


def _print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(120, Console().width))
    table = Table(
        title=f"Bifaci v6 benchmark — {report['date']} — {report['machine']['summary']}",
        show_lines=False,
    )
    for column, justify in (
        ("metric", "left"),
        ("pair", "left"),
        ("value", "right"),
        ("unit", "left"),
        ("vs (b)", "right"),
        ("vs (a)", "right"),
        ("size", "left"),
        ("CPU driver+cartridge", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    last = None
    for row in report["rows"]:
        if last is not None and row["row"] != last:
            table.add_section()
        label = row["label"] + (" ↑" if row["higher_is_better"] else " ↓")
        title = PAIRS[row["pair"]].title
        value = _fmt(row["value"]) if row["error"] is None else "[red]error[/red]"
        table.add_row(
            label if row["row"] != last else "",
            f"({row['pair']}) {title}",
            value,
            row["unit"],
            _fmt_ratio(row["ratio_b"]),
            _fmt_ratio(row["ratio_a"]),
            row["size"] or "",
            row["cpu"] if row["row"] != "rss_cartridge_mib" else "",
        )
        last = row["row"]
    console.print(table)
    for note in report["notes"]:
        console.print(f"[dim]note:[/dim] {note}")
    targets = Table(title="Targets (informational; never a failure)")
    targets.add_column("target")
    targets.add_column("status")
    targets.add_column("detail")
    for target in report["targets"]:
        status = {True: "[green]met[/green]", False: "[red]missed[/red]"}.get(
            target["met"], "[yellow]n/a[/yellow]"
        )
        targets.add_row(target["target"], status, target["detail"])
    console.print(targets)
    errors = [
        f"({pair}) {metric}: {result['error']}"
        for pair, per_metric in report["results"].items()
        for metric, result in per_metric.items()
        if "error" in result
    ]
    for error in errors:
        console.print(f"[red]measurement failed[/red] {error}")


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cores = os.cpu_count() or 0
    summary = f"{cores} cores, {cpu}, Python {platform.python_version()}, {platform.system()}"
    return {
        "cores": cores,
        "cpu": cpu,
        "python": platform.python_version(),
        "system": platform.platform(),
        "summary": summary,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Side-by-side Bifaci v6 benchmark against capdag 1.524.58."
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--echo-mib", type=int, default=64, help="echo size (default 64)")
    parser.add_argument(
        "--rss-mib", type=int, default=1024, help="echo size for the peak-RSS run (default 1024)"
    )
    parser.add_argument(
        "--calls",
        type=int,
        default=2000,
        help="sequential small calls (twice that with 16 in flight)",
    )
    parser.add_argument(
        "--slow-echo-mib",
        type=int,
        default=16,
        help="echo size for pairs with a capdag side (default 16)",
    )
    parser.add_argument(
        "--slow-rss-mib",
        type=int,
        default=64,
        help="peak-RSS echo size for pairs with a capdag side (default 64)",
    )
    parser.add_argument(
        "--slow-calls",
        type=int,
        default=48,
        help="sequential calls through the capdag host (default 48)",
    )
    parser.add_argument("--pairs", default="abcdef", help="which pairs to run (default abcdef)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="measurements run at once (default 1; 2 with --quick). More than "
        "1 skews the figures: use it for smoke tests only",
    )
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds allowed per measurement process"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="runs of each throughput and call-rate measurement, in interleaved rounds; the "
        "table shows the median run (default 3; 1 with --quick)",
    )
    args = parser.parse_args(argv)
    args.pairs = [p for p in args.pairs if p in PAIRS]

    plan = _plan(args)
    # Byte-compile our package first, as pip does when it installs one: otherwise, with
    # bytecode caching off (PYTHONDONTWRITEBYTECODE) and an editable install, every process
    # of ours would compile it again and cold start would measure the compiler.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "cartridge_runtime")], check=False
    )
    load_start = os.getloadavg()
    cpu_start = _cpu_times()
    jobs = args.jobs if args.jobs is not None else (2 if args.quick else 1)
    started = time.monotonic()
    repeat = max(1, args.repeat if args.repeat is not None else (1 if args.quick else 3))
    # Round r runs every repeated measurement once, so a slow spell of the machine hits all
    # pairs alike instead of one pair's runs; cold start (already a median of its own
    # repetitions) and peak RSS (not a speed) run once, in the first round.
    tasks = [
        (pair, metric, options)
        for r in range(repeat)
        for pair in args.pairs
        for metric, options in plan[pair].items()
        if r == 0 or metric in REPEATED
    ]

    def measure(task: tuple[str, str, list[str]]) -> dict[str, Any]:
        pair, metric, options = task
        t0 = time.monotonic()
        result = _run_worker(pair, metric, options, args.timeout)
        status = "error" if "error" in result else "ok"
        print(
            f"  ({pair}) {metric:5s} {status} in {time.monotonic() - t0:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        return result

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        measured = list(pool.map(measure, tasks))
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for (pair, metric, _options), result in zip(tasks, measured, strict=True):
        runs.setdefault((pair, metric), []).append(result)
    results: dict[str, dict[str, dict[str, Any]]] = {pair: {} for pair in args.pairs}
    for (pair, metric), group in runs.items():
        results[pair][metric] = median_run(metric, group)

    notes = []
    if not args.quick:
        notes.append(
            f"pairs with a capdag side (b, d, e) are scaled down: echo "
            f"{min(args.echo_mib, args.slow_echo_mib)} MiB instead of {args.echo_mib}, peak-RSS "
            f"echo {min(args.rss_mib, args.slow_rss_mib)} MiB instead of {args.rss_mib}, and "
            f"fewer calls (see the size column) — the reference runs at a few MB/s and about "
            f"24 calls/s."
        )
    else:
        notes.append(
            "--quick: tiny sizes, measurements run two at a time: a smoke test; "
            "the figures mean little."
        )
    if repeat > 1:
        notes.append(
            f"echo and call rates: the median of {repeat} runs taken in interleaved rounds "
            "(all runs and their spread are in the JSON); cold start: the median of its own "
            "repetitions; peak RSS: one run."
        )
    notes.append(
        "MB/s = 10^6 bytes per second; ratios are value ÷ reference value; "
        "↑ higher is better, ↓ lower is better."
    )
    notes.append("the driver process of (a) is the Python reader/writer; its 'cartridge' is cat.")
    notes.append(
        "our package is byte-compiled before measuring, as an installed package is (pip "
        "compiles at install; capdag's came that way); cartridge scripts run as __main__ are "
        "compiled at each start on both sides."
    )
    if "f" in args.pairs:
        notes.append(
            "(f) measures echo only: the three FNV-1a 64 passes a Bifaci echo needs per byte "
            "(sender, cartridge, receiver; the sender's and receiver's in parallel threads) "
            "over the same enlarged pipes, with no framing, CBOR or event loop: a protocol "
            "implementation pays all of those on top."
        )
    notes.append(
        "CPU driver+cartridge: user+system CPU of each process during the timed section, "
        "per MB or per call; other processes of this machine barely change it, but a "
        "contended host (steal, below) raises it too."
    )
    load_end = os.getloadavg()
    notes.append(
        f"load average (1 min) at start {load_start[0]:.1f}, at end {load_end[0]:.1f} "
        f"on {os.cpu_count()} cores: a busy machine slows every wall-clock figure."
    )
    steal = _steal_share(cpu_start, _cpu_times())
    if steal is not None:
        notes.append(
            f"CPU steal during the run: {steal:.1%} of the cores' time went to other guests "
            "of the host (a virtual machine's /proc/stat); where it is more than a few "
            "percent, the host is contended and every figure of ours is slowed with it, "
            "while (b)'s call rates, paced by its 10 ms tick, are not."
        )
    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": _machine(),
        "command": " ".join(["scripts/bench.py", *(argv if argv is not None else sys.argv[1:])]),
        "quick": args.quick,
        "seconds": round(time.monotonic() - started, 1),
        "pairs": {key: PAIRS[key].title for key in args.pairs},
        "results": results,
        "rows": _rows(results),
        "targets": _targets(results, args.rss_mib * MIB),
        "notes": notes,
        "load_average": {"start": load_start, "end": load_end},
        "cpu_steal_share": steal,
    }
    _print_report(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    failed = any("error" in r for per in results.values() for r in per.values())
    return 1 if failed else 0


def _cpu_times() -> tuple[int, int] | None:
    """(steal, total) jiffies of all cores so far, from Linux's /proc/stat; None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:]]
    return values[7], sum(values[:8])  # steal; user..steal (guest time is inside user)


def _steal_share(start: tuple[int, int] | None, end: tuple[int, int] | None) -> float | None:
    """The share of the cores' time stolen by the hypervisor between two readings."""
    if start is None or end is None or end[1] <= start[1]:
        return None
    return (end[0] - start[0]) / (end[1] - start[1])


if __name__ == "__main__":
    sys.exit(main())
