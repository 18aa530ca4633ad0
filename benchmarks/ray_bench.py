#!/usr/bin/env python3
"""Local subprocess vs one-node Ray (``RayPlacement``), side by side in one run.

Starts a local Ray instance the way a user's first launch does (``RayPlacement()`` with no
address) and reports its start time and the memory it took, then for each placement: small
calls one at a time and 16 in flight (``tests/fixtures/raw_cartridge.py`` echo), a streamed
echo (``--echo-mib``, default 64), a machine's per-item map over 2 replicas
(``tests/fixtures/replica_cartridge.py``), a CPU-bound cap over 1 and 2 Ray replicas
(``_spin_cartridge.py``), and the peak memory of the driver and the actor during one big
echo (``--big-mib``, default 1024; goal: each under 150 MiB). Ray's instances carry their
bytes over the direct stream (a socket between the engine and the cartridge's process);
``--through-ray`` adds a third column, the same rows with ``RayPlacement(direct=False)``.
Targets (direct stream against local): small calls >= 0.5x, the 64 MiB echo >= 0.8x, the
per-item map >= 0.7x; 2 Ray replicas >= 1.6x one for the CPU-bound cap.

Usage::

    .venv/bin/python benchmarks/ray_bench.py [--echo-mib 64] [--big-mib 1024] [--calls 300]
        [--words 400] [--rounds 5] [--spin-calls 40] [--through-ray]

Each row runs local then Ray in every round (``--rounds``), and reports the medians of each
and of the per-round ratios, so that a change in the host's load hits both sides alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio

from cartridge_runtime.engine import Engine, OutputData, Placement, Subprocess
from cartridge_runtime.engine.ray import RayPlacement

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RAW = ROOT / "tests" / "fixtures" / "raw_cartridge.py"
REPLICA = ROOT / "tests" / "fixtures" / "replica_cartridge.py"
SPIN_CARTRIDGE = HERE / "_spin_cartridge.py"
SPIN = 'cap:in="media:enc=utf-8";op=spin;out="media:enc=utf-8"'
TEXT = "media:enc=utf-8"
WORD = "media:enc=utf-8;word"
MAP = "\n".join(
    [
        f'split cap:in="{TEXT}";op=split;out="{WORD}"',
        f'whoami cap:in="{WORD}";op=whoami;out="{WORD}"',
        "doc -> split -> ws",
        "ws -> whoami -> out",
    ]
)


def _status(pid: int, key: str) -> float:
    """A ``/proc/PID/status`` field in MiB (0 when the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _blocks(total: int, size: int = 256 << 10) -> AsyncIterator[bytes]:
    block = bytes(range(256)) * (size // 256)
    for _ in range(total // size):
        yield block


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


async def small_calls(placement: Placement, calls: int, inflight: int) -> float:
    """Calls per second of a 1-byte echo with ``inflight`` calls at once."""
    async with Engine(heartbeat_interval=None) as engine:
        engine.add_cartridge(RAW, env=_env(RAW_MODE="echo"), placement=placement)
        await engine.call("cap:echo", [("media:", b"x")])
        left = calls

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await engine.call("cap:echo", [("media:", b"x")])

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(inflight):
                tg.start_soon(worker)
        return calls / (time.perf_counter() - start)


async def echo(placement: Placement, mib: int, watch: bool = False) -> dict[str, float]:
    """MiB/s of a streamed echo; with ``watch``, the peak memory of driver and actor too."""
    total = mib << 20
    async with Engine(heartbeat_interval=None) as engine:
        name = engine.add_cartridge(RAW, env=_env(RAW_MODE="echo"), placement=placement)
        await engine.start(name)
        conn = engine._slots[name].replicas[0].conn
        assert conn is not None
        actor = getattr(conn.process, "actor_pid", None)
        pids = {"driver": os.getpid()} | ({"actor": actor} if actor else {})
        peak = {f"{who} {key}": 0.0 for who in pids for key in ("VmRSS", "RssAnon")}
        received = 0
        start = time.perf_counter()
        async with engine.call("cap:echo", [("media:", _blocks(total))]) as response:
            async for event in response:
                if isinstance(event, OutputData):
                    received += len(event.value)
                    if watch:
                        for who, pid in pids.items():
                            for key in ("VmRSS", "RssAnon"):
                                label = f"{who} {key}"
                                peak[label] = max(peak[label], _status(pid, key))
        seconds = time.perf_counter() - start
        assert received == total, (received, total)
    return {"MiB/s": mib / seconds, **(peak if watch else {})}


async def machine_map(placement: Placement, words: int) -> float:
    """Items per second of a per-item map over 2 replicas."""
    async with Engine(heartbeat_interval=None) as engine:
        name = engine.add_cartridge(
            REPLICA, replicas=2, placement=placement, env=_env(REPLICA_PAUSE="0")
        )
        await engine.start(name)
        doc = " ".join(f"w{i}" for i in range(words))
        await engine.run_machine(MAP, {"doc": "warm up"}, window=16)
        pids = _pids(engine, name)
        cpu = _cpu_seconds(pids)
        start = time.perf_counter()
        result = await engine.run_machine(MAP, {"doc": doc}, window=16)
        seconds = time.perf_counter() - start
        key = type(placement).__name__ + ("" if getattr(placement, "direct", True) else " via ray")
        MAP_CPU.setdefault(key, []).append((_cpu_seconds(pids) - cpu) / words * 1000)
        assert len(result["out"].items) == words
    return words / seconds


#: CPU milliseconds per map item (driver, actors and cartridges), by placement, per round.
MAP_CPU: dict[str, list[float]] = {}


def _pids(engine: Engine, name: str) -> list[int]:
    """The driver and, for each replica, its cartridge and (on Ray) its actor."""
    pids = [os.getpid()]
    for replica in engine._slots[name].replicas:
        process = replica.conn.process if replica.conn is not None else None
        for attr in ("pid", "remote_pid", "actor_pid"):
            pid = getattr(process, attr, None)
            if isinstance(pid, int):
                pids.append(pid)
    return pids


def _cpu_seconds(pids: list[int]) -> float:
    """User and system CPU seconds used so far by these processes (all their threads)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def spin(placement: Placement, replicas: int, calls: int) -> float:
    """Calls per second of the CPU-bound cap over ``replicas`` instances, 8 in flight."""
    async with Engine(heartbeat_interval=None) as engine:
        name = engine.add_cartridge(SPIN_CARTRIDGE, replicas=replicas, placement=placement)
        await engine.start(name)
        for _ in range(replicas):
            await engine.call(SPIN, [(TEXT, "100000")])
        left = calls

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await engine.call(SPIN, [(TEXT, "100000")])

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(worker)
        return calls / (time.perf_counter() - start)


async def _mib_per_s(run: Awaitable[dict[str, float]]) -> float:
    return (await run)["MiB/s"]


async def _spin_rows(calls: int) -> None:
    one = await spin(RayPlacement(num_cpus=1), 1, calls)
    two = await spin(RayPlacement(num_cpus=1), 2, calls)
    print(
        f"CPU-bound cap over Ray: 1 replica {one:.1f}/s, 2 replicas {two:.1f}/s "
        f"({two / one:.2f}x; load {os.getloadavg()[0]:.1f})"
    )


async def main(args: argparse.Namespace) -> None:
    import ray

    before = _available_mib()
    start = time.perf_counter()
    await RayPlacement()._connect()
    print(
        f"Ray local start: {time.perf_counter() - start:.1f} s, "
        f"memory taken {before - _available_mib():.0f} MiB (MemAvailable drop)"
    )
    print(f"cluster: {ray.cluster_resources()}")
    local: Placement = Subprocess()
    remote: Placement = RayPlacement(num_cpus=0.5)
    sides: list[tuple[str, Placement]] = [("local", local), ("ray", remote)]
    if args.through_ray:
        sides.append(("via ray", RayPlacement(num_cpus=0.5, direct=False)))
    rows: dict[str, list[list[float]]] = {}

    async def row(label: str, measure: Callable[[Placement], Awaitable[float]]) -> None:
        figures = rows.setdefault(label, [[] for _ in sides])
        for column, (_, placement) in zip(figures, sides, strict=True):
            column.append(await measure(placement))

    for _ in range(args.rounds):  # interleaved: local and Ray side by side in every round
        for label, inflight in (("small calls, 1 in flight (calls/s)", 1), ("16 in flight", 16)):
            await row(label, lambda p, n=inflight: small_calls(p, args.calls, n))
        await row(
            f"{args.echo_mib} MiB echo (MiB/s)",
            lambda p: _mib_per_s(echo(p, args.echo_mib)),
        )
        await row(
            f"map over 2 replicas, {args.words} items (items/s)",
            lambda p: machine_map(p, args.words),
        )
    print(f"medians of {args.rounds} interleaved rounds")
    heads = "".join(f" {name:>10}" for name, _ in sides)
    print(f"{'':50}{heads} {'ray/local':>10}")
    for label, (a, b, *rest) in rows.items():
        ratios = [y / x for x, y in zip(a, b, strict=True)]
        cells = "".join(f" {statistics.median(c):10.1f}" for c in (a, b, *rest))
        print(
            f"{label:50}{cells} {statistics.median(ratios):10.2f}"
            f"   (ratios {' '.join(f'{r:.2f}' for r in ratios)})"
        )
    a, b = MAP_CPU.get("Subprocess", []), MAP_CPU.get("RayPlacement", [])
    if a and b:
        print(
            f"{'map CPU per item (ms; driver, actors, cartridges)':50} "
            f"{statistics.median(a):10.3f} {statistics.median(b):10.3f} "
            f"{statistics.median(a) / statistics.median(b):10.2f}"
        )
    if args.spin_calls:
        await _spin_rows(args.spin_calls)
    if args.big_mib:
        big = await echo(remote, args.big_mib, watch=True)
        print(
            f"{args.big_mib} MiB echo over Ray: {big['MiB/s']:.1f} MiB/s; peak MiB: "
            + ", ".join(f"{k} {v:.0f}" for k, v in big.items() if k != "MiB/s")
        )
    ray.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--echo-mib", type=int, default=64)
    parser.add_argument("--big-mib", type=int, default=1024)
    parser.add_argument("--words", type=int, default=400)
    parser.add_argument("--spin-calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (medians)")
    parser.add_argument(
        "--through-ray", action="store_true", help="also without the direct stream (a column)"
    )
    sys.exit(anyio.run(main, parser.parse_args()))
