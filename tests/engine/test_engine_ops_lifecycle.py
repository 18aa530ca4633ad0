"""Idle stop, replace and remove with a drain, and the lifecycle events they report."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from cartridge_runtime.engine import (
    CallError,
    CapsChanged,
    CartridgeAdded,
    CartridgeDrained,
    CartridgeRemoved,
    CartridgeReplaced,
    CartridgeRetired,
    Engine,
    EngineConfig,
    InstanceChanged,
    InstanceState,
    NoRoute,
)

SCRIPT = Path(__file__).with_name("ops_cartridge.py")
BACKENDS = ["asyncio", "trio"]


def load_ops() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ops_cartridge", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OPS = load_ops()


async def until(predicate: Callable[[], bool], seconds: float = 20) -> None:
    """Wait (polling the engine's state) until ``predicate()`` holds."""
    with anyio.fail_after(seconds):
        while not predicate():  # noqa: ASYNC110 - engine state has no event to wait on
            await anyio.sleep(0.01)


def status_of(engine: Engine, name: str) -> Any:
    (status,) = [s for s in engine.status() if s.name == name]
    return status


def version_env(version: str) -> dict[str, str]:
    return {**os.environ, "OPS_VERSION": version}


# -- idle stop ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_idle_instance_stops_and_the_next_call_starts_it(backend: str) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine, engine.subscribe() as events:
            name = engine.add_cartridge(OPS.build_runtime(), idle_timeout=0.3)
            assert (await engine.call(OPS.ECHO, [(OPS.TEXT, b"one")])).data == b"one"
            assert status_of(engine, name).state == "running"
            await until(lambda: status_of(engine, name).state == "idle")
            status = status_of(engine, name)
            assert status.idle_timeout == 0.3
            assert status.replicas[0].last_exit == "stopped after 0.3 s without a call"
            assert (await engine.call(OPS.ECHO, [(OPS.TEXT, b"two")])).data == b"two"
            status = status_of(engine, name)
            assert status.state == "running" and status.starts == 2 and status.served == 2
            states = [e.state for e in events.pending() if isinstance(e, InstanceChanged)]
            assert states == [InstanceState.STARTED, InstanceState.IDLE, InstanceState.RESPAWNED]

    anyio.run(main, backend=backend)


def test_a_busy_instance_is_not_idle() -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine:
            name = engine.add_cartridge(OPS.build_runtime(), idle_timeout=0.2)
            result = await engine.call(OPS.CHATTY, [(OPS.TEXT, b"0.6")])  # three timeouts long
            assert result.data == b"done"
            assert status_of(engine, name).starts == 1

    anyio.run(main, backend="asyncio")


def test_idle_stop_is_off_by_default() -> None:
    assert EngineConfig().idle_timeout is None

    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine:
            name = engine.add_cartridge(OPS.build_runtime())
            await engine.call(OPS.ECHO, [(OPS.TEXT, b"x")])
            assert status_of(engine, name).idle_timeout is None
            with pytest.raises(ValueError, match="idle_timeout must be a positive"):
                engine.add_cartridge(OPS.build_runtime(), idle_timeout=-1)
            with pytest.raises(ValueError, match="memory_limit must be a positive whole"):
                engine.add_cartridge(OPS.build_runtime(), memory_limit=1.5)  # type: ignore[arg-type]

    anyio.run(main, backend="asyncio")


# -- replace and remove -------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_replace_under_32_calls_in_flight_loses_none(backend: str) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine, engine.subscribe() as events:
            name = engine.add_cartridge(SCRIPT, name="versioned", env=version_env("1"))
            await engine.start(name)
            old: list[str] = []
            new: list[str] = []

            async def call(seconds: bytes, into: list[str]) -> None:
                result = await engine.call(OPS.VERSION, [(OPS.TEXT, seconds)])
                into.append(result.data.decode())

            async with anyio.create_task_group() as tg:
                for _ in range(32):
                    tg.start_soon(call, b"0.5", old)
                await until(lambda: status_of(engine, name).served == 32)
                tg.start_soon(
                    lambda: engine.replace_cartridge(name, SCRIPT, drain=20, env=version_env("2"))
                )
                await until(lambda: any(isinstance(e, CartridgeReplaced) for e in seen(events)))
                for _ in range(8):
                    tg.start_soon(call, b"0", new)
            assert len(old) == 32 and len(new) == 8
            assert {v.split()[0] for v in old} == {"1"} and len({v.split()[1] for v in old}) == 1
            assert {v.split()[0] for v in new} == {"2"}
            assert old[0].split()[1] != new[0].split()[1]  # two processes
            status = status_of(engine, name)
            assert status.state == "running" and status.in_flight == 0
            kinds = [(type(e).__name__, getattr(e, "state", None)) for e in seen(events)]
            assert kinds == [
                ("CartridgeAdded", None),
                ("InstanceChanged", InstanceState.STARTED),  # the first version
                ("CapsChanged", None),  # its caps became known
                ("InstanceChanged", InstanceState.STARTED),  # the second, before routing moves
                ("CartridgeReplaced", None),  # the same caps: no CapsChanged
                ("InstanceChanged", InstanceState.RETIRED),  # the first, drained
                ("CartridgeDrained", None),
            ]
            retired, drained = SEEN[-2:]
            assert isinstance(drained, CartridgeDrained)
            assert drained.limit == 20 and drained.ended == 0 and 0 < drained.seconds < 20
            assert f"a drain of {drained.seconds:.2f} s (of 20 s allowed)" in retired.detail

    SEEN.clear()
    anyio.run(main, backend=backend)


#: The events a test's ``seen()`` collected so far.
SEEN: list[Any] = []


def seen(events: Any) -> list[Any]:
    SEEN.extend(events.pending())
    return SEEN


@pytest.mark.parametrize("backend", BACKENDS)
def test_remove_drains_then_retires_what_is_left(backend: str) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine, engine.subscribe() as events:
            name = engine.add_cartridge(OPS.build_runtime())
            await engine.start(name)
            outcomes: dict[str, Any] = {}

            async def call(label: str, seconds: bytes) -> None:
                try:
                    result = await engine.call(OPS.VERSION, [(OPS.TEXT, seconds)])
                    outcomes[label] = result.data.split()[0]
                except CallError as exc:
                    outcomes[label] = exc

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "quick", b"0.1")
                tg.start_soon(call, "slow", b"30")
                await until(lambda: status_of(engine, name).in_flight == 2)
                await engine.remove_cartridge(name, drain=0.5)
            assert outcomes["quick"] == b"0"
            retired = outcomes["slow"]
            assert isinstance(retired, CartridgeRetired)
            assert (
                retired.code == "CARTRIDGE_RETIRED" and retired.attribution_class == "environment"
            )
            assert "drain of 0.5 s" in retired.message
            assert engine.status() == []
            with pytest.raises(NoRoute):
                await engine.call(OPS.ECHO, [(OPS.TEXT, b"x")])
            got: list[Any] = events.pending()
            assert [type(e) for e in got] == [
                CartridgeAdded,
                InstanceChanged,
                CapsChanged,
                CartridgeRemoved,
                CapsChanged,
                InstanceChanged,
                CartridgeDrained,
            ]
            assert got[6].ended == 1 and got[6].limit == 0.5 and 0 < got[6].seconds <= 0.5
            assert got[1].state is InstanceState.STARTED
            assert got[2].added and not got[2].removed
            assert got[4].removed == got[2].added and not got[4].added
            assert got[5].state is InstanceState.RETIRED
            assert [e.at for e in got] == sorted(e.at for e in got)

    anyio.run(main, backend=backend)


def test_a_replacement_that_cannot_start_leaves_the_old_version_serving() -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine:
            name = engine.add_cartridge(SCRIPT, name="stays", env=version_env("1"))
            await engine.start(name)
            with pytest.raises(CallError) as caught:
                await engine.replace_cartridge(
                    name, [sys.executable, "-c", "import sys; sys.exit(5)"], drain=1
                )
            assert caught.value.code == "SPAWN_FAILED"
            result = await engine.call(OPS.VERSION, [(OPS.TEXT, b"0")])
            assert result.data.startswith(b"1 ")

    anyio.run(main, backend="asyncio")


async def calls_during_a_start_up(
    engine: Engine, delay: str, calls: int, act: Callable[[str], Any]
) -> list[str]:
    """``calls`` calls to a cartridge that takes ``delay`` seconds to start (version 1),
    ``act(name)`` awaited while they wait for it; the answers ("VERSION PID") once all ended."""
    slow = {**version_env("1"), "OPS_START_DELAY": delay}
    name = engine.add_cartridge(SCRIPT, name="loading", env=slow, known_caps=[OPS.VERSION])
    answers: list[str] = []

    async def call() -> None:
        result = await engine.call(OPS.VERSION, [(OPS.TEXT, b"0")])
        answers.append(result.data.decode())

    async with anyio.create_task_group() as tg:
        for _ in range(calls):
            tg.start_soon(call)
        await until(lambda: status_of(engine, name).state == "starting")
        await act(name)
    return answers


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_replace_during_a_slow_start_up_sends_the_waiting_calls_to_the_new_version(
    backend: str,
) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine:
            answers = await calls_during_a_start_up(
                engine,
                "3",
                32,
                lambda name: engine.replace_cartridge(name, SCRIPT, drain=20, env=version_env("2")),
            )
            assert len(answers) == 32
            assert {a.split()[0] for a in answers} == {"2"}
            status = status_of(engine, "loading")
            assert status.state == "running" and status.replicas[0].last_error is None

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_remove_during_a_start_up_drains_the_calls_waiting_for_it(backend: str) -> None:
    async def main() -> None:
        async with Engine(heartbeat_interval=None) as engine:
            answers = await calls_during_a_start_up(
                engine, "1", 8, lambda name: engine.remove_cartridge(name, drain=20)
            )
            assert len(answers) == 8 and {a.split()[0] for a in answers} == {"1"}
            assert engine.status() == []
            with pytest.raises(NoRoute):
                await engine.call(OPS.VERSION, [(OPS.TEXT, b"0")])

    anyio.run(main, backend=backend)
