"""Smoke test of the side-by-side benchmark (``scripts/bench.py --quick``).

Runs the real orchestrator in a subprocess at tiny sizes and checks that the JSON
report holds a value for every metric row of every pair, and a verdict slot for
every target. Nothing here looks at the figures themselves: speed is never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scripts" / "bench.py"

PAIRS = ("a", "b", "c", "d", "e")
ROWS = (
    "echo_mb_s",
    "seq_calls_s",
    "par_calls_s",
    "cold_ms",
    "rss_driver_mib",
    "rss_cartridge_mib",
)


@pytest.mark.slow
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
    assert set(report["pairs"]) == set(PAIRS)
    for pair in PAIRS:
        for metric in ("echo", "seq", "par", "cold", "rss"):
            result = report["results"][pair][metric]
            assert "error" not in result, (pair, metric, result)

    cells = {(row["row"], row["pair"]): row for row in report["rows"]}
    assert set(cells) == {(row, pair) for row in ROWS for pair in PAIRS}
    for (row, pair), cell in cells.items():
        assert isinstance(cell["value"], (int, float)), (row, pair, cell)
        assert cell["value"] > 0, (row, pair, cell)
        # Ratios against the references exist wherever the references were measured.
        assert cell["ratio_a"] is not None and cell["ratio_b"] is not None, (row, pair)

    assert report["targets"], "no targets evaluated"
    for target in report["targets"]:
        assert target["met"] in (True, False), target
    # The table was printed too.
    assert "echo throughput" in proc.stdout
