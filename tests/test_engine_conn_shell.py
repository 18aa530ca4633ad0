"""The engine's connection as a shell over the sans-IO HostConnection: its state is the core's,
the start-up walks the core's phases, probes go through the core's bookkeeping (in process,
over memory streams)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from _runtime_cartridge import ECHO, build_runtime

from cartridge_runtime.engine import Engine, InProcess, SpawnFailed
from cartridge_runtime.engine._conn import Connection
from cartridge_runtime.protocol import ConnState, Limits, StartupPhase


def connection(engine: Engine, name: str) -> Connection:
    conn = engine._slots[name].replicas[0].conn  # white-box: the shell and its core
    assert conn is not None
    return conn


@pytest.mark.asyncio
async def test_a_started_connection_is_ready_and_its_core_done() -> None:
    async with Engine(limits=Limits(max_chunk=4096), heartbeat_interval=None) as engine:
        name = engine.add_cartridge("rt", placement=InProcess(build_runtime()))
        await engine.start(name)
        conn = connection(engine, name)
        assert conn.state is ConnState.READY and conn.ready
        assert conn.core.handshake.phase is StartupPhase.DONE
        assert conn.limits.max_chunk == 4096 and conn.outbox.max_frame == conn.limits.max_frame
        result = await engine.call(ECHO, [("media:", b"hi")])
        assert result.data == b"hi" and conn.in_flight == 0
        assert await engine.probe(name)
        assert conn.healthy and conn.last_heartbeat is not None
        await engine.stop(name)
        assert conn.state is ConnState.DEAD and conn.core.gone and conn.outbox.closed


@pytest.mark.asyncio
async def test_a_start_up_that_fails_leaves_the_core_failed(tmp_path: Path) -> None:
    script = tmp_path / "chatty.py"
    script.write_text(
        "import sys, time\nprint('hello there')\nsys.stdout.flush()\ntime.sleep(30)\n"
    )
    async with Engine(step_timeout=10, heartbeat_interval=None) as engine:
        name = engine.add_cartridge([sys.executable, str(script)])
        with anyio.fail_after(30), pytest.raises(SpawnFailed) as info:
            await engine.start(name)
        conn = connection(engine, name)
        assert conn.state is ConnState.FAILED
        assert conn.core.handshake.phase is StartupPhase.FAILED
        assert info.value.step == "hello"
        assert "instead of Bifaci frames" in info.value.message
