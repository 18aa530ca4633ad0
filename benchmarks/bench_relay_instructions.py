#!/usr/bin/env python3
"""Instructions per small call through a cartridge host, beside a direct call: a figure a
busy machine cannot skew (the relay's CPU per call from ``/proc`` moves with the load).

Counts with valgrind's cachegrind, as ``bench_instructions.py`` does, every process of two
set-ups running ``cartridges/interop.py``'s ``cap:echo`` one small call at a time: *direct*
(our engine runs the cartridge) and *host* (our engine's switch calls a host process, what
``cartridge host --listen`` runs, over its Unix socket, which runs the cartridge). Each
figure is the difference of a run with ``--calls`` more calls than a short one, divided by
``--calls``, so start-up and shutdown cancel out. The ratio direct / host is what the host's
calls/s would be of the direct calls/s on a machine where each call's chain of processes is
CPU-bound.

``--tree PATH`` counts another checkout of this project (its package first on
``PYTHONPATH``, for every process), for a before/after beside this one.

Usage::

    .venv/bin/python benchmarks/bench_relay_instructions.py [--calls 200] [--tree PATH ...]

Needs ``valgrind`` on PATH. Takes a minute or two per tree.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_instructions import BenchError, parse_cachegrind

ROOT = Path(__file__).resolve().parent.parent
SHORT = 20
RUN_TIMEOUT_S = 900.0

#: The host: ``cartridge host --listen SOCKET CARTRIDGE`` as the command runs it, with the
#: start-up steps given as long as the driver's (under valgrind on a loaded machine a
#: cartridge's HELLO can take longer than the default 10 s), and ending on SIGTERM as the
#: engine closes: its cartridge then exits on its own and is counted in every run.
_HOST = """
import signal, sys, anyio
from cartridge_runtime.engine import Engine
from cartridge_runtime.host import listen
sock, interop = sys.argv[3], sys.argv[4]
async def main():
    async with Engine(step_timeout=600.0, shutdown_grace=600.0) as engine:
        await engine.start(engine.add_cartridge(interop))
        async with anyio.create_task_group() as tg:
            tg.start_soon(listen, engine, sock)
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                async for _ in signals:
                    break
            tg.cancel_scope.cancel()
anyio.run(main)
"""

#: The driver, run under valgrind: ``MODE CALLS FOLDER``; the host, when asked, is started by
#: it (and traced too, as is each cartridge).
_DRIVER = """
import os, signal, subprocess, sys, time, anyio
from cartridge_runtime.engine import Engine
mode, calls, folder, interop = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
SLOW = 600.0
async def echo(engine):
    result = await engine.call_bytes("cap:echo", [("media:", b"x")])
    assert result.data == b"x", result.data
async def main():
    async with Engine(step_timeout=SLOW, shutdown_grace=SLOW, heartbeat_interval=None) as e:
        if mode == "direct":
            e.add_cartridge(interop)
        else:
            with anyio.fail_after(SLOW):
                while e.hosts()[0].state.value != "healthy" if e.hosts() else True:
                    if host.poll() is not None:
                        err = open(os.path.join(folder, "host.err")).read().strip()
                        raise SystemExit("the host exited: " + err[-300:])
                    if not e.hosts():
                        await e.add_host(os.path.join(folder, "host.sock"))
                    await anyio.sleep(0.1)
        for _ in range(calls):
            await echo(e)
host = None
if mode == "host":
    sock = os.path.join(folder, "host.sock")
    script = os.path.join(folder, "host.py")
    err = open(os.path.join(folder, "host.err"), "w")
    host = subprocess.Popen([sys.executable, script, "host", "--listen", sock, interop], stderr=err)
    while not os.path.exists(sock):
        if host.poll() is not None:
            err.close()
            raise SystemExit("the host exited: " + open(err.name).read().strip()[-300:])
        time.sleep(0.1)
try:
    anyio.run(main)
finally:
    if host is not None:
        host.send_signal(signal.SIGTERM)
        host.wait()
"""


def _run(tree: Path, mode: str, calls: int) -> dict[str, int]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH")) if p)
    env["PYTHONHASHSEED"] = "0"
    with tempfile.TemporaryDirectory(prefix="bench-relay-instr-", dir="/tmp") as out:
        os.chmod(out, 0o700)
        Path(out, "host.py").write_text(_HOST)
        command = [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--branch-sim=no",
            "--trace-children=yes",
            f"--cachegrind-out-file={out}/%p.out",
            "-q",
            sys.executable,
            "-c",
            _DRIVER,
            mode,
            str(calls),
            out,
            str(tree / "cartridges" / "interop.py"),
        ]
        proc = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            raise BenchError(f"a {mode} run failed: {lines[-1] if lines else 'no output'}")
        counted = [parse_cachegrind(p.read_text()) for p in Path(out).glob("*.out")]
    found: dict[str, int] = {}
    for cmd, n in counted:
        if " host --listen " in cmd:
            name = "host"
        elif " -c " in f" {cmd} " or cmd.endswith(" -c"):
            name = "engine"
        elif "interop.py" in cmd:
            name = "cartridge"
        else:
            continue  # a helper the run spawned (none expected)
        found[name] = found.get(name, 0) + n
    return found


def per_call(tree: Path, mode: str, calls: int) -> dict[str, float]:
    short = _run(tree, mode, SHORT)
    long = _run(tree, mode, SHORT + calls)
    out = {name: (long[name] - short.get(name, 0)) / calls for name in long}
    out["total"] = sum(out.values())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls counted (200)")
    parser.add_argument("--tree", type=Path, action="append", help="another checkout")
    args = parser.parse_args(argv)
    trees = [ROOT, *(args.tree or [])]
    try:
        for tree in trees:
            t = time.perf_counter()
            direct = per_call(tree, "direct", args.calls)
            host = per_call(tree, "host", args.calls)
            print(f"{tree}: ({time.perf_counter() - t:.0f} s)")
            for name, got in (("direct", direct), ("host", host)):
                parts = "  ".join(f"{k} {v / 1e3:,.0f} k" for k, v in got.items() if k != "total")
                print(f"  {name:6}  {got['total'] / 1e3:8,.0f} k instructions per call  ({parts})")
            print(f"  direct / host: {direct['total'] / host['total']:.2f}")
    except (BenchError, subprocess.TimeoutExpired, OSError) as exc:
        print(f"bench_relay_instructions: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
