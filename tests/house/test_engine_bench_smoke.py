"""benchmarks/bench_engine.py runs end to end on both backends (tiny sizes; no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_bench_engine_smoke(tmp_path: Path, backend: str) -> None:
    out = tmp_path / "bench.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_engine.py"),
            "--backend",
            backend,
            "--mib",
            "2",
            "--seq",
            "5",
            "--par",
            "16",
            "--inflight",
            "4",
            "--json",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    results = json.loads(out.read_text())
    assert results["backend"] == backend and results["echo_mib"] == 2
    for key in ("cold_start_ms", "echo_mb_s", "seq_calls_s", "par4_calls_s"):
        assert results[key] > 0
