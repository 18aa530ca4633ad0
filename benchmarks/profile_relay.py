#!/usr/bin/env python3
"""Where a small call through a cartridge host spends its Python: the switch's process and the
host's, each under cProfile, beside a direct call.

Runs ``--calls`` sequential small echos (``cartridges/interop.py``'s ``cap:echo``) three ways:
direct (our engine runs the cartridge), and through a host (our engine's switch calls a host
process, profiled in that process, which runs the cartridge). Prints the Python function
calls per small call of each profiled side (a count the machine's load does not move, unlike
the wall clock) and each side's ``--top`` functions by own time.

Usage::

    .venv/bin/python benchmarks/profile_relay.py [--calls 1000] [--top 12]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cartridge_runtime.engine import Engine  # noqa: E402

INTEROP = ROOT / "cartridges" / "interop.py"
ECHO = "cap:echo"
WARM = 20

#: The host's process: an engine serving the cartridge on a socket, profiled from its first
#: relayed call to SIGTERM (start-up stays out of the counts).
_HOST = """
import cProfile, signal, sys, anyio
from cartridge_runtime.engine import Engine
from cartridge_runtime.host import listen
sock, target, out = sys.argv[1:4]
prof = cProfile.Profile()
async def main():
    async with Engine() as engine:
        await engine.start(engine.add_cartridge(target))
        with anyio.open_signal_receiver(signal.SIGUSR1, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:
                tg.start_soon(listen, engine, sock)
                async for number in signals:
                    if number == signal.SIGUSR1:
                        prof.enable()
                        continue
                    prof.disable()
                    tg.cancel_scope.cancel()
anyio.run(main)
prof.dump_stats(out)
"""


async def _echo(engine: Engine) -> None:
    result = await engine.call_bytes(ECHO, [("media:", b"x")])
    if result.data != b"x":
        raise RuntimeError(f"echo answered {result.data!r}")


async def _profiled(engine: Engine, calls: int, on_start: object = None) -> cProfile.Profile:
    for _ in range(WARM):
        await _echo(engine)
    if callable(on_start):
        on_start()
        await anyio.sleep(0.2)  # the host turns its profiler on
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        await _echo(engine)
    prof.disable()
    return prof


async def direct(calls: int) -> cProfile.Profile:
    async with Engine() as engine:
        engine.add_cartridge(INTEROP)
        return await _profiled(engine, calls)


async def through_host(calls: int, folder: Path) -> tuple[cProfile.Profile, pstats.Stats]:
    sock, out = folder / "host.sock", folder / "host.prof"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    host = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is profiled
        [sys.executable, "-c", _HOST, str(sock), str(INTEROP), str(out)], env=env
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
            prof = await _profiled(engine, calls, lambda: host.send_signal(signal.SIGUSR1))
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(timeout=60)
    return prof, pstats.Stats(str(out))


def _report(name: str, stats: pstats.Stats, calls: int, top: int) -> None:
    per_call = stats.total_calls / calls  # type: ignore[attr-defined]
    turns = sum(
        row[1]
        for (path, _line, func), row in stats.stats.items()  # type: ignore[attr-defined]
        if func == "_run_once" and path.endswith("base_events.py")
    )
    print(
        f"{name}: {per_call:,.0f} Python function calls per small call, "
        f"{turns / calls:.1f} event-loop turns"
    )
    text = io.StringIO()
    stats.stream = text  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(top)
    rows = [ln for ln in text.getvalue().splitlines() if ln.strip()][-top:]
    for row in rows:
        print("   ", row.replace(str(ROOT) + "/", "")[:150])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls profiled (1000)")
    parser.add_argument("--top", type=int, default=12, help="functions shown per side (12)")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="profile-relay-", dir="/tmp"))
    os.chmod(folder, 0o700)
    own = anyio.run(direct, args.calls)
    switch, host = anyio.run(through_host, args.calls, folder)
    _report("direct: the engine", pstats.Stats(own), args.calls, args.top)
    _report("through a host: the switch's engine", pstats.Stats(switch), args.calls, args.top)
    _report("through a host: the host", host, args.calls, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
