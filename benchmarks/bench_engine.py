#!/usr/bin/env python3
"""Engine benchmark: our engine driving ``cartridges/interop.py``, on asyncio or trio.

Measures, in one run against one engine:

- cold start: engine created, cartridge spawned and hand-shaken, first ``echo`` answered;
- streamed echo: ``--mib`` MiB sent as an async iterable of 1 MiB blocks (one block object
  reused) and counted as it comes back (nothing is held), in MB/s (10^6 bytes per second);
- sequential calls: ``--seq`` small echos one at a time, calls/s;
- calls in flight: ``--par`` small echos with ``--inflight`` at a time, calls/s;
- CPU seconds of the engine process per small call (the call path's own cost, which other
  load on the machine inflates less than wall-clock rates);
- peak RSS (VmHWM) of the engine process and of the cartridge process.

Usage::

    .venv/bin/python benchmarks/bench_engine.py [--backend asyncio|trio] [--mib 256]
        [--seq 500] [--par 2000] [--inflight 16] [--json out.json]

Prints one line per metric and, with ``--json``, writes them as a JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench_common import vm_hwm_mib  # noqa: E402

from cartridge_runtime.engine import Engine, OutputData  # noqa: E402

INTEROP = ROOT / "cartridges" / "interop.py"
ECHO = "cap:echo"
BLOCK = 1 << 20


async def _blocks(mib: int) -> AsyncIterator[bytes]:
    block = os.urandom(BLOCK)
    for _ in range(mib):
        yield block


async def _small(engine: Engine) -> None:
    result = await engine.call_bytes(ECHO, [("media:", b"x")])
    if result.data != b"x":
        raise RuntimeError(f"echo answered {result.data!r}")


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run every metric against one fresh engine; returns them by name."""
    out: dict[str, Any] = {"backend": args.backend}
    t0 = time.perf_counter()
    engine = Engine()
    engine.add_cartridge(INTEROP)
    async with engine:
        await _small(engine)
        out["cold_start_ms"] = (time.perf_counter() - t0) * 1000

        got = 0
        t = time.perf_counter()
        async with engine.call(ECHO, [("media:", _blocks(args.mib))]) as response:
            async for event in response:
                if isinstance(event, OutputData):
                    got += len(event.value)
        dt = time.perf_counter() - t
        if got != args.mib * BLOCK:
            raise RuntimeError(f"echo returned {got} bytes of {args.mib * BLOCK}")
        out["echo_mib"] = args.mib
        out["echo_mb_s"] = got / dt / 1e6

        cpu = time.process_time()
        t = time.perf_counter()
        for _ in range(args.seq):
            await _small(engine)
        out["seq_calls_s"] = args.seq / (time.perf_counter() - t)
        out["seq_cpu_us_per_call"] = (time.process_time() - cpu) / args.seq * 1e6

        per = max(1, args.par // args.inflight)

        async def worker() -> None:
            for _ in range(per):
                await _small(engine)

        cpu = time.process_time()
        t = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(args.inflight):
                group.start_soon(worker)
        calls = per * args.inflight
        out[f"par{args.inflight}_calls_s"] = calls / (time.perf_counter() - t)
        out[f"par{args.inflight}_cpu_us_per_call"] = (time.process_time() - cpu) / calls * 1e6

        pid = engine.status()[0].pid
        out["cartridge_peak_rss_mib"] = vm_hwm_mib(pid) if pid is not None else None
    out["engine_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--mib", type=int, default=256, help="echo size in MiB (default 256)")
    parser.add_argument("--seq", type=int, default=500, help="sequential calls (default 500)")
    parser.add_argument("--par", type=int, default=2000, help="calls in flight run (2000)")
    parser.add_argument("--inflight", type=int, default=16, help="calls at a time (16)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    results = anyio.run(measure, args, backend=args.backend)
    for key, value in results.items():
        shown = f"{value:.1f}" if isinstance(value, float) else str(value)
        print(f"{key:28} {shown}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
