"""Measurements of our engine (``cartridge_runtime.engine.Engine``), pairs (c) and (d).

Called by ``_bench_worker.py`` inside ``asyncio.run``. Inputs are fed as async
iterables of 256 KiB blocks and outputs are counted as they arrive, so even a
1 GiB echo holds only a window of chunks in memory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from _bench_common import BLOCK, SMALL_ANSWER, SMALL_INPUT, CpuMeter, child_pids, vm_hwm_mib

from cartridge_runtime.engine import Engine, OutputData


async def _blocks(total: int) -> AsyncIterator[bytes]:
    """``total`` bytes as 256 KiB blocks (one block object reused)."""
    block = bytes(range(256)) * (BLOCK // 256)
    full, rest = divmod(total, BLOCK)
    for _ in range(full):
        yield block
    if rest:
        yield block[:rest]


async def _echo(engine: Engine, cap: str, media: str, total: int) -> int:
    got = 0
    async with engine.call(cap, [(media, _blocks(total))]) as response:
        async for event in response:
            if isinstance(event, OutputData) and event.output is None:
                value = event.value
                got += len(value.encode() if isinstance(value, str) else value)
    return got


async def small_call(engine: Engine, cap: str, media: str) -> None:
    """One ``double`` call with the small input; fails unless it answers 42."""
    parts: list[bytes] = []
    async with engine.call(cap, [(media, SMALL_INPUT)]) as response:
        async for event in response:
            if isinstance(event, OutputData) and event.output is None:
                value = event.value
                parts.append(value.encode() if isinstance(value, str) else value)
    answer = b"".join(parts)
    if answer.strip() != SMALL_ANSWER:
        raise RuntimeError(f"double answered {answer!r}, expected {SMALL_ANSWER!r}")


async def measure(
    cartridge: Path,
    caps: dict[str, tuple[str, str]],
    metric: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Run one metric against a fresh engine with ``cartridge`` added."""
    _echo_cap, _echo_media = caps["echo"]
    double_cap, double_media = caps["double"]

    if metric == "cold":
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            async with Engine() as engine:
                engine.add_cartridge(str(cartridge))
                await small_call(engine, double_cap, double_media)
                times.append(time.perf_counter() - t0)
        return {"ms": statistics.median(times) * 1000, "samples_ms": [t * 1000 for t in times]}

    async with Engine() as engine:
        engine.add_cartridge(str(cartridge))
        await small_call(engine, double_cap, double_media)
        meter = CpuMeter(child_pids())
        result = await _timed(engine, caps, metric, args)
        return result | meter.stop()


async def _timed(
    engine: Engine, caps: dict[str, tuple[str, str]], metric: str, args: argparse.Namespace
) -> dict[str, Any]:
    echo_cap, echo_media = caps["echo"]
    double_cap, double_media = caps["double"]
    if metric in ("echo", "rss"):
        t0 = time.perf_counter()
        got = await _echo(engine, echo_cap, echo_media, args.bytes)
        dt = time.perf_counter() - t0
        if got != args.bytes:
            raise RuntimeError(f"echo returned {got} bytes of {args.bytes}")
        result: dict[str, Any] = {"bytes": got, "seconds": dt, "mb_s": got / dt / 1e6}
        if metric == "rss":
            children = child_pids()
            result["driver_mib"] = vm_hwm_mib(os.getpid())
            peaks = [vm_hwm_mib(pid) for pid in children]
            result["cartridge_mib"] = max((p for p in peaks if p is not None), default=None)
            result["cartridge_pids"] = children
        return result
    if metric == "seq":
        t0 = time.perf_counter()
        for _ in range(args.calls):
            await small_call(engine, double_cap, double_media)
        dt = time.perf_counter() - t0
        return {"calls": args.calls, "seconds": dt, "calls_s": args.calls / dt}
    if metric == "par":
        import anyio

        per = max(1, args.calls // args.inflight)

        async def worker() -> None:
            for _ in range(per):
                await small_call(engine, double_cap, double_media)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(args.inflight):
                group.start_soon(worker)
        dt = time.perf_counter() - t0
        calls = per * args.inflight
        return {"calls": calls, "seconds": dt, "calls_s": calls / dt}
    raise ValueError(metric)
