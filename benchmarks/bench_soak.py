#!/usr/bin/env python3
"""A long-lived host: does its resident memory stay near its warmed-up figure?

One engine serves the interop cartridge for ``--seconds``: calls of mixed sizes (small texts
and echoes of up to ``--max-kib`` KiB), several in flight, and a restart of the cartridge
every ``--restart-every`` calls. The host's RSS is read after a warm-up (the same work for
``--warmup`` seconds) and then every few seconds; the last figure is printed as a ratio of the
warmed-up one. Two engines run it in turn, in separate processes: with the engine's heap
trimming (the default) and without it (``heap_trim_interval=None``), so the difference is
measured side by side. Target: the trimmed host ends within 1.2x its warmed-up RSS.

Usage::

    .venv/bin/python benchmarks/bench_soak.py [--seconds 300] [--warmup 30]
        [--inflight 4] [--max-kib 1024] [--restart-every 2000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CARTRIDGE = HERE.parent / "cartridges" / "interop.py"
TEXT = "media:enc=utf-8"
ECHO = "cap:echo"
#: The trimmed host's final RSS, as a multiple of its warmed-up RSS, at most.
TARGET = 1.2


def rss() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * 4096


def child(args: argparse.Namespace) -> None:
    """One soak in this process; prints a JSON line of figures."""
    import anyio

    from cartridge_runtime.engine import Engine

    trim = None if args.no_trim else 5.0
    rng = random.Random(7)

    async def main() -> dict[str, object]:
        async with Engine(heartbeat_interval=None, heap_trim_interval=trim) as engine:
            name = engine.add_cartridge(CARTRIDGE)
            calls = 0

            async def worker(until: float) -> None:
                nonlocal calls
                while time.monotonic() < until:
                    size = rng.choice((16, 4096, 64 << 10, args.max_kib << 10))
                    data = rng.randbytes(size)
                    result = await engine.call(ECHO, [("media:", data)])
                    assert len(result.data) == size
                    calls += 1
                    if calls % args.restart_every == 0:
                        await engine.restart(name)

            async def run_for(seconds: float) -> None:
                until = time.monotonic() + seconds
                async with anyio.create_task_group() as tg:
                    for _ in range(args.inflight):
                        tg.start_soon(worker, until)

            await run_for(args.warmup)
            await anyio.sleep(6)  # a trim interval after the burst, as the soak's end gets
            warm = rss()
            samples = []
            began = time.monotonic()
            while time.monotonic() - began < args.seconds:
                await run_for(min(10.0, args.seconds - (time.monotonic() - began)))
                samples.append(rss())
            await anyio.sleep(6)
            end = rss()
            return {"warm": warm, "end": end, "peak": max(samples, default=end), "calls": calls}

    print(json.dumps(anyio.run(main)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--warmup", type=float, default=30)
    parser.add_argument("--inflight", type=int, default=4)
    parser.add_argument("--max-kib", type=int, default=1024)
    parser.add_argument("--restart-every", type=int, default=2000)
    parser.add_argument("--no-trim", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    rows = []
    for label, extra in (("trimmed (default)", []), ("no trimming", ["--no-trim"])):
        cmd = [sys.executable, __file__, "--child", *extra]
        for flag in ("seconds", "warmup", "inflight", "max_kib", "restart_every"):
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((label, figures))
    mib = 1 << 20
    print(f"soak: {args.seconds:g} s after {args.warmup:g} s warm-up, {args.inflight} in flight,")
    print(f"echoes up to {args.max_kib} KiB, a restart every {args.restart_every} calls")
    print(
        f"{'host':<20}{'calls':>8}{'warm MiB':>10}{'end MiB':>10}{'peak MiB':>10}{'end/warm':>10}"
    )
    for label, f in rows:
        warm, end = int(f["warm"]), int(f["end"])
        print(
            f"{label:<20}{f['calls']:>8}{warm / mib:>10.1f}{end / mib:>10.1f}"
            f"{int(f['peak']) / mib:>10.1f}{end / warm:>10.2f}"
        )
    ratio = int(rows[0][1]["end"]) / int(rows[0][1]["warm"])
    print(f"target: trimmed end/warm <= {TARGET}: {'met' if ratio <= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
