"""Supervision on a cartridge host, seen from the switch: a relayed call whose handler goes
silent past the host's activity timeout fails with ``TIMEOUT`` (class ``resource``), and a
cartridge past the host's memory limit is killed, its relayed call failing with
``OOM_KILLED`` (class ``resource``) and the host announcing its new inventory (RLY-16)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from cartridge_runtime.engine import CallError, Engine, EngineConfig
from cartridge_runtime.host import listen
from cartridge_runtime.relay import HostState

OPS = str(Path(__file__).resolve().parents[1] / "engine" / "ops_cartridge.py")
TEXT = "media:enc=utf-8"
SILENT = f'cap:in="{TEXT}";op=silent;out="{TEXT}"'
HOG = f'cap:in="{TEXT}";op=hog;out="{TEXT}"'
ECHO = f'cap:in="{TEXT}";op=echo;out="{TEXT}"'
MIB = 1 << 20


@contextlib.asynccontextmanager
async def host_and_switch(
    sock: Path, config: EngineConfig, **cartridge: object
) -> AsyncIterator[tuple[Engine, Engine]]:
    """A host engine serving the ops cartridge on ``sock``, and a switch attached to it (the
    switch itself watches nothing: what fails, the host failed)."""
    async with Engine(config) as host:
        await host.start(host.add_cartridge(OPS, name="ops", **cartridge))  # type: ignore[arg-type]
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: listen(host, sock, on_ready=ready.set))
            await ready.wait()
            quiet = EngineConfig(activity_timeout=None, heartbeat_interval=None)
            async with Engine(quiet) as switch:
                await switch.add_host(sock)
                await until(lambda: switch.hosts()[0].state is HostState.HEALTHY)
                yield host, switch
            tg.cancel_scope.cancel()


async def until(check: object, within: float = 20.0) -> None:
    with anyio.fail_after(within):
        while not check():  # type: ignore[operator]  # noqa: ASYNC110 - polling a snapshot
            await anyio.sleep(0.02)


async def _silent_relayed_call_times_out(sock: Path) -> None:
    config = EngineConfig(activity_timeout=0.4, heartbeat_interval=None)
    async with host_and_switch(sock, config) as (host, switch):
        with anyio.fail_after(20), pytest.raises(CallError) as caught:
            await switch.call(SILENT, [(TEXT, b"x")])
        error = caught.value
        assert error.code == "TIMEOUT" and error.attribution_class == "resource"
        assert "no activity for 0.4 s" in error.message and "ops" in error.message
        # The handler was cancelled on the host; its cartridge still serves.
        assert (await switch.call(ECHO, [(TEXT, b"after")])).data == b"after"
        (status,) = host.status()
        assert status.in_flight == 0 and status.starts == 1


@pytest.mark.asyncio
async def test_a_silent_relayed_call_times_out_on_the_host(sock_dir: Path) -> None:
    await _silent_relayed_call_times_out(sock_dir / "a.sock")


def test_a_silent_relayed_call_times_out_on_the_host_on_trio(sock_dir: Path) -> None:
    anyio.run(_silent_relayed_call_times_out, sock_dir / "t.sock", backend="trio")


@pytest.mark.asyncio
async def test_a_relayed_call_that_reports_progress_is_not_timed_out(sock_dir: Path) -> None:
    chatty = f'cap:in="{TEXT}";op=chatty;out="{TEXT}"'
    config = EngineConfig(activity_timeout=0.4, heartbeat_interval=None)
    async with host_and_switch(sock_dir / "c.sock", config) as (_host, switch):
        with anyio.fail_after(20):
            result = await switch.call(chatty, [(TEXT, b"1.2")])  # 3 limits, never silent
        assert result.data == b"done"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_hosted_cartridge_past_its_memory_limit_is_killed_and_reannounced(
    sock_dir: Path, backend: str
) -> None:
    async def main() -> None:
        config = EngineConfig(memory_interval=0.05, heartbeat_interval=None)
        async with host_and_switch(
            sock_dir / f"m-{backend}.sock", config, memory_limit=50 * MIB
        ) as (host, switch):
            assert switch.hosts()[0].inventory.records[0].running
            with anyio.fail_after(30), pytest.raises(CallError) as caught:
                await switch.call(HOG, [(TEXT, b"eat")])
            error = caught.value
            assert error.code == "OOM_KILLED" and error.attribution_class == "resource"
            assert "limit of 50.0 MiB" in error.message
            # The host announced the kill: its cartridge is no longer running...
            await until(lambda: not switch.hosts()[0].inventory.records[0].running)
            # ...and the next call through the switch starts it again there.
            assert (await switch.call(ECHO, [(TEXT, b"back")])).data == b"back"
            await until(lambda: switch.hosts()[0].inventory.records[0].running)
            (status,) = host.status()
            assert status.starts == 2

    anyio.run(main, backend=backend)


async def _switch_times_out_a_silent_host_call(sock: Path) -> None:
    host_config = EngineConfig(activity_timeout=None, heartbeat_interval=None)
    async with Engine(host_config) as host:
        await host.start(host.add_cartridge(OPS, name="ops"))
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: listen(host, sock, on_ready=ready.set))
            await ready.wait()
            config = EngineConfig(activity_timeout=0.4, heartbeat_interval=None)
            async with Engine(config) as switch:
                await switch.add_host(sock)
                await until(lambda: switch.hosts()[0].state is HostState.HEALTHY)
                with anyio.fail_after(20), pytest.raises(CallError) as caught:
                    await switch.call(SILENT, [(TEXT, b"x")])
                error = caught.value
                assert error.code == "TIMEOUT" and error.attribution_class == "resource"
                assert "no activity for 0.4 s" in error.message
                # the CANCEL reached the host: its handler is gone, the cartridge serves on
                await until(lambda: host.status()[0].in_flight == 0)
                assert (await switch.call(ECHO, [(TEXT, b"on")])).data == b"on"
            tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_the_switch_times_out_a_silent_call_through_a_host(sock_dir: Path) -> None:
    await _switch_times_out_a_silent_host_call(sock_dir / "w.sock")


def test_the_switch_times_out_a_silent_call_through_a_host_on_trio(sock_dir: Path) -> None:
    anyio.run(_switch_times_out_a_silent_host_call, sock_dir / "wt.sock", backend="trio")
