#!/usr/bin/env python3
"""A CPU-bound cap over 1 and 2 replicas of one cartridge, side by side in one run.

Each measurement starts an engine with ``replicas=R`` of ``_spin_cartridge.py`` (every
replica started before the clock runs), keeps ``--inflight`` calls of ``spin`` in flight for
``--calls`` calls, and reports calls per second and the CPU time the cartridges used (from
``/proc``). The settings alternate (1, 2, 1, 2, ...) ``--repeat`` times and the median of each
is shown, so a spell of load on a shared host hits both alike. Target: 2 replicas
at least 1.6x the rate of 1 on a 2-core machine. The host's load average is printed: on a
host whose cores other work keeps busy, a second replica has no idle core to win.

Usage::

    .venv/bin/python benchmarks/replicas.py [--calls 120] [--inflight 8] [--rounds 100000]
        [--repeat 3] [--replicas 1 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from cartridge_runtime.engine import Engine

HERE = Path(__file__).resolve().parent
CARTRIDGE = HERE / "_spin_cartridge.py"
SPIN = 'cap:in="media:enc=utf-8";op=spin;out="media:enc=utf-8"'
TEXT = "media:enc=utf-8"
#: Rate the 2-replica run must reach, as a multiple of the 1-replica run's.
TARGET = 1.6


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (0 when it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(replicas: int, calls: int, inflight: int, rounds: int) -> dict[str, Any]:
    """One run: calls per second with ``replicas`` instances, and their CPU seconds."""
    async with Engine(heartbeat_interval=None) as engine:
        name = engine.add_cartridge(CARTRIDGE, replicas=replicas)
        await engine.start(name)
        payload = str(rounds)
        for _ in range(replicas):  # warm each replica's handler path once
            await engine.call(SPIN, [(TEXT, payload)])
        pids = [r.pid for r in engine.status()[0].replicas if r.pid is not None]
        cpu_before = sum(_cpu_seconds(p) for p in pids)
        remaining = calls

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await engine.call(SPIN, [(TEXT, payload)])

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(inflight):
                tg.start_soon(worker)
        elapsed = time.perf_counter() - start
        cpu = sum(_cpu_seconds(p) for p in pids) - cpu_before
        served = [r.starts for r in engine.status()[0].replicas]
    return {
        "replicas": replicas,
        "calls": calls,
        "seconds": elapsed,
        "calls_per_s": calls / elapsed,
        "cartridge_cpu_s": cpu,
        "starts": served,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=120)
    parser.add_argument("--inflight", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=100_000, help="work per call")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.calls < 1 or args.inflight < 1 or args.rounds < 0 or args.repeat < 1:
        parser.error("--calls, --inflight and --repeat must be at least 1, --rounds at least 0")
    if any(r < 1 for r in args.replicas):
        parser.error("--replicas must be at least 1")
    load_before = os.getloadavg()[0]
    runs: dict[int, list[dict[str, Any]]] = {r: [] for r in args.replicas}
    for _ in range(args.repeat):
        for r in args.replicas:
            runs[r].append(anyio.run(measure, r, args.calls, args.inflight, args.rounds))
    rates = {r: statistics.median(x["calls_per_s"] for x in runs[r]) for r in args.replicas}
    base = rates[args.replicas[0]]
    print(
        f"spin ({args.rounds} rounds a call), {args.calls} calls, {args.inflight} in flight, "
        f"median of {args.repeat} interleaved runs, {os.cpu_count()} CPUs, "
        f"load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after"
    )
    print(f"{'replicas':>8}  {'calls/s':>8}  {'vs first':>8}  {'cartridge CPU s/call':>20}")
    for r in args.replicas:
        cpu = statistics.median(x["cartridge_cpu_s"] / x["calls"] for x in runs[r])
        print(f"{r:>8}  {rates[r]:>8.1f}  {rates[r] / base:>7.2f}x  {cpu * 1000:>17.1f} ms")
    verdict = 0
    if 1 in rates and 2 in rates:
        ratio = rates[2] / rates[1]
        met = ratio >= TARGET
        print(
            f"2 replicas / 1 replica: {ratio:.2f}x (target >= {TARGET}x: {'met' if met else 'MISSED'})"
        )
        verdict = 0 if met else 1
    if args.json is not None:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)},
                                         "runs": runs, "rates": rates}, indent=2, default=str))  # fmt: skip
    return verdict


if __name__ == "__main__":
    sys.exit(main())
