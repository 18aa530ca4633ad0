#!/usr/bin/env python3
"""The step cache measured side by side in one run (not a test).

A 3-step echo chain (``cartridges/interop.py``) over SIZE MiB, on one engine.
The input is a file, as ``cartridge run -i doc=@FILE`` gives it. Each round runs:

1. **plain**: no step cache (the baseline);
2. **cold**: an empty step cache, every call stored (target: at most 1.10x plain); the
   engine process's CPU time (all its threads) is printed beside the wall time, since on a
   shared host the wall time moves with the load;
3. **warm**: the same cache, every call a hit: the output streams from disk;
4. **disk**: the stored output's blob read start to end with 4 MiB reads, the disk's (or the
   page cache's) sequential rate measured alongside (target: warm reaches at least 0.5 of it);
   both rates are also printed per CPU second of this process.

Medians over ROUNDS rounds. Usage: ``.venv/bin/python benchmarks/bench_cache.py [--size MIB]
[--rounds N] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
INTEROP = ROOT / "cartridges" / "interop.py"
MIB = 1 << 20
CHAIN = "e1 cap:echo\ne2 cap:echo\ne3 cap:echo\ndoc -> e1 -> a\na -> e2 -> b\nb -> e3 -> out"


async def _run(engine: Any, machine: Any, doc: Any, cache: Path | None) -> tuple[float, float, int]:
    """Wall seconds, the engine process's CPU seconds (all its threads) and bytes out."""
    from cartridge_runtime.engine import MachineOutputData

    size = 0
    cpu = time.process_time()
    began = time.perf_counter()
    async with engine.stream_machine(machine, {"doc": doc}, cache=cache) as run:
        async for event in run:
            if isinstance(event, MachineOutputData):
                size += len(event.value)
    return time.perf_counter() - began, time.process_time() - cpu, size


def _read_rate(path: Path) -> tuple[float, float]:
    """Bytes per second reading ``path`` with 4 MiB reads into one buffer: per wall second
    and per CPU second."""
    buffer = bytearray(4 * MIB)
    view = memoryview(buffer)
    total = 0
    cpu = time.process_time()
    began = time.perf_counter()
    with path.open("rb", buffering=0) as f:
        while n := f.readinto(view):
            total += n
    return total / (time.perf_counter() - began), total / max(time.process_time() - cpu, 1e-6)


async def _bench(size_mib: int, rounds: int) -> dict[str, Any]:
    from cartridge_runtime.engine import Engine

    doc = bytes(range(256)) * (size_mib * MIB // 256)
    figures: dict[str, list[float]] = {"plain": [], "cold": [], "warm": [], "disk": []}
    cpu: dict[str, list[float]] = {"plain": [], "cold": [], "warm": [], "disk": []}
    folder = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    try:
        async with Engine() as engine:
            engine.add_cartridge(INTEROP)
            machine = await engine.machine(CHAIN)
            await _run(engine, machine, doc[:MIB], None)  # started and warmed up
            source = folder / "doc.bin"  # given as a file, as `cartridge run -i doc=@FILE` does
            source.write_bytes(doc)
            for n in range(rounds):
                cache = folder / f"cache{n}"
                for name, where in (("plain", None), ("cold", cache), ("warm", cache)):
                    seconds, spent, got = await _run(engine, machine, source, where)
                    assert got == len(doc), (name, got)
                    figures[name].append(seconds)
                    if name in cpu:
                        cpu[name].append(spent)
                blob = max((cache / "blobs").glob("*/*"), key=lambda p: p.stat().st_size)
                wall_rate, cpu_rate = _read_rate(blob)
                figures["disk"].append(wall_rate)
                cpu["disk"].append(cpu_rate)
                shutil.rmtree(cache)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    median = {name: statistics.median(values) for name, values in figures.items()}
    warm_rate = len(doc) / median["warm"]
    return {
        "size_mib": size_mib,
        "rounds": rounds,
        "plain_s": median["plain"],
        "cold_s": median["cold"],
        "warm_s": median["warm"],
        "cold_overhead": median["cold"] / median["plain"] - 1.0,
        "plain_cpu_s": statistics.median(cpu["plain"]),
        "cold_cpu_s": statistics.median(cpu["cold"]),
        "cold_cpu_overhead": statistics.median(cpu["cold"]) / statistics.median(cpu["plain"]) - 1.0,
        "warm_rate_mb_s": warm_rate / 1e6,
        "warm_cpu_rate_mb_s": len(doc) / max(statistics.median(cpu["warm"]), 1e-6) / 1e6,
        "disk_cpu_rate_mb_s": statistics.median(cpu["disk"]) / 1e6,
        "disk_rate_mb_s": median["disk"] / 1e6,
        "warm_over_disk": warm_rate / median["disk"],
        "warm_speedup": median["plain"] / median["warm"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=256, help="MiB through the chain")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (medians are reported)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    if args.size < 1 or args.rounds < 1:
        print("error: --size and --rounds take a whole number of at least 1", file=sys.stderr)
        return 2
    r = anyio.run(_bench, args.size, args.rounds)
    print(f"chain: 3 echo steps over {r['size_mib']} MiB, median of {r['rounds']} rounds")
    print(f"plain: {r['plain_s']:.3f} s (no step cache)")
    cold_verdict = "meets it" if r["cold_overhead"] <= 0.10 else "misses it"
    print(f"cold:  {r['cold_s']:.3f} s, overhead {r['cold_overhead']:+.1%} "
          f"(target at most +10%: {cold_verdict})")  # fmt: skip
    print(f"       engine CPU {r['cold_cpu_s']:.3f} s against {r['plain_cpu_s']:.3f} s plain "
          f"({r['cold_cpu_overhead']:+.1%}; the cartridges' CPU is the same in both)")  # fmt: skip
    warm_verdict = "meets it" if r["warm_over_disk"] >= 0.5 else "misses it"
    print(f"warm:  {r['warm_s']:.3f} s, {r['warm_rate_mb_s']:.0f} MB/s, "
          f"{r['warm_speedup']:.1f}x faster than plain")  # fmt: skip
    print(f"disk:  {r['disk_rate_mb_s']:.0f} MB/s sequential read of the stored blob; "
          f"warm/disk {r['warm_over_disk']:.2f} (target at least 0.5: {warm_verdict})")  # fmt: skip
    print(f"       per CPU second: warm {r['warm_cpu_rate_mb_s']:.0f} MB/s, "
          f"disk read {r['disk_cpu_rate_mb_s']:.0f} MB/s")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
