"""Live control from the engine: ``Engine.set_policy`` sends POLICY to running
cartridges; ``Engine.set_capacity`` sets a pool through the heartbeat's desired capacities."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from cartridge_runtime.engine import CallError, Engine, EngineError

POLICY_CAP = 'cap:in="media:enc=utf-8";op=policy;out="media:enc=utf-8"'

_CARTRIDGE = textwrap.dedent(
    f"""
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime, Request

    CAP = {POLICY_CAP!r}
    runtime = CartridgeRuntime(Manifest.build(
        name="ctl", version="1.0.0", description="ctl",
        caps=[CapDef.simple(CAP, "Policy", aliases="policy")],
        pools={{"gpu": [CAP]}}, capacities={{"gpu": 1}},
    ))

    @runtime.op(CAP)
    async def policy(req: Request) -> None:
        await req.output().emit_text(str(req.network.policy))

    if __name__ == "__main__":
        runtime.run()
    """
)


@pytest.mark.asyncio
async def test_set_policy_reaches_running_and_later_cartridges(tmp_path: Path) -> None:
    script = tmp_path / "ctl.py"
    script.write_text(_CARTRIDGE)
    async with Engine() as engine:
        engine.add_cartridge([sys.executable, str(script)], name="ctl")
        first = await engine.call(POLICY_CAP, [("media:enc=utf-8", "")], timeout=60)
        assert first.data == b"offline"
        engine.set_policy("full")
        after = await engine.call(POLICY_CAP, [("media:enc=utf-8", "")], timeout=60)
        assert after.data == b"full"
        with pytest.raises(ValueError):
            engine.set_policy("everything")
        assert engine.config.policy == "full"


@pytest.mark.asyncio
async def test_set_capacity_through_the_heartbeat(tmp_path: Path) -> None:
    script = tmp_path / "ctl.py"
    script.write_text(_CARTRIDGE)
    async with Engine() as engine:
        engine.add_cartridge([sys.executable, str(script)], name="ctl")
        with pytest.raises(EngineError):
            await engine.set_capacity("ctl", "gpu", 2)  # not running yet
        await engine.call(POLICY_CAP, [("media:enc=utf-8", "")], timeout=60)
        (before,) = engine.status()
        assert before.pools["gpu"]["limit"] == 1
        await engine.set_capacity("ctl", "gpu", 3)
        (after,) = engine.status()
        assert after.pools["gpu"]["limit"] == 3
        with pytest.raises(CallError) as info:
            await engine.set_capacity("ctl", "nope", 1)
        assert (info.value.code, info.value.attribution_class) == ("UNKNOWN_POOL", "internal")
        (same,) = engine.status()
        assert same.pools["gpu"]["limit"] == 3
        with pytest.raises(ValueError):
            await engine.set_capacity("ctl", "gpu", -1)
        with pytest.raises(EngineError):
            await engine.set_capacity("other", "gpu", 1)
