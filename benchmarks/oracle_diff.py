"""The full differential run against the reference's formal model (capdag._formal).

Every area this project implements is compared case by case with the model capdag 1.524.58
ships (its protocol decisions written in Lean, proved, compiled): dispatch and ranking, credit,
pool admission, request bodies and terminals, and the disposition of unrouted frames. The
runners live in ``tests/_oracle_*.py``; the test suite runs a small sample of each
(``tests/oracle/``), this script the full set.

    .venv/bin/python benchmarks/oracle_diff.py                 # 100,000 cases per area
    .venv/bin/python benchmarks/oracle_diff.py --cases 5000 --seed 7 --area credit

Prints the cases and disagreements per area, the first disagreements found and the time
taken; exits 1 when any area disagrees. capdag is a test-only dependency (the test extra).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from _oracle_common import AreaResult, Runner  # noqa: E402
from _oracle_flow import run_credit, run_requests, run_unrouted  # noqa: E402
from _oracle_pools import run as run_pools  # noqa: E402
from _oracle_urn import run as run_dispatch  # noqa: E402

AREAS: dict[str, Runner] = {
    "dispatch": run_dispatch,
    "credit": run_credit,
    "pools": run_pools,
    "requests": run_requests,
    "unrouted": run_unrouted,
}


def run_area(name: str, cases: int, seed: int) -> tuple[str, AreaResult, float, float]:
    """One area's run: its result, wall seconds and CPU seconds (of this process)."""
    t0, c0 = time.perf_counter(), time.process_time()
    res = AREAS[name](cases, random.Random(f"{seed}:{name}"))
    return name, res, time.perf_counter() - t0, time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000, help="cases per area (at least)")
    parser.add_argument("--seed", type=int, default=20261207, help="seed of the random cases")
    parser.add_argument("--area", choices=sorted(AREAS), action="append", help="only this area")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="areas run at once (processes)"
    )
    args = parser.parse_args(argv)
    names = args.area or list(AREAS)
    total_cases = total_bad = 0
    total_cpu = 0.0
    started = time.perf_counter()
    print(f"{'area':<28}{'cases':>10}{'disagreements':>15}{'seconds':>10}{'cpu s':>8}")

    def report(res: AreaResult, took: float, cpu: float) -> None:
        nonlocal total_cases, total_bad, total_cpu
        total_cases += res.cases
        total_bad += res.disagreement_count
        total_cpu += cpu
        print(
            f"{res.area:<28}{res.cases:>10,}{res.disagreement_count:>15,}{took:>10.1f}{cpu:>8.1f}",
            flush=True,
        )
        for line in res.disagreements:
            print(f"    {line}")

    if args.jobs <= 1:
        for name in names:
            _, res, took, cpu = run_area(name, args.cases, args.seed)
            report(res, took, cpu)
    else:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_area, name, args.cases, args.seed) for name in names]
            for future in as_completed(futures):
                _, res, took, cpu = future.result()
                report(res, took, cpu)
    took = time.perf_counter() - started
    print(f"{'total':<28}{total_cases:>10,}{total_bad:>15,}{took:>10.1f}{total_cpu:>8.1f}")
    return 1 if total_bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
