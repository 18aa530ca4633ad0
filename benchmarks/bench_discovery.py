#!/usr/bin/env python3
"""Discovery of N installed cartridges: a cold run, then warm runs from the manifest cache.

    .venv/bin/python benchmarks/bench_discovery.py [--count 50] [--runs 7] [--profile]

Generates ``--count`` cartridges in a temporary folder, half as scripts in the root and half as
installed version folders (``{name}/{version}/cartridge.json``), each a copy of one small
cartridge under its own name that appends a line to a spawn log whenever it is started. Then,
in one run:

1. cold: ``discover(root, cache=DIR)`` with an empty cache (every cartridge is started once,
   which is also what a host without a cache pays on every discovery);
2. warm: the same call ``--runs`` times: the median time, and the processes started, counted
   twice (``Discovery.spawns`` and the spawn log's new lines; both must be 0);
3. warm ``cartridge list ROOT --json --cache DIR`` in a subprocess, ``--runs`` times (the
   median includes the interpreter's start and imports).

Prints each figure, the cold/warm ratio and the warm time against the 0.5 s target. A
benchmark, not a test: nothing asserts a time. ``--profile`` prints where a warm run's time
goes (cProfile, top functions by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cartridge_runtime.discovery import Discovery
from cartridge_runtime.engine import discover

#: A warm discovery of 50 installed cartridges must take less than this (in process).
TARGET_S: Final = 0.5

CARTRIDGE: Final = '''#!/usr/bin/env python3
"""A generated cartridge for the discovery benchmark."""
import os

from cartridge_runtime.manifest import ArgDef, CapDef, Manifest, OutputDef
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, WetContext

NAME = {name!r}
URN = 'cap:in="media:enc=utf-8";op=' + NAME + ';out="media:enc=utf-8"'

_log = os.environ.get("BENCH_SPAWN_LOG")
if _log:
    with open(_log, "a", encoding="utf-8") as handle:
        handle.write(NAME + "\\n")


class Echo(Op):
    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        await wet.request.output().write(await wet.request.take_input().require_stream("media:enc=utf-8"))


MANIFEST = Manifest.build(
    name=NAME,
    version="1.0.0",
    description="generated",
    caps=[
        CapDef(
            urn=URN,
            title=NAME,
            aliases=(NAME,),
            args=[ArgDef.stdin("media:enc=utf-8", name="input", description="text")],
            outputs=[OutputDef(media_urn="media:enc=utf-8", name="output", output_description="text")],
        )
    ],
)

if __name__ == "__main__":
    runtime = CartridgeRuntime(MANIFEST)
    runtime.register_op(URN, Echo)
    runtime.run()
'''


def generate(root: Path, count: int) -> None:
    """``count`` cartridges: even ones as root scripts, odd ones as installed versions."""
    for index in range(count):
        name = f"gen{index:03d}"
        text = CARTRIDGE.format(name=name)
        if index % 2 == 0:
            (root / f"{name}.py").write_text(text, encoding="utf-8")
            continue
        version = root / "installed" / name / "1.0.0"
        version.mkdir(parents=True)
        (version / "main.py").write_text(text, encoding="utf-8")
        (version / "main.py").chmod(0o755)
        record = {
            "name": name,
            "version": "1.0.0",
            "channel": "release",
            "registry_url": None,
            "entry": "main.py",
            "installed_at": "2026-12-01T00:00:00Z",
        }
        (version / "cartridge.json").write_text(json.dumps(record), encoding="utf-8")


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").split()) if path.exists() else 0


async def timed(root: Path, cache: Path) -> tuple[float, Discovery]:
    start = time.perf_counter()
    result = await discover(root, cache=cache)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50, help="cartridges generated")
    parser.add_argument("--runs", type=int, default=7, help="warm runs of each kind")
    parser.add_argument("--profile", action="store_true", help="profile one warm run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-discovery-") as tmp:
        root, cache, log = Path(tmp) / "root", Path(tmp) / "cache", Path(tmp) / "spawns.log"
        root.mkdir()
        generate(root, args.count)
        os.environ["BENCH_SPAWN_LOG"] = str(log)

        cold_s, cold = anyio.run(timed, root, cache)
        started_cold = lines(log)
        warm_times: list[float] = []
        warm_spawns = 0
        for _ in range(args.runs):
            seconds, warm = anyio.run(timed, root, cache)
            warm_times.append(seconds)
            warm_spawns += warm.spawns
        started_warm = lines(log) - started_cold

        command = [sys.executable, "-m", "cartridge_runtime.cli", "list", str(root), "--json"]
        command += ["--cache", str(cache)]
        cli_times: list[float] = []
        cli_spawns = 0
        for _ in range(args.runs):
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            cli_times.append(time.perf_counter() - start)
            cli_spawns += json.loads(done.stdout)["spawns"]
        started_cli = lines(log) - started_cold - started_warm

        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            anyio.run(timed, root, cache)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(15)

    warm_s = statistics.median(warm_times)
    cli_s = statistics.median(cli_times)
    print(f"cartridges: {args.count} ({len(cold.found)} found, {len(cold.refused)} refused)")
    print(f"cold discover (empty cache):   {cold_s:8.3f} s   processes started: {started_cold}")
    print(
        f"warm discover (median of {args.runs}): {warm_s:8.4f} s   processes started: "
        f"{started_warm} (Discovery.spawns: {warm_spawns})"
    )
    print(
        f"warm `cartridge list --json`:  {cli_s:8.3f} s   processes started: {started_cli} "
        f"(reported: {cli_spawns}; includes the interpreter's start)"
    )
    print(f"cold / warm: {cold_s / warm_s:.0f}x")
    verdict = "met" if warm_s < TARGET_S and started_warm == 0 else "MISSED"
    print(f"target: warm under {TARGET_S} s with 0 processes started: {verdict}")


if __name__ == "__main__":
    main()
