#!/usr/bin/env python3
"""Machine runs measured side by side with the single calls they are made of (not a test).

Three comparisons, each in one process and one run, so the ratios hold however busy the host:

1. **chain**: SIZE MiB through a 3-step echo chain (``cartridges/interop.py``), against the
   three single echo calls of that size one after another. Reported: wall time (the chain
   pipelines, so it should take at most 0.8x the three calls) and CPU per MB of every process
   (at most 1.2x the three calls').
2. **map**: a per-item map of ITEMS small items through one small cap (wordkit ``upper``),
   against the same number of single calls of that cap kept 16 in flight. Target: the map
   reaches at least 0.7 of their rate.
3. **memory**: the peak RSS of the engine process and of each cartridge while a GIB GiB
   stream passes the chain (target under 100 MiB each).

Usage: ``.venv/bin/python benchmarks/bench_machine.py [--size MIB] [--replicas R] [--items N] [--gib G]
[--only chain,map,memory] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench_common import child_pids, cpu_seconds, vm_hwm_mib  # noqa: E402

from cartridge_runtime.engine import Engine, MachineOutputData  # noqa: E402

INTEROP = ROOT / "cartridges" / "interop.py"
WORDKIT = ROOT / "cartridges" / "wordkit.py"
MIB = 1 << 20
BLOCK = 256 * 1024
CHAIN = "e1 cap:echo\ne2 cap:echo\ne3 cap:echo\ndoc -> e1 -> a\na -> e2 -> b\nb -> e3 -> out"
MAP = (
    'split cap:in="media:enc=utf-8";op=split;out="media:enc=utf-8;word"\n'
    'upper cap:in="media:enc=utf-8;word";op=upper;out="media:enc=utf-8;word"\n'
    "doc -> split -> ws\nws -> upper -> up"
)
UPPER = 'cap:in="media:enc=utf-8;word";op=upper;out="media:enc=utf-8;word"'


def _cpu_split() -> tuple[float, float]:
    """CPU seconds so far of this (the engine's) process, and of its cartridges."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = sum(cpu_seconds(pid) or 0.0 for pid in child_pids(os.getpid()))
    return me.ru_utime + me.ru_stime, children


def _cpu_all() -> float:
    return sum(_cpu_split())


async def _blocks(total: int):  # type: ignore[no-untyped-def]
    block = os.urandom(BLOCK)
    sent = 0
    while sent < total:
        n = min(BLOCK, total - sent)
        yield block[:n]
        sent += n


async def bench_chain(size_mib: int, replicas: int = 1) -> dict[str, Any]:
    total = size_mib * MIB
    async with Engine() as engine:
        engine.add_cartridge(INTEROP, replicas=replicas)
        machine = await engine.machine(CHAIN)
        for _ in range(replicas):
            await engine.call_bytes("cap:echo", [("media:", b"warm")])
        # three single calls, one after another, each SIZE bytes through echo
        split0 = _cpu_split()
        cpu0, t0 = _cpu_all(), time.perf_counter()
        for _ in range(3):
            async with engine.call("cap:echo", [("media:", _blocks(total))]) as response:
                async for _ev in response:
                    pass
        calls_wall, calls_cpu = time.perf_counter() - t0, _cpu_all() - cpu0
        split1 = _cpu_split()
        cpu0, t0 = _cpu_all(), time.perf_counter()
        async with engine.stream_machine(machine, {"doc": _blocks(total)}) as run:
            got = 0
            async for event in run:
                if isinstance(event, MachineOutputData):
                    got += len(event.value)
        chain_wall, chain_cpu = time.perf_counter() - t0, _cpu_all() - cpu0
        split2 = _cpu_split()
        assert got == total, (got, total)
    mb = total / 1e6
    return {
        "size_mib": size_mib,
        "replicas": replicas,
        "calls_wall_s": calls_wall,
        "chain_wall_s": chain_wall,
        "wall_ratio": chain_wall / calls_wall,
        "calls_cpu_per_mb_ms": calls_cpu / mb * 1e3,
        "chain_cpu_per_mb_ms": chain_cpu / mb * 1e3,
        "cpu_ratio": chain_cpu / calls_cpu,
        "calls_cpu_engine_s": split1[0] - split0[0],
        "calls_cpu_cartridges_s": split1[1] - split0[1],
        "chain_cpu_engine_s": split2[0] - split1[0],
        "chain_cpu_cartridges_s": split2[1] - split1[1],
    }


async def bench_map(items: int) -> dict[str, Any]:
    words = [f"w{i}" for i in range(items)]
    async with Engine() as engine:
        engine.add_cartridge(WORDKIT)
        machine = await engine.machine(MAP)
        await engine.call_bytes(UPPER, [("media:enc=utf-8;word", b"warm")])
        t0 = time.perf_counter()
        limiter = anyio.Semaphore(16)

        async def one(word: str) -> None:
            async with limiter:
                await engine.call_bytes(UPPER, [("media:enc=utf-8;word", word.encode())])

        async with anyio.create_task_group() as tg:
            for word in words:
                await limiter.acquire()
                limiter.release()
                tg.start_soon(one, word)
        calls_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = await engine.run_machine(machine, {"doc": " ".join(words)})
        map_s = time.perf_counter() - t0
        assert len(result["up"].items) == items
    return {
        "items": items,
        "calls_per_s": items / calls_s,
        "map_items_per_s": items / map_s,
        "rate_ratio": (items / map_s) / (items / calls_s),
    }


async def bench_memory(gib: float) -> dict[str, Any]:
    total = int(gib * 1024) * MIB
    peaks: dict[str, float] = {}
    async with Engine() as engine:
        engine.add_cartridge(INTEROP)
        machine = await engine.machine(CHAIN)
        async with engine.stream_machine(machine, {"doc": _blocks(total)}) as run:
            async for _event in run:
                pass
            for status in engine.status():
                if status.pid:
                    peaks[f"cartridge {status.pid}"] = vm_hwm_mib(status.pid) or 0.0
    peaks["engine"] = vm_hwm_mib(os.getpid()) or 0.0
    return {"gib": gib, "peak_rss_mib": peaks, "max_mib": max(peaks.values())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=256, help="MiB through the chain")
    parser.add_argument(
        "--replicas", type=int, default=1, help="replicas of the echo cartridge for the chain"
    )
    parser.add_argument("--items", type=int, default=10_000, help="items of the map")
    parser.add_argument("--gib", type=float, default=1.0, help="GiB for the memory run")
    parser.add_argument("--only", default="chain,map,memory")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.size < 1 or args.items < 1 or args.gib <= 0:
        parser.error("--size, --items and --gib must be positive")
    wanted = set(args.only.split(","))
    report: dict[str, Any] = {}
    if "chain" in wanted:
        report["chain"] = anyio.run(bench_chain, args.size, args.replicas)
    if "map" in wanted:
        report["map"] = anyio.run(bench_map, args.items)
    if "memory" in wanted:
        report["memory"] = anyio.run(bench_memory, args.gib)
    from rich.console import Console
    from rich.table import Table

    table = Table(title="machine runs against their single calls")
    for column in ("measure", "single calls", "machine", "ratio", "target"):
        table.add_column(column)
    if "chain" in report:
        c = report["chain"]
        table.add_row(
            f"chain wall, {c['size_mib']} MiB",
            f"{c['calls_wall_s']:.2f} s (3 calls)",
            f"{c['chain_wall_s']:.2f} s",
            f"{c['wall_ratio']:.2f}",
            "<= 0.8",
        )
        table.add_row(
            "chain CPU per MB",
            f"{c['calls_cpu_per_mb_ms']:.2f} ms",
            f"{c['chain_cpu_per_mb_ms']:.2f} ms",
            f"{c['cpu_ratio']:.2f}",
            "<= 1.2",
        )
    if "map" in report:
        m = report["map"]
        table.add_row(
            f"map of {m['items']} items",
            f"{m['calls_per_s']:.0f} calls/s (16 in flight)",
            f"{m['map_items_per_s']:.0f} items/s",
            f"{m['rate_ratio']:.2f}",
            ">= 0.7",
        )
    if "memory" in report:
        r = report["memory"]
        table.add_row(
            f"peak RSS, {r['gib']} GiB chain",
            "",
            ", ".join(f"{k} {v:.0f} MiB" for k, v in r["peak_rss_mib"].items()),
            "",
            "< 100 MiB each",
        )
    Console().print(table)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
