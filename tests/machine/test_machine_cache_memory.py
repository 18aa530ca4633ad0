"""A large step output goes into the step cache and comes back out of it with bounded memory:
the run holds a few pieces at a time, never the value (peak RSS of a run in a process of its
own, against the value's size)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

KIT = Path(__file__).with_name("runskit.py")
#: The step output's size: 1 GiB scaled down to 256 MiB, so the test stays under half a
#: minute on a loaded two-core host (the bound below does not depend on it).
SIZE = 256 << 20
#: Peak RSS the run may reach, far below the value's size.
BOUND = 192 << 20

SCRIPT = textwrap.dedent(
    """
    import hashlib, json, os, sys
    import anyio
    from cartridge_runtime.engine import Engine, MachineOutputData

    MAKE = 'cap:in="media:enc=utf-8";op=make;out="media:data;runs"'
    S1 = 'cap:in="media:data;runs";op=stage-1;out="media:data;runs"'
    TEXT = f"mk {MAKE}\\ns1 {S1}\\nn -> mk -> big\\nbig -> s1 -> out"

    async def run(engine, machine):
        digest, size = hashlib.sha256(), 0
        async with engine.stream_machine(machine, {"n": sys.argv[2]}, cache=sys.argv[3]) as r:
            async for event in r:
                if isinstance(event, MachineOutputData):
                    digest.update(event.value)
                    size += len(event.value)
        steps = {n: [s.calls, s.cache_hits] for n, s in r.result.steps.items()}
        return digest.hexdigest(), size, steps

    async def main():
        async with Engine() as engine:
            engine.add_cartridge(sys.argv[1], env=dict(os.environ))
            machine = await engine.machine(TEXT)
            cold = await run(engine, machine)
            warm = await run(engine, machine)
        # VmHWM belongs to this program's own memory map: ru_maxrss would carry over the peak
        # of the process it was forked from (a large test runner) across exec.
        with open("/proc/self/status") as status:
            line = next(l for l in status if l.startswith("VmHWM:"))
        peak = int(line.split()[1]) * 1024
        print(json.dumps({"cold": cold, "warm": warm, "peak": peak}))

    anyio.run(main)
    """
)


@pytest.mark.slow
def test_a_large_step_output_is_cached_and_replayed_with_bounded_memory(tmp_path: Path) -> None:
    script = tmp_path / "big.py"
    script.write_text(SCRIPT)
    log = tmp_path / "calls.log"
    done = subprocess.run(
        [sys.executable, str(script), str(KIT), str(SIZE), str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "RUNSKIT_CALL_LOG": str(log),
             "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout)
    cold_digest, cold_size, cold_steps = facts["cold"]
    warm_digest, warm_size, warm_steps = facts["warm"]
    assert cold_size == warm_size == SIZE
    assert cold_digest == warm_digest
    assert cold_steps == {"mk": [1, 0], "s1": [1, 0]}
    assert warm_steps == {"mk": [0, 1], "s1": [0, 1]}
    assert log.read_text().split() == ["make", "stage-1"]  # the warm run called nothing
    blobs = list((tmp_path / "cache" / "blobs").glob("*/*"))
    assert [b.stat().st_size for b in blobs] == [SIZE]  # both steps stored the same bytes once
    assert facts["peak"] < BOUND, f"peak RSS {facts['peak'] >> 20} MiB"
