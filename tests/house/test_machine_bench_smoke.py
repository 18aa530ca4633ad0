"""Smoke test of ``benchmarks/bench_machine_parse.py`` at a tiny size: it runs, both sides agree
on the canonical text, and it prints every figure. No time is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_machine_parse.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.interop
def test_the_benchmark_runs_at_a_tiny_size() -> None:
    out = run("--steps", "10", "--runs", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("machine: 10 steps, ")
    assert [line.split(":")[0] for line in lines[1:]] == ["ours", "reference", "ratio", "target"]
    assert "median of 2" in lines[1] and lines[4].endswith(("meets it", "misses it"))


def test_the_benchmark_refuses_nonsense_sizes() -> None:
    for args in (["--steps", "0"], ["--runs", "0"]):
        out = run(*args)
        assert out.returncode == 2
        (line,) = out.stderr.splitlines()
        assert line.startswith("error: ")


def test_the_generated_machine_has_the_steps_asked_for() -> None:
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_machine_parse as bench
    finally:
        sys.path.remove(str(BENCH.parent))
    from cartridge_runtime.machine import parse_machine
    from cartridge_runtime.manifest import CapDef

    caps = [CapDef.from_json(cap) for cap in bench.CAP_JSON]
    machine = parse_machine(bench.machine_text(200), caps)
    assert len(machine) == 200 and len(machine.strands) == 1
    assert sum(step.placement.per_item for step in machine.steps) == 40
