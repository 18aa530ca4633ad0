#!/usr/bin/env python3
"""``bench_cache.py`` over two or more checkouts of this project, alternately (not a test).

Each pair runs ``TREE/benchmarks/bench_cache.py`` once per tree, in the order given, with that
tree first on ``PYTHONPATH`` (so the engine and the cartridges are that tree's); pairs repeat,
so load that drifts falls on every tree alike. Prints, per tree, each run's cold overhead (wall
and engine CPU), the engine CPU seconds the storing added, and warm/disk, with the load average
after each run. A tree without its compiled fast path would run the pure-Python one: build it
(``pip install -e .``) or copy the extension in first.

Usage: ``.venv/bin/python benchmarks/bench_cache_ab.py --tree OLD --tree . [--pairs 3]
[--rounds 3] [--size 256]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def _one(tree: Path, size: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-cache-ab-") as folder:
        out = Path(folder) / "figures.json"
        command = [sys.executable, str(tree / "benchmarks" / "bench_cache.py")]
        command += ["--size", str(size), "--rounds", str(rounds), "--json", str(out)]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run(command, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
        figures: dict[str, Any] = json.loads(out.read_text())
    figures["load"] = os.getloadavg()[0]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append", required=True, help="a checkout")
    parser.add_argument("--pairs", type=int, default=3, help="runs of each tree")
    parser.add_argument("--rounds", type=int, default=3, help="bench_cache.py --rounds")
    parser.add_argument("--size", type=int, default=256, help="bench_cache.py --size (MiB)")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree]
    for tree in trees:
        if not (tree / "benchmarks" / "bench_cache.py").is_file():
            print(f"error: {tree} has no benchmarks/bench_cache.py", file=sys.stderr)
            return 2
        if not list((tree / "cartridge_runtime" / "protocol").glob("_speedups*")):
            print(f"note: {tree} has no compiled fast path: it runs the pure-Python one")
    runs: dict[Path, list[dict[str, Any]]] = {tree: [] for tree in trees}
    for _ in range(args.pairs):
        for tree in trees:
            runs[tree].append(_one(tree, args.size, args.rounds))
    for tree, figures in runs.items():
        print(f"{tree}:")
        for f in figures:
            added = f["cold_cpu_s"] - f["plain_cpu_s"]
            print(f"  cold {f['cold_overhead']:+.1%} wall, {f['cold_cpu_overhead']:+.1%} engine CPU "
                  f"({added:.3f} s added), warm/disk {f['warm_over_disk']:.2f}, "
                  f"load {f['load']:.1f}")  # fmt: skip
        added = statistics.median(f["cold_cpu_s"] - f["plain_cpu_s"] for f in figures)
        print(f"  median engine CPU added by storing: {added:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
