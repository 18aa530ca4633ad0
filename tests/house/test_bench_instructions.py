"""The instruction-count benchmark (``benchmarks/bench_instructions.py``).

Its parsing and arithmetic are checked on made-up cachegrind output; one slow test
runs it for real under valgrind (skipped where valgrind is missing) and one builds the
compiled fast path of a copied checkout, as ``--tree`` does for an older commit.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_instructions.py"

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")


def _module() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("bench_instructions")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _cachegrind(cmd: str, total: int) -> str:
    return f"desc: I1 cache: none\ncmd: {cmd}\nevents: Ir\nfl=x.c\n1 5\nsummary: {total}\n"


def test_parse_cachegrind_reads_the_command_and_the_total() -> None:
    bench = _module()
    text = _cachegrind("/usr/bin/python cartridges/interop.py", 123_456)
    assert bench.parse_cachegrind(text) == ("/usr/bin/python cartridges/interop.py", 123_456)
    with pytest.raises(bench.BenchError, match="summary"):
        bench.parse_cachegrind("cmd: python x.py\nevents: Ir\n")


def test_classify_names_the_engine_and_the_cartridge_and_refuses_anything_else() -> None:
    bench = _module()
    driver = "python /x/benchmarks/_bench_instr_driver.py /x/cartridges/interop.py cap media"
    cartridge = "python /x/cartridges/interop.py"
    counts = bench.classify([(cartridge, 7), (driver, 5)])
    assert (counts.driver, counts.cartridge) == (5, 7)
    with pytest.raises(bench.BenchError, match="one engine and one cartridge"):
        bench.classify([(driver, 5)])
    with pytest.raises(bench.BenchError, match="one engine and one cartridge"):
        bench.classify([(driver, 5), (cartridge, 7), (cartridge, 9)])


def test_per_call_is_the_difference_of_two_runs_over_the_calls_between_them() -> None:
    bench = _module()
    short = bench.Counts(driver=1_000, cartridge=2_000)
    long = bench.Counts(driver=1_000 + 10 * 300, cartridge=2_000 + 10 * 500)
    assert bench.per_call(short, long, 10) == {"engine": 300, "cartridge": 500, "total": 800}


def test_a_tree_that_is_not_this_project_is_one_line_and_exit_1(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"bench_instructions: {tmp_path.resolve()} is not a checkout of this project"
        " (no cartridge_runtime/)"
    ]


def test_without_valgrind_the_script_says_so_in_one_line() -> None:
    bin_dir = Path(sys.executable).parent  # python, but no valgrind
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": str(bin_dir)},
    )
    if shutil.which("valgrind", path=str(bin_dir)):
        pytest.skip("valgrind lives next to this interpreter")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "bench_instructions: valgrind is not on PATH (Debian/Ubuntu: apt install valgrind)"
    ]


def test_calls_below_one_are_refused_before_anything_runs() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "0"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "--calls and --inflight must be at least 1" in proc.stderr


def _fake_valgrind(tmp_path: Path, body: str) -> dict[str, str]:
    """An environment whose ``valgrind`` is a shell script running ``body``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "valgrind"
    fake.write_text("#!/bin/sh\n" + body + "\n")
    fake.chmod(0o755)
    return {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"}


def test_a_driver_that_fails_under_valgrind_is_one_line_and_exit_1(tmp_path: Path) -> None:
    env = _fake_valgrind(tmp_path, "echo 'warning: noise' >&2; echo 'it broke here' >&2; exit 3")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "1", "--inflight", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "bench_instructions: the driver failed under valgrind (exit 3): it broke here"
    ]


def test_a_run_that_counts_no_process_is_one_line_and_exit_1(tmp_path: Path) -> None:
    env = _fake_valgrind(tmp_path, "exit 0")  # succeeds, writes no cachegrind output
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "1", "--inflight", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "bench_instructions: expected one engine and one cartridge process, counted: none"
    ]


@pytest.mark.slow
@pytest.mark.bench
@needs_valgrind
def test_counts_instructions_per_call_of_engine_and_cartridge(tmp_path: Path) -> None:
    out = tmp_path / "instr.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "10", "--inflight", "1", "4", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["calls"] == 10 and report["inflight"] == [1, 4]
    (tree,) = report["trees"]
    assert tree["tree"] == str(ROOT)
    assert set(tree["per_call"]) == {"1", "4"}
    for figures in tree["per_call"].values():
        # A small call runs a real request through both sides: thousands of instructions.
        assert figures["engine"] > 10_000 and figures["cartridge"] > 10_000
        assert figures["total"] == pytest.approx(figures["engine"] + figures["cartridge"])
    assert "Instructions per small call" in proc.stdout


@pytest.mark.slow
def test_prepare_tree_builds_the_fast_path_of_a_checkout_that_lacks_it(tmp_path: Path) -> None:
    bench = _module()
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT / "cartridge_runtime",
        tree / "cartridge_runtime",
        ignore=shutil.ignore_patterns("*.so", "__pycache__"),
    )
    shutil.copytree(ROOT / "cartridges", tree / "cartridges")
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    bench.prepare_tree(tree)
    built = list((tree / "cartridge_runtime" / "protocol").glob("_speedups*.so"))
    assert len(built) == 1
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import cartridge_runtime.protocol._speedups as s; print(s.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": str(Path(sys.executable).parent)},
    )
    assert probe.stdout.strip() == str(built[0])


def test_runs_that_need_valgrind_or_a_quiet_host_are_left_out_by_default() -> None:
    import tomllib

    import test_bench_smoke

    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"][
        "addopts"
    ]
    assert addopts[addopts.index("-m") + 1] == "not bench"
    for test in (
        test_counts_instructions_per_call_of_engine_and_cartridge,
        test_bench_smoke.test_bench_quick_writes_every_row,
        test_bench_smoke.test_bench_repeat_runs_each_speed_measurement_that_many_times,
    ):
        assert "bench" in {mark.name for mark in getattr(test, "pytestmark", [])}, test.__name__
