"""The benchmark's report: its rows with ratios to (b) and (a), the issue's targets as met or
missed, and the rich table that prints them (``benchmarks/bench.py`` measures; this renders).
"""

from __future__ import annotations

from typing import Any

from _bench_common import MIB, PAIRS

#: (row key, worker metric, result field, label, unit, higher is better)
ROWS: tuple[tuple[str, str, str, str, str, bool], ...] = (
    ("echo_mb_s", "echo", "mb_s", "echo throughput", "MB/s", True),
    ("seq_calls_s", "seq", "calls_s", "small calls, sequential", "calls/s", True),
    ("par_calls_s", "par", "calls_s", "small calls, 16 in flight", "calls/s", True),
    ("cold_ms", "cold", "ms", "cold start (spawn→1st result)", "ms", False),
    ("rss_driver_mib", "rss", "driver_mib", "peak RSS, engine/host proc.", "MiB", False),
    ("rss_cartridge_mib", "rss", "cartridge_mib", "peak RSS, cartridge proc.", "MiB", False),
)


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


def rows(results: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
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


def targets(results: dict[str, dict[str, dict[str, Any]]], rss_bytes: int) -> list[dict[str, Any]]:
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
    cli = get("g", "echo", "mb_s")
    if cli is not None:  # measured only when asked for (--pairs cg)
        add("CLI echo (g) ≥ 80% of (c)", cli, ours, 0.8, True)
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


def print_report(report: dict[str, Any]) -> None:
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
