#!/usr/bin/env python3
"""Instructions per small call, engine and cartridge: a figure a busy host cannot skew.

Wall-clock call rates move with whatever else the machine runs (``benchmarks/bench.py``
records the host's steal for that reason). The number of machine instructions our
engine and our cartridge execute per call does not: it changes only when the code does.
This script counts them with valgrind's cachegrind, for pair (c) of ``bench.py`` (our
engine driving ``cartridges/interop.py`` with small ``double`` calls).

Each count comes from two runs of ``_bench_instr_driver.py`` under valgrind, one with a
few calls and one with ``--calls`` more; the difference divided by ``--calls`` is the
cost of one call, with start-up, warm-up and shutdown cancelled out.

Give ``--tree PATH`` (repeatable) to count another checkout of this project, for example
a ``git worktree`` of an older commit, and compare: the first tree is the baseline of
the ratios. Its compiled fast path is built in place when missing.

Usage::

    .venv/bin/python benchmarks/bench_instructions.py [--calls 300] [--inflight 1 16]
        [--tree PATH ...] [--json FILE]

Needs ``valgrind`` on PATH (Debian/Ubuntu: ``apt install valgrind``). Takes about 15 s
per tree and in-flight setting on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import ROOT, find_cap, read_manifest

DRIVER = Path(__file__).resolve().parent / "_bench_instr_driver.py"
#: Calls in the short run whose count is subtracted (at least one per task in flight).
BASE_CALLS = 20
#: One valgrind run of a few hundred calls takes seconds; a stuck one must not hang us.
RUN_TIMEOUT_S = 900.0


class BenchError(Exception):
    """A failure to report as one line (missing tool, broken tree, driver crash)."""


@attrs.frozen
class Counts:
    """Instructions counted in one valgrind run, per traced process."""

    driver: int
    cartridge: int


def parse_cachegrind(text: str) -> tuple[str, int]:
    """(command line, total instructions) from one cachegrind output file."""
    cmd: str | None = None
    total: int | None = None
    for line in text.splitlines():
        if line.startswith("cmd:"):
            cmd = line[4:].strip()
        elif line.startswith("summary:"):
            total = int(line.split()[1])
    if cmd is None or total is None:
        raise BenchError("a cachegrind output has no 'cmd:' or 'summary:' line")
    return cmd, total


def classify(outputs: list[tuple[str, int]]) -> Counts:
    """Split counted processes into the driver (engine) and the interop cartridge."""
    driver = [n for cmd, n in outputs if DRIVER.name in cmd]
    cartridge = [n for cmd, n in outputs if "interop.py" in cmd and DRIVER.name not in cmd]
    if len(driver) != 1 or len(cartridge) != 1:
        seen = ", ".join(cmd.split()[1] if " " in cmd else cmd for cmd, _ in outputs) or "none"
        raise BenchError(f"expected one engine and one cartridge process, counted: {seen}")
    return Counts(driver=driver[0], cartridge=cartridge[0])


def per_call(short: Counts, long: Counts, calls: int) -> dict[str, float]:
    """Instructions of one call: the difference of two runs over the calls between them."""
    driver = (long.driver - short.driver) / calls
    cartridge = (long.cartridge - short.cartridge) / calls
    return {"engine": driver, "cartridge": cartridge, "total": driver + cartridge}


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _tree_label(tree: Path) -> str:
    """The tree's short commit, with ``+changes`` when its work tree differs from it."""
    try:
        head = _git(tree, "rev-parse", "--short", "HEAD")
        dirty = _git(tree, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return str(tree)
    return head + ("+changes" if dirty else "")


def check_tree(tree: Path) -> None:
    """Fail unless ``tree`` holds this project's package and its interop cartridge."""
    package = tree / "cartridge_runtime"
    if not (package / "__init__.py").exists() or not (tree / "cartridges" / "interop.py").exists():
        raise BenchError(f"{tree} is not a checkout of this project (no cartridge_runtime/)")


def prepare_tree(tree: Path) -> None:
    """Build the fast path of checkout ``tree`` when missing, and byte-compile it."""
    check_tree(tree)
    package = tree / "cartridge_runtime"
    protocol = package / "protocol"
    if not any(protocol.glob("_speedups*.so")):
        _build_fast_path(tree)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=False)


#: Builds the extensions a tree's pyproject.toml declares into its package, from a
#: directory without a pyproject.toml, so the tree's metadata (which an older setuptools
#: may not read) is never parsed. The compiler flags are Python's own, as pip uses.
_BUILD_SCRIPT = """
import sys, tomllib
from pathlib import Path
from setuptools import Extension, setup
tree = Path(sys.argv[1])
table = tomllib.loads((tree / "pyproject.toml").read_text())
specs = table.get("tool", {}).get("setuptools", {}).get("ext-modules", [])
exts = [
    Extension(s["name"], [str(tree / src) for src in s["sources"]],
              depends=[str(tree / d) for d in s.get("depends", [])])
    for s in specs
]
if exts:
    setup(name="tree", ext_modules=exts, script_args=["-q", "build_ext", "--build-lib", str(tree),
          "--build-temp", sys.argv[2]])
"""


def _build_fast_path(tree: Path) -> None:
    """Compile the C extensions ``tree`` declares, in place (a pure-Python tree: nothing)."""
    with tempfile.TemporaryDirectory(prefix="bench-build-") as scratch:
        build = subprocess.run(
            [sys.executable, "-c", _BUILD_SCRIPT, str(tree), scratch],
            cwd=scratch,
            capture_output=True,
            text=True,
        )
    if build.returncode != 0:
        last = (build.stderr or build.stdout).strip().splitlines()[-1:] or ["no output"]
        raise BenchError(f"building the fast path of {tree} failed: {last[0]}")


def count_run(tree: Path, cap: str, media: str, calls: int, inflight: int) -> Counts:
    """One valgrind run of the driver with ``calls`` calls; instructions per process."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH")) if p)
    env["PYTHONHASHSEED"] = "0"  # same dict and set layouts in every run
    with tempfile.TemporaryDirectory(prefix="bench-instr-") as out_dir:
        command = [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--branch-sim=no",
            "--trace-children=yes",
            f"--cachegrind-out-file={out_dir}/%p.out",
            "-q",
            sys.executable,
            str(DRIVER),
            str(tree / "cartridges" / "interop.py"),
            cap,
            media,
            "--calls",
            str(calls),
            "--inflight",
            str(inflight),
        ]
        try:
            proc = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            raise BenchError(f"a run of {calls} calls took over {RUN_TIMEOUT_S:g} s") from None
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "warning" not in ln]
            raise BenchError(
                f"the driver failed under valgrind (exit {proc.returncode}): "
                + (lines[-1].strip() if lines else "no output")
            )
        outputs = [parse_cachegrind(p.read_text()) for p in sorted(Path(out_dir).glob("*.out"))]
    return classify(outputs)


def measure(trees: list[Path], calls: int, inflights: list[int]) -> dict[str, Any]:
    """Every (tree, in-flight) count; the runs go two at a time (one per core)."""
    manifest = read_manifest(ROOT / "cartridges" / "interop.py")
    cap, media = find_cap(manifest, "double")
    for tree in trees:
        prepare_tree(tree)
    jobs: dict[tuple[int, int, str], Any] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for t, tree in enumerate(trees):
            for inflight in inflights:
                base = max(BASE_CALLS, 2 * inflight)
                for kind, n in (("short", base), ("long", base + calls)):
                    jobs[(t, inflight, kind)] = pool.submit(
                        count_run, tree, cap, media, n, inflight
                    )
        counted = {key: job.result() for key, job in jobs.items()}
    results = []
    for t, tree in enumerate(trees):
        per_inflight = {
            str(inflight): per_call(
                counted[(t, inflight, "short")], counted[(t, inflight, "long")], calls
            )
            for inflight in inflights
        }
        results.append({"tree": str(tree), "label": _tree_label(tree), "per_call": per_inflight})
    return {"calls": calls, "inflight": inflights, "trees": results}


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    trees = report["trees"]
    table = Table(title=f"Instructions per small call (pair c, {report['calls']} calls counted)")
    table.add_column("tree")
    table.add_column("in flight", justify="right")
    for column in ("engine", "cartridge", "total"):
        table.add_column(column, justify="right")
    if len(trees) > 1:
        table.add_column(f"total vs {trees[0]['label']}", justify="right")
    for tree in trees:
        for inflight, figures in tree["per_call"].items():
            row = [tree["label"], inflight]
            row += [f"{figures[k] / 1000:,.0f} k" for k in ("engine", "cartridge", "total")]
            if len(trees) > 1:
                base = trees[0]["per_call"][inflight]["total"]
                row.append(f"{figures['total'] / base:.3f}x")
            table.add_row(*row)
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls counted (default 300)")
    parser.add_argument(
        "--inflight", type=int, nargs="+", default=[1, 16], help="calls in flight (default 1 16)"
    )
    parser.add_argument(
        "--tree", type=Path, action="append", help="a checkout to count (default: this one)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.calls < 1 or any(k < 1 for k in args.inflight):
        parser.error("--calls and --inflight must be at least 1")
    trees = [tree.resolve() for tree in (args.tree or [ROOT])]
    try:
        for tree in trees:
            check_tree(tree)
        if shutil.which("valgrind") is None:
            raise BenchError("valgrind is not on PATH (Debian/Ubuntu: apt install valgrind)")
        report = measure(trees, args.calls, args.inflight)
    except BenchError as exc:
        print(f"bench_instructions: {exc}", file=sys.stderr)
        return 1
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
