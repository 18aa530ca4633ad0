#!/usr/bin/env python3
"""Small calls through our engine to our cartridge, for counting instructions.

Run by ``benchmarks/bench_instructions.py`` under valgrind, once with a few calls and once
with many, so that start-up cancels out of the difference. It uses only the engine's
public API (``Engine``, ``Engine.call``, ``OutputData``), so it also drives an older
checkout of this project put first on ``PYTHONPATH`` (the scripts stay this checkout's).

Usage: ``_bench_instr_driver.py CARTRIDGE CAP MEDIA --calls N [--inflight K]``. With
``--inflight 1`` the calls go one at a time; otherwise ``K`` tasks share the calls.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from _bench_engine import small_call

from cartridge_runtime.engine import Engine

#: Start-up under valgrind is tens of times slower than native; nothing here may time out
#: (nor the shutdown: a cartridge killed before it exits writes no count).
SLOW_STEP_S = 600.0


async def _run(args: argparse.Namespace) -> None:
    async with Engine(
        step_timeout=SLOW_STEP_S, shutdown_grace=SLOW_STEP_S, heartbeat_interval=None
    ) as engine:
        engine.add_cartridge(args.cartridge)
        await small_call(engine, args.cap, args.media)  # spawn and hand-shake before counting
        per, rest = divmod(args.calls, args.inflight)

        async def worker(n: int) -> None:
            for _ in range(n):
                await small_call(engine, args.cap, args.media)

        await asyncio.gather(*(worker(per + (i < rest)) for i in range(args.inflight)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cartridge")
    parser.add_argument("cap")
    parser.add_argument("media")
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--inflight", type=int, default=1)
    args = parser.parse_args(argv)
    asyncio.run(_run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
