#!/usr/bin/env python3
"""Relay benchmark: calls through a cartridge host over its Unix socket, side by side with
direct calls and with capdag 1.524.58's switch + host pair, in one run.

Three set-ups serve ``cartridges/interop.py``'s ``cap:echo``:

- **direct**: our engine runs the cartridge itself;
- **host**: our engine's switch (``Engine.add_host``) calls a ``cartridge host --listen``
  process that runs the cartridge;
- **capdag**: capdag's ``RelaySwitch`` calls capdag's host runtime behind its ``RelaySlave``
  (a subprocess), which runs the same cartridge (skipped without capdag).

For each: ``--seq`` small sequential echos (calls/s) and one streamed echo of ``--mib`` MiB
(MB/s, 10^6 bytes per second; capdag gets ``--capdag-mib``, its rate being far lower). Direct
and host run side by side in ``--rounds`` interleaved rounds (medians printed), with the CPU
time each process spends per small call (from ``/proc``: a figure the machine's load moves far
less than the wall clock). Prints each figure and the ratios host/direct (target >= 0.8) and
host/capdag (target >= 20).

Usage::

    .venv/bin/python benchmarks/bench_relay.py [--seq 300] [--mib 256] [--rounds 3]
        [--capdag-seq 40] [--capdag-mib 16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cartridge_runtime.engine import Engine, OutputData  # noqa: E402

INTEROP = ROOT / "cartridges" / "interop.py"
CAPDAG_HOST = ROOT / "tests" / "relay" / "fixtures" / "capdag_host.py"
ECHO = "cap:echo"
BLOCK = 1 << 20


async def _blocks(mib: int) -> AsyncIterator[bytes]:
    block = os.urandom(BLOCK)
    for _ in range(mib):
        yield block


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(x) for x in text]
    return found


async def _small(engine: Engine, seq: int, pids: dict[str, int]) -> dict[str, float]:
    """``seq`` echos one at a time: calls/s, and CPU microseconds per call of each process."""
    before = {name: _cpu_s(pid) for name, pid in pids.items()}
    t = time.perf_counter()
    for _ in range(seq):
        result = await engine.call_bytes(ECHO, [("media:", b"x")])
        if result.data != b"x":
            raise RuntimeError(f"echo answered {result.data!r}")
    out = {"calls_s": seq / (time.perf_counter() - t)}
    for name, pid in pids.items():
        out[f"cpu_us_{name}"] = (_cpu_s(pid) - before[name]) / seq * 1e6
    return out


async def _echo(engine: Engine, mib: int) -> float:
    got = 0
    t = time.perf_counter()
    async with engine.call(ECHO, [("media:", _blocks(mib))]) as response:
        async for event in response:
            if isinstance(event, OutputData):
                got += len(event.value)
    if got != mib * BLOCK:
        raise RuntimeError(f"echo returned {got} bytes of {mib * BLOCK}")
    return got / (time.perf_counter() - t) / 1e6


def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="bench-relay-", dir="/tmp"))
    os.chmod(folder, 0o700)
    return folder


async def ours(seq: int, mib: int, rounds: int) -> dict[str, dict[str, float]]:
    """Direct calls and calls through a ``cartridge host`` process, in interleaved rounds
    (both set-ups live at once, so a change of the machine's load hits both alike); the
    median of each figure over the rounds."""
    sock = _folder() / "host.sock"
    cli = Path(sys.executable).with_name("cartridge")
    host = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is timed
        [str(cli), "host", "--listen", str(sock), str(INTEROP)],
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(60):
            while not sock.exists():  # noqa: ASYNC110 - a file another process creates
                await anyio.sleep(0.05)
        async with Engine() as direct, Engine() as switch:
            direct.add_cartridge(INTEROP)
            await switch.add_host(sock)
            with anyio.fail_after(30):
                while switch.hosts()[0].state.value != "healthy":  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            for engine in (direct, switch):  # warm: started, routed
                await engine.call_bytes(ECHO, [("media:", b"x")])
            me = os.getpid()
            (direct_cartridge,) = (p for p in _children(me) if p != host.pid)
            (hosted,) = _children(host.pid)
            pids = {
                "direct": {"engine": me, "cartridge": direct_cartridge},
                "host": {"engine": me, "host": host.pid, "cartridge": hosted},
            }
            runs: dict[str, list[dict[str, float]]] = {"direct": [], "host": []}
            for _ in range(rounds):
                for name, engine in (("direct", direct), ("host", switch)):
                    figures = await _small(engine, seq, pids[name])
                    figures["echo_mb_s"] = await _echo(engine, mib)
                    runs[name].append(figures)
            return {
                name: {k: statistics.median(r[k] for r in got) for k in got[0]}
                for name, got in runs.items()
            }
    finally:
        host.terminate()
        host.wait()


def capdag_pair(seq: int, mib: int) -> dict[str, float] | None:
    try:
        sys.path.insert(0, str(ROOT / "tests" / "relay"))
        from _capdag_switch import CapdagSwitch
    except ImportError:
        return None
    sock = _folder() / "capdag.sock"
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    host = subprocess.Popen(
        [sys.executable, str(CAPDAG_HOST), str(sock), str(INTEROP)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert host.stdout is not None and host.stdout.readline().strip() == "ready"
        switch = CapdagSwitch(str(sock))
        switch.call(ECHO, [("media:", b"x")], timeout=60)  # warm: spawned
        t = time.perf_counter()
        for _ in range(seq):
            switch.call(ECHO, [("media:", b"x")], timeout=60)
        calls = seq / (time.perf_counter() - t)
        data = os.urandom(mib * BLOCK)
        t = time.perf_counter()
        got = switch.call(ECHO, [("media:", data)], timeout=600)
        rate = len(got["data"]) / (time.perf_counter() - t) / 1e6
        if bytes(got["data"]) != data:
            raise RuntimeError("capdag's echo differs")
        threading.Thread(target=switch.close, daemon=True).start()
        return {"calls_s": calls, "echo_mb_s": rate}
    finally:
        host.kill()
        host.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=300, help="small sequential calls (300)")
    parser.add_argument("--mib", type=int, default=256, help="echo size in MiB (256)")
    parser.add_argument("--capdag-seq", type=int, default=40, help="capdag's small calls (40)")
    parser.add_argument("--capdag-mib", type=int, default=16, help="capdag's echo MiB (16)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    out: dict[str, Any] = anyio.run(ours, args.seq, args.mib, args.rounds)
    out["capdag"] = capdag_pair(args.capdag_seq, args.capdag_mib)
    d, h, c = out["direct"], out["host"], out["capdag"]
    ratios = {
        "host_vs_direct_calls": h["calls_s"] / d["calls_s"],
        "host_vs_direct_echo": h["echo_mb_s"] / d["echo_mb_s"],
    }
    if c is not None:
        ratios["host_vs_capdag_calls"] = h["calls_s"] / c["calls_s"]
        ratios["host_vs_capdag_echo"] = h["echo_mb_s"] / c["echo_mb_s"]
    out["ratios"] = ratios
    for name in ("direct", "host", "capdag"):
        if out[name] is not None:
            cpu = "  ".join(
                f"{k[7:]} {v:6.0f}" for k, v in out[name].items() if k.startswith("cpu_us_")
            )
            print(
                f"{name:7s} small calls {out[name]['calls_s']:9.1f}/s   "
                f"echo {out[name]['echo_mb_s']:8.1f} MB/s"
                + (f"   CPU us per small call: {cpu}" if cpu else "")
            )
    for name, value in ratios.items():
        print(f"{name:22s} {value:8.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
