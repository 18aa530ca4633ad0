"""Smoke test of the side-by-side benchmark (``benchmarks/bench.py --quick``).

Runs the real orchestrator in a subprocess at tiny sizes and checks that the JSON
report holds a value for every metric row of every pair, and a verdict slot for
every target. Nothing here looks at the figures themselves: speed is never asserted.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench.py"

PAIRS = ("a", "b", "c", "d", "e")
#: The checksum floor measures echo only.
FLOOR = "f"
ROWS = (
    "echo_mb_s",
    "seq_calls_s",
    "par_calls_s",
    "cold_ms",
    "rss_driver_mib",
    "rss_cartridge_mib",
)


@pytest.mark.slow
@pytest.mark.bench
@pytest.mark.interop
def test_bench_quick_writes_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    failures = ""
    if out.exists():
        partial = json.loads(out.read_text())
        failures = "; ".join(
            f"({pair}) {metric}: {result['error']}"
            for pair, per_metric in partial["results"].items()
            for metric, result in per_metric.items()
            if "error" in result
        )
    assert proc.returncode == 0, failures or (proc.stdout[-3000:] + proc.stderr[-3000:])
    report = json.loads(out.read_text())

    assert report["quick"] is True
    assert set(report["pairs"]) == {*PAIRS, FLOOR}
    if Path("/proc/stat").exists():  # Linux: the host's contention is on record
        assert 0.0 <= report["cpu_steal_share"] <= 1.0
        assert any(note.startswith("CPU steal during the run") for note in report["notes"])
    for pair in PAIRS:
        for metric in ("echo", "seq", "par", "cold", "rss"):
            result = report["results"][pair][metric]
            assert "error" not in result, (pair, metric, result)
    assert set(report["results"][FLOOR]) == {"echo"}
    assert "error" not in report["results"][FLOOR]["echo"]

    cells = {(row["row"], row["pair"]): row for row in report["rows"]}
    assert set(cells) == {(row, pair) for row in ROWS for pair in PAIRS} | {("echo_mb_s", FLOOR)}
    for (row, pair), cell in cells.items():
        assert isinstance(cell["value"], (int, float)), (row, pair, cell)
        assert cell["value"] > 0, (row, pair, cell)
        # Ratios against the references exist wherever the references were measured.
        assert cell["ratio_a"] is not None and cell["ratio_b"] is not None, (row, pair)

    assert report["targets"], "no targets evaluated"
    for target in report["targets"]:
        assert target["met"] in (True, False), target
    # The echo-versus-cat target names the floor next to it.
    (share,) = [t for t in report["targets"] if t["target"] == "echo (c) ≥ 30% of (a)"]
    assert "checksum floor (f)" in share["detail"]
    # The table was printed too.
    assert "echo throughput" in proc.stdout


def _bench_module(name: str = "bench") -> object:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_median_run_reports_the_middle_run_with_all_figures() -> None:
    bench = _bench_module()
    group = [{"calls_s": 30.0, "n": 1}, {"calls_s": 10.0, "n": 2}, {"calls_s": 20.0, "n": 3}]
    chosen = bench.median_run("seq", group)  # type: ignore[attr-defined]
    assert chosen["n"] == 3
    assert chosen["runs"] == [30.0, 10.0, 20.0]
    even = bench.median_run("echo", [{"mb_s": 2.0}, {"mb_s": 1.0}])  # type: ignore[attr-defined]
    assert even["mb_s"] == 1.0  # the lower middle: never flatters
    failed = bench.median_run("par", [{"calls_s": 5.0}, {"error": "boom"}])  # type: ignore[attr-defined]
    assert failed == {"error": "boom"}
    once = bench.median_run("cold", [{"ms": 4.0}])  # type: ignore[attr-defined]
    assert once == {"ms": 4.0}


def test_steal_share_is_the_stolen_part_of_the_time_between_readings() -> None:
    bench = _bench_module()
    share = bench._steal_share  # type: ignore[attr-defined]
    assert share((10, 1_000), (60, 2_000)) == 0.05
    assert share((10, 1_000), (10, 1_000)) is None  # no time passed
    assert share(None, (60, 2_000)) is None  # no /proc/stat here
    now = bench._cpu_times()  # type: ignore[attr-defined]
    if now is not None:
        steal, total = now
        assert 0 <= steal <= total


@pytest.mark.slow
@pytest.mark.bench
def test_bench_repeat_runs_each_speed_measurement_that_many_times(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--quick",
            "--repeat",
            "2",
            "--pairs",
            "ac",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    for pair in ("a", "c"):
        for metric in ("echo", "seq", "par"):
            assert len(report["results"][pair][metric]["runs"]) == 2
        assert "runs" not in report["results"][pair]["cold"]
    assert any("median of 2 runs" in note for note in report["notes"])


def test_floor_child_echoes_every_byte_in_order() -> None:
    """The far end of the checksum floor returns exactly what it got, across block and
    partial-block boundaries, and exits 0 at EOF."""
    data = bytes(range(256)) * 4099 + b"tail"  # not a multiple of the 256 KiB block
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "_bench_floor.py")],
        input=data,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == data


def test_floor_worker_echo_counts_every_byte() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "_bench_worker.py"),
            "f",
            "echo",
            "--bytes",
            "1000003",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("BENCH-RESULT ")]
    result = json.loads(line.split(" ", 1)[1])
    assert result["bytes"] == 1000003
    assert result["pair"] == "f" and result["mb_s"] > 0


def test_mixed_pair_targets_name_the_side_that_did_the_work() -> None:
    bench_report = _bench_module("_bench_report")
    results = {
        "b": {"echo": {"mb_s": 4.0}},
        # (d): our engine drives capdag's cartridge; (e): capdag's host drives ours.
        "d": {
            "echo": {"mb_s": 3.9, "bytes": 2_000_000, "cpu_driver_s": 0.01, "cpu_cartridge_s": 0.5}
        },
        "e": {
            "echo": {"mb_s": 16.0, "bytes": 1_000_000, "cpu_driver_s": 0.2, "cpu_cartridge_s": 0.03}
        },
    }
    targets = {t["target"]: t for t in bench_report.targets(results, 1 << 30)}  # type: ignore[attr-defined]
    d = targets["echo (d) ≥ (b)"]
    assert d["met"] is False
    assert d["detail"].endswith("CPU ours 5.00 vs capdag's 250.00 ms/MB")
    e = targets["echo (e) ≥ (b)"]
    assert e["met"] is True
    assert e["detail"].endswith("CPU ours 30.00 vs capdag's 200.00 ms/MB")


def test_call_rate_targets_show_each_round_beside_cat() -> None:
    bench_report = _bench_module("_bench_report")
    results = {
        "a": {"seq": {"calls_s": 80_000.0, "runs": [81_000.0, 80_000.0, 60_000.0]}},
        "b": {"seq": {"calls_s": 24.0}},
        "c": {"seq": {"calls_s": 2_000.0, "runs": [2_900.0, 2_000.0, 1_500.0]}},
    }
    targets = {t["target"]: t for t in bench_report.targets(results, 1 << 30)}  # type: ignore[attr-defined]
    seq = targets["sequential calls (c) ≥ 100 x (b)"]
    assert seq["met"] is False
    assert seq["detail"].endswith(
        "; rounds 2,900 / 2,000 / 1,500 (with (a) at 81,000 / 80,000 / 60,000)"
    )
