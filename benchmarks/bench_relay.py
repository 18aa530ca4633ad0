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
(MB/s, 10^6 bytes per second; capdag gets ``--capdag-mib``, its rate being far lower). Prints
each figure and the ratios host/direct (target >= 0.8) and host/capdag (target >= 20).

Usage::

    .venv/bin/python benchmarks/bench_relay.py [--seq 300] [--mib 256] [--capdag-seq 40]
        [--capdag-mib 16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
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


async def _ours(engine: Engine, seq: int, mib: int) -> dict[str, float]:
    await engine.call_bytes(ECHO, [("media:", b"x")])  # warm: started, routed
    t = time.perf_counter()
    for _ in range(seq):
        result = await engine.call_bytes(ECHO, [("media:", b"x")])
        if result.data != b"x":
            raise RuntimeError(f"echo answered {result.data!r}")
    calls = seq / (time.perf_counter() - t)
    got = 0
    t = time.perf_counter()
    async with engine.call(ECHO, [("media:", _blocks(mib))]) as response:
        async for event in response:
            if isinstance(event, OutputData):
                got += len(event.value)
    if got != mib * BLOCK:
        raise RuntimeError(f"echo returned {got} bytes of {mib * BLOCK}")
    return {"calls_s": calls, "echo_mb_s": got / (time.perf_counter() - t) / 1e6}


async def direct(seq: int, mib: int) -> dict[str, float]:
    async with Engine() as engine:
        engine.add_cartridge(INTEROP)
        return await _ours(engine, seq, mib)


def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="bench-relay-", dir="/tmp"))
    os.chmod(folder, 0o700)
    return folder


async def through_host(seq: int, mib: int) -> dict[str, float]:
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
        async with Engine() as engine:
            await engine.add_host(sock)
            with anyio.fail_after(30):
                while engine.hosts()[0].state.value != "healthy":  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            return await _ours(engine, seq, mib)
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
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {
        "direct": anyio.run(direct, args.seq, args.mib),
        "host": anyio.run(through_host, args.seq, args.mib),
        "capdag": capdag_pair(args.capdag_seq, args.capdag_mib),
    }
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
            print(
                f"{name:7s} small calls {out[name]['calls_s']:9.1f}/s   "
                f"echo {out[name]['echo_mb_s']:8.1f} MB/s"
            )
    for name, value in ratios.items():
        print(f"{name:22s} {value:8.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
