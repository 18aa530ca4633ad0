"""Machine steps under supervision: a step inherits the activity timeout, and ``{retry=N}``
backs off between attempts."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from _engine_helpers import ROOT

from cartridge_runtime.engine import (
    Engine,
    InstanceChanged,
    InstanceState,
    MachineRunError,
)

WORDKIT = ROOT / "cartridges" / "wordkit.py"
WORD = "media:enc=utf-8;word"
FLAKY = f'flaky cap:in="{WORD}";op=flaky;out="{WORD}"'
SLOW = f'slow cap:in="{WORD}";op=slow;out="{WORD}"'


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_silent_step_times_out_by_inactivity(backend: str) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None, activity_timeout=0.3) as engine:
            env = {**os.environ, "WORDKIT_SLOW_SECONDS": "30"}
            engine.add_cartridge(WORDKIT, env=env)
            with pytest.raises(MachineRunError) as caught:
                await engine.run_machine(f"{SLOW}\n(word=w) -> slow -> out", {"w": "hi"})
            assert caught.value.code == "TIMEOUT"
            assert "no activity for 0.3 s" in str(caught.value)

    anyio.run(main, backend=backend)


def test_a_step_retry_backs_off(tmp_path: Path) -> None:
    async def main() -> None:
        async with (
            Engine(heartbeat_interval=None, retry_backoff=0.2) as engine,
            engine.subscribe() as events,
        ):
            env = {**os.environ, "WORDKIT_FLAKY_MARK": str(tmp_path / "died")}
            engine.add_cartridge(WORDKIT, env=env)
            result = await engine.run_machine(
                f"{FLAKY}\n(word=w) -> flaky{{retry=2}} -> out", {"w": "hi"}
            )
            assert result["out"].data == b"hi"
            changes = [e for e in events.pending() if isinstance(e, InstanceChanged)]
            assert [e.state for e in changes] == [
                InstanceState.STARTED,
                InstanceState.DIED,
                InstanceState.RESPAWNED,
            ]
            assert changes[2].at - changes[1].at >= 0.2  # the backoff came before the respawn

    anyio.run(main, backend="asyncio")
