"""Supervision on Ray: the memory guard, idle stop and drain work on Ray instances (through the
fake backend of ``test_engine_ray_fake``: the real actor logic, no cluster), and the default
CPU reservation lets several instances share a node."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from cartridge_runtime.engine import CartridgeRetired, Engine, OutOfMemory

pytest.importorskip("ray")

HERE = Path(__file__).parent
SCRIPT = HERE / "ops_cartridge.py"
MIB = 1 << 20


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OPS = load(SCRIPT, "ops_cartridge")
FAKE = load(HERE / "test_engine_ray_fake.py", "ray_fake_backend")


async def until(predicate: Any, seconds: float = 20) -> None:
    with anyio.fail_after(seconds):
        while not predicate():  # noqa: ASYNC110 - engine state has no event to wait on
            await anyio.sleep(0.01)


def test_an_instance_reserves_a_quarter_cpu_and_a_placement_error_names_the_holders() -> None:
    from cartridge_runtime.engine.ray import RayPlacement

    placement = RayPlacement()
    assert placement.num_cpus == 0.25 and placement.request() == {"CPU": 0.25}
    text = RayPlacement(num_cpus=4, placement_timeout=5)._unplaced(
        {"CPU": 2}, "text/0 (CPU=0.25), text/1 (CPU=0.25)"
    )
    assert text == (
        "no Ray node can take the instance within placement_timeout=5s: missing CPU=4 "
        "(the cluster has 2); held by this engine: text/0 (CPU=0.25), text/1 (CPU=0.25)"
    )
    busy = RayPlacement(placement_timeout=5)._unplaced({"CPU": 2}, "a/0 (CPU=0.25)")
    assert busy.endswith("(all taken by other work; held by this engine: a/0 (CPU=0.25))")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memory figures from /proc")
@pytest.mark.asyncio
async def test_the_memory_guard_kills_a_ray_instance_past_its_limit() -> None:
    async with Engine(heartbeat_interval=None, memory_interval=0.05) as engine:
        name = engine.add_cartridge(
            SCRIPT, placement=FAKE.FakeRayPlacement(), memory_limit=50 * MIB
        )
        await engine.start(name)
        await until(lambda: engine.status()[0].resident_memory is not None)
        # The actor sets the limit on its node, a moment after the start.
        await until(lambda: engine.status()[0].memory_enforcement == "watchdog+rlimit_as")
        with anyio.fail_after(30), pytest.raises(OutOfMemory) as caught:
            await engine.call(OPS.HOG, [(OPS.TEXT, b"eat")])
        assert caught.value.code == "OOM_KILLED" and "limit of 50.0 MiB" in caught.value.message
        assert (await engine.call(OPS.ECHO, [(OPS.TEXT, b"back")])).data == b"back"
        assert engine.status()[0].starts == 2


@pytest.mark.asyncio
async def test_a_ray_instance_stops_when_idle_and_drains_on_removal() -> None:
    async with Engine(heartbeat_interval=None) as engine:
        fake = FAKE.FakeRayPlacement()
        name = engine.add_cartridge(SCRIPT, placement=fake, idle_timeout=0.3)
        await engine.call(OPS.ECHO, [(OPS.TEXT, b"x")])
        await until(lambda: engine.status()[0].state == "idle")
        # its process ends: idle is reported once it is told to stop, its exit follows
        await until(lambda: fake.actors[0].host.resident() is None)
        outcomes: list[Any] = []

        async def slow() -> None:
            try:
                await engine.call(OPS.VERSION, [(OPS.TEXT, b"30")])
            except CartridgeRetired as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await until(lambda: engine.status()[0].in_flight == 1)
            assert engine.status()[0].starts == 2
            await engine.remove_cartridge(name, drain=0.2)
        assert [e.code for e in outcomes] == ["CARTRIDGE_RETIRED"]
        assert len(fake.actors) == 2 and fake.actors[1].host.resident() is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memory figures from /proc")
@pytest.mark.asyncio
async def test_a_ray_instance_reports_its_memory_without_a_limit() -> None:
    async with Engine(heartbeat_interval=None, memory_interval=0.05) as engine:
        name = engine.add_cartridge(SCRIPT, placement=FAKE.FakeRayPlacement())
        await engine.start(name)
        await until(lambda: engine.status()[0].resident_memory is not None)
        replica = engine.status()[0].replicas[0]
        assert replica.resident_memory and replica.resident_memory > MIB
        assert replica.memory_enforcement is None
