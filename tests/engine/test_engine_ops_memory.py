"""Memory guard: an instance past its memory limit is killed, its calls fail with OOM_KILLED
(class resource) naming the limit and the figure, its neighbour keeps serving, and the next
call starts it again."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from cartridge_runtime.engine import (
    CallError,
    Engine,
    EngineConfig,
    InstanceChanged,
    InstanceState,
    OutOfMemory,
)
from cartridge_runtime.engine._supervision._memory import (
    describe_bytes,
    memory_exceeded,
    resident_bytes,
)

SCRIPT = Path(__file__).with_name("ops_cartridge.py")
TEXT = "media:enc=utf-8"
HOG = f'cap:in="{TEXT}";op=hog;out="{TEXT}"'
ECHO = f'cap:in="{TEXT}";op=echo;out="{TEXT}"'
MIB = 1 << 20

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_the_verdict_needs_a_figure_and_a_limit() -> None:
    assert memory_exceeded(51 * MIB, 50 * MIB)
    assert not memory_exceeded(50 * MIB, 50 * MIB)
    assert not memory_exceeded(None, 50 * MIB)
    assert not memory_exceeded(10**12, None)
    assert describe_bytes(52 * MIB + MIB // 2) == "52.5 MiB"
    assert describe_bytes(512) == "512 B"


@linux_only
def test_the_figure_counts_the_process_tree() -> None:
    own = resident_bytes(os.getpid())
    assert own is not None and own > MIB
    assert resident_bytes(2**22 + 12345) is None  # no such process


@linux_only
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_cartridge_that_grows_without_bound_is_oom_killed_and_its_neighbour_serves(
    backend: str,
) -> None:
    async def main() -> None:
        config = EngineConfig(memory_interval=0.05, heartbeat_interval=None)
        async with Engine(config) as engine, engine.subscribe() as events:
            hog = engine.add_cartridge(SCRIPT, name="hog", memory_limit=50 * MIB)
            neighbour = engine.add_cartridge(
                SCRIPT, name="neighbour", env={**os.environ, "OPS_TAG": "n"}
            )
            await engine.start(hog)
            await engine.start(neighbour)
            before = {s.name: s for s in engine.status()}
            assert before[hog].memory_limit == 50 * MIB
            assert before[hog].replicas[0].resident_memory is not None
            assert before[hog].replicas[0].memory_enforcement == "watchdog+rlimit_as"
            assert before[neighbour].memory_limit is None
            with anyio.fail_after(30), pytest.raises(CallError) as caught:
                await engine.call(HOG, [(TEXT, b"eat")])
            error = caught.value
            assert isinstance(error, OutOfMemory)
            assert error.code == "OOM_KILLED" and error.attribution_class == "resource"
            assert "limit of 50.0 MiB" in error.message and "MiB resident" in error.message
            assert error.resident > error.limit == 50 * MIB
            # The neighbour (another process of the same script) never noticed.
            tagged = await engine.call(f"{ECHO};tag=n", [(TEXT, b"still here")])
            assert tagged.data == b"still here"
            status = {s.name: s for s in engine.status()}
            assert status[neighbour].state == "running" and status[neighbour].starts == 1
            assert "passed its limit" in (status[hog].last_exit or "")
            # The next call respawns the killed one.
            pid = await respawned_pid(engine, hog)
            assert pid is not None
            ooms = [
                e
                for e in events.pending()
                if isinstance(e, InstanceChanged) and e.state is InstanceState.OOM_KILLED
            ]
            assert [e.cartridge for e in ooms] == [hog]

    anyio.run(main, backend=backend)


async def respawned_pid(engine: Engine, name: str) -> Any:
    await engine.start(name)
    (status,) = [s for s in engine.status() if s.name == name]
    assert status.starts == 2 and status.state == "running"
    return status.pid
