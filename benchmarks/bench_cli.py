#!/usr/bin/env python3
"""The ``cartridge`` command as a user feels it: start-up, a large echo, a listing.

    .venv/bin/python benchmarks/bench_cli.py [--rounds 7] [--echo-mib 256] [--count 50]
        [--compare TREE]

Measured side by side in one run, rounds interleaved so that a busy host weighs on both sides
alike; each figure is the median of its rounds:

1. start-up: ``cartridge --help`` and ``cartridge call x.py echo --help`` against
   ``python -c "import anyio, cbor2"`` (whole processes; target: within 1.5x); beside them,
   a bundled cartridge's own start (``interop.py manifest``) and ``import
   cartridge_runtime.manifest`` (no target: before/after figures with ``--compare``);
2. ``cartridge call cartridges/interop.py echo < FILE > /dev/null`` (the whole process: the
   interpreter, imports, the cartridge's start, the bytes) against ``Engine.call``'s echo of
   the same bytes on a started engine, in this process (target: the command at >= 0.8 of the
   engine's rate), wall and CPU time;
3. ``cartridge list ROOT`` over ``--count`` installed cartridges, warm manifest cache (whole
   process; target: <= 0.3 s).

``--compare TREE`` runs the help, echo and listing commands of another checkout (its package
on ``PYTHONPATH``, this environment's dependencies) in the same rounds, as a before/after.
Compile both trees' modules first (``python -m compileall -q cartridge_runtime``) when
``PYTHONDONTWRITEBYTECODE`` is set: a module compiled from source in every round weighs on
the side that has it.
A benchmark, not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Final

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_discovery import generate  # noqa: E402

from cartridge_runtime.engine import Engine, OutputData  # noqa: E402

INTEROP: Final = ROOT / "cartridges" / "interop.py"
CLI: Final = [sys.executable, "-m", "cartridge_runtime.cli"]
BLOCK: Final = 1 << 20
HELP_TARGET: Final = 1.5
ECHO_TARGET: Final = 0.8
LIST_TARGET_S: Final = 0.3


#: The CPU seconds (user + system, its children included) of the last command :func:`_wall` ran.
_LAST_CPU: list[float] = [0.0]


def _wall(command: list[str], **kwargs: object) -> float:
    """Seconds of ``command``, run from a neutral folder (``python -m`` puts the working
    folder first on the path: the tree measured is the one ``PYTHONPATH`` names)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir(),
                   **kwargs)  # type: ignore[call-overload]  # fmt: skip
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    _LAST_CPU[0] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds


async def _pieces(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as handle:
        while block := handle.read(BLOCK):
            yield block


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far (``/proc``; 0.0 where
    it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _engine_echo(path: Path, size: int, rounds: int) -> list[tuple[float, float]]:
    """Wall and CPU seconds (this process, all threads, plus the cartridge's) of
    ``Engine.call`` echoing ``path`` on a started engine, per round."""
    times = []
    async with Engine() as engine:
        name = engine.add_cartridge(INTEROP)
        await engine.start(name)
        manifest = engine.manifest(name)
        cap = manifest.find_cap("echo")
        media = next(a.stream_urn for a in cap.args if a.has_stdin_source)
        pid = engine.status()[0].pid or 0
        for _ in range(rounds):
            cpu = time.process_time() + _proc_cpu(pid)
            start = time.perf_counter()
            got = 0
            async with engine.call(cap.urn, [(media, _pieces(path))]) as response:
                async for event in response:
                    if isinstance(event, OutputData) and event.output is None:
                        got += len(event.value)
            wall = time.perf_counter() - start
            times.append((wall, time.process_time() + _proc_cpu(pid) - cpu))
            if got != size:
                raise RuntimeError(f"echo gave {got} bytes")
    return times


def _cli_echo(path: Path, env: dict[str, str] | None = None) -> float:
    with path.open("rb") as stdin:
        return _wall(
            [*CLI, "call", str(INTEROP), "echo"], stdin=stdin, stderr=subprocess.PIPE, env=env
        )


def _rounds(rounds: int, sides: dict[str, Callable[[], float]]) -> dict[str, tuple[float, float]]:
    """The median wall and CPU seconds of each side, the sides taken in turn in every round
    (on a loaded host the CPU time is the steadier figure)."""
    walls: dict[str, list[float]] = {name: [] for name in sides}
    cpus: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, run in sides.items():
            walls[name].append(run())
            cpus[name].append(_LAST_CPU[0])
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in sides}


def _echo_figures(tmp: Path, args: argparse.Namespace) -> None:
    """Figure 2: the whole ``cartridge call`` process against ``Engine.call``'s echo."""
    big = tmp / "big.bin"
    with big.open("wb") as handle:
        block = os.urandom(BLOCK)
        for _ in range(args.echo_mib):
            handle.write(block)
    engine_times: list[tuple[float, float]] = []
    cli_times: list[tuple[float, float]] = []
    other_times: list[tuple[float, float]] = []
    other = {**os.environ, "PYTHONPATH": str(args.compare)} if args.compare else None
    for _ in range(args.rounds):  # interleaved: a busy spell weighs on both sides alike
        engine_times += anyio.run(_engine_echo, big, args.echo_mib * BLOCK, 1)
        cli_times.append((_cli_echo(big), _LAST_CPU[0]))
        if other is not None:
            other_times.append((_cli_echo(big, other), _LAST_CPU[0]))
    mib = float(args.echo_mib)
    engine_rate = mib / statistics.median(t for t, _ in engine_times)
    cli_rate = mib / statistics.median(t for t, _ in cli_times)
    engine_cpu = mib / statistics.median(c for _, c in engine_times)
    cli_cpu = mib / statistics.median(c for _, c in cli_times)
    ratio = cli_rate / engine_rate
    print(f"{args.echo_mib} MiB echo (median of {args.rounds} interleaved rounds): MiB per wall")
    print("second, and per CPU second (engine and cartridge processes; the command's children)")
    print(
        f"  Engine.call (started engine)   {engine_rate:8.0f} MiB/s   CPU {engine_cpu:6.0f} MiB/s"
    )
    print(f"  cartridge call (whole process) {cli_rate:8.0f} MiB/s   CPU {cli_cpu:6.0f} MiB/s"
          f"   {ratio:5.2f}x wall, {cli_cpu / engine_cpu:5.2f}x CPU")  # fmt: skip
    if other_times:
        other_rate = mib / statistics.median(t for t, _ in other_times)
        other_cpu = mib / statistics.median(c for _, c in other_times)
        print(f"  --compare: cartridge call      {other_rate:8.0f} MiB/s   CPU {other_cpu:6.0f} MiB/s"
              f"   {other_rate / engine_rate:5.2f}x wall, {other_cpu / engine_cpu:5.2f}x CPU")  # fmt: skip
    print(f"  target: >= {ECHO_TARGET}x: {'met' if ratio >= ECHO_TARGET else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds of each figure")
    parser.add_argument("--echo-mib", type=int, default=256, help="MiB echoed (0: no echo)")
    parser.add_argument("--count", type=int, default=50, help="cartridges listed")
    parser.add_argument("--compare", type=Path, help="another checkout, measured alongside")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    other = {**os.environ, "PYTHONPATH": str(args.compare)} if args.compare else None

    sides: dict[str, Callable[[], float]] = {
        "import anyio, cbor2": lambda: _wall([sys.executable, "-c", "import anyio, cbor2"]),
        "cartridge --help": lambda: _wall([*CLI, "--help"], env=env),
        "cartridge call ... --help": lambda: _wall(
            [*CLI, "call", str(INTEROP), "echo", "--help"], env=env
        ),
    }
    if other is not None:
        sides["--compare: cartridge --help"] = lambda: _wall([*CLI, "--help"], env=other)
        sides["--compare: call ... --help"] = lambda: _wall(
            [*CLI, "call", str(INTEROP), "echo", "--help"], env=other
        )
    # A cartridge's own start (what every engine spawn pays) and a lean import of the package.
    for label, tree in (("", env), ("--compare: ", other)):
        if tree is None:
            continue
        sides[f"{label}interop.py manifest"] = functools.partial(
            _wall, [sys.executable, str(INTEROP), "manifest"], env=tree
        )
        sides[f"{label}import ...manifest"] = functools.partial(
            _wall, [sys.executable, "-c", "import cartridge_runtime.manifest"], env=tree
        )
    start = _rounds(args.rounds, sides)
    base, base_cpu = start["import anyio, cbor2"]
    print(f"start-up (median of {args.rounds}, whole processes): wall, and CPU user+system")
    for name, (seconds, cpu) in start.items():
        print(f"  {name:<30} {seconds * 1000:7.0f} ms {seconds / base:5.2f}x   "
              f"CPU {cpu * 1000:5.0f} ms {cpu / max(base_cpu, 1e-3):5.2f}x")  # fmt: skip
    worst = max(start["cartridge --help"][0], start["cartridge call ... --help"][0]) / base
    print(f"  target: within {HELP_TARGET}x: {'met' if worst <= HELP_TARGET else 'MISSED'}")

    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        if args.echo_mib > 0:
            _echo_figures(Path(tmp), args)
        root, cache = Path(tmp) / "root", Path(tmp) / "cache"
        root.mkdir()
        generate(root, args.count)
        listing = [*CLI, "list", str(root), "--cache", str(cache)]
        _wall(listing, env=env)  # cold: fills the manifest cache
        lists: dict[str, Callable[[], float]] = {
            "import anyio, cbor2": lambda: _wall([sys.executable, "-c", "import anyio, cbor2"]),
            "list": lambda: _wall(listing, env=env),
        }
        if other is not None:
            lists["--compare: list"] = lambda: _wall(listing, env=other)
        listed = _rounds(args.rounds, lists)
        warm = listed["list"][0]
        print(f"`cartridge list` over {args.count} cartridges, warm cache (median): wall, CPU")
        for name, (seconds, cpu) in listed.items():
            print(f"  {name:<30} {seconds:7.3f} s   CPU {cpu:6.3f} s")
        print(f"  target: <= {LIST_TARGET_S} s: {'met' if warm <= LIST_TARGET_S else 'MISSED'}")


if __name__ == "__main__":
    main()
