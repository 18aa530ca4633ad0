"""An unhealthy cartridge is recovered: after the configured number of missed heartbeats the
engine kills it, its calls fail with a typed error, and later calls work."""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
import pytest

from cartridge_runtime.engine import CallError, CartridgeDied, CartridgeUnhealthy, Engine
from cartridge_runtime.protocol import Frame, FrameType

HANG = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";hang'
ECHO = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";echo'

CARTRIDGE = textwrap.dedent(
    f"""
    import time
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime

    runtime = CartridgeRuntime(Manifest.build(
        name="stuck", version="1.0.0", description="t",
        caps=[CapDef.simple({HANG!r}, "Hang", aliases="hang"),
              CapDef.simple({ECHO!r}, "Echo", aliases="echo")],
    ))

    @runtime.op({HANG!r})
    async def hang(req):
        time.sleep(120)  # an async handler that never yields: the event loop is stuck

    @runtime.op({ECHO!r})
    async def echo(req):
        text = await req.take_input().require_stream_str("media:enc=utf-8")
        await req.output().emit_cbor(text)

    if __name__ == "__main__":
        runtime.run()
    """
)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "stuck.py"
    path.write_text(CARTRIDGE)
    return path


@pytest.mark.asyncio
async def test_missed_heartbeats_kill_the_cartridge_and_the_next_call_respawns_it(
    script: Path,
) -> None:
    async with Engine(
        heartbeat_interval=0.1, heartbeat_timeout=0.3, heartbeat_misses_to_kill=2
    ) as e:
        name = e.add_cartridge(script)
        errors: list[CallError] = []

        async def hung_call() -> None:
            try:
                await e.call_bytes(HANG, [("media:enc=utf-8", "x")])
            except CallError as exc:
                errors.append(exc)

        with anyio.fail_after(60):  # a hang fails the test instead of stalling the run
            async with anyio.create_task_group() as tg:
                tg.start_soon(hung_call)
                tg.start_soon(hung_call)
        assert len(errors) == 2
        for err in errors:
            assert isinstance(err, CartridgeUnhealthy) and isinstance(err, CartridgeDied)
            assert err.code == "CARTRIDGE_UNHEALTHY" and err.attribution_class == "environment"
            assert "health probes" in err.message
        assert e.stats().heartbeat_misses >= 2
        with anyio.fail_after(60):
            result = await e.call_bytes(ECHO, [("media:enc=utf-8", "alive")])
        assert result.data == b"alive"
        (status,) = e.status()
        assert status.name == name and status.starts == 2


@pytest.mark.asyncio
async def test_with_the_kill_switched_off_an_unhealthy_cartridge_is_only_marked(
    script: Path,
) -> None:
    async with Engine(
        heartbeat_interval=0.1, heartbeat_timeout=0.2, heartbeat_misses_to_kill=None
    ) as e:
        e.add_cartridge(script)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(e.call_bytes, HANG, [("media:enc=utf-8", "x")])
                while e.stats().heartbeat_misses < 3:  # noqa: ASYNC110 (waiting on engine state)
                    await anyio.sleep(0.05)
                (status,) = e.status()
                assert status.state == "running" and not status.healthy and status.starts == 1
                tg.cancel_scope.cancel()


NAP = 'cap:in="media:enc=utf-8";out="media:enc=utf-8";nap'

NAPPING = textwrap.dedent(
    f"""
    import time
    from cartridge_runtime.manifest import CapDef, Manifest
    from cartridge_runtime.runtime import CartridgeRuntime

    runtime = CartridgeRuntime(Manifest.build(
        name="napping", version="1.0.0", description="t",
        caps=[CapDef.simple({NAP!r}, "Nap", aliases="nap")],
    ))

    @runtime.op({NAP!r})
    async def nap(req):
        time.sleep(1.0)  # holds the event loop: a probe sent meanwhile is answered late
        await req.output().emit_cbor("rested")

    if __name__ == "__main__":
        runtime.run()
    """
)


class _HeartbeatCounter:
    """A frame tap counting the HEARTBEAT frames each way."""

    def __init__(self) -> None:
        self.sent = 0
        self.received = 0

    def on_received(self, connection: str, frame: Frame) -> None:
        self.received += frame.frame_type is FrameType.HEARTBEAT

    def on_sent(self, connection: str, frame: Frame) -> None:
        self.sent += frame.frame_type is FrameType.HEARTBEAT


@pytest.mark.asyncio
async def test_a_reply_after_its_probe_was_given_up_is_not_answered(tmp_path: Path) -> None:
    """HST-13: answering the late reply as if it were the cartridge's own probe started a
    HEARTBEAT exchange that never ended (the cartridge answers every HEARTBEAT)."""
    path = tmp_path / "napping.py"
    path.write_text(NAPPING)
    tap = _HeartbeatCounter()
    async with Engine(heartbeat_interval=None, heartbeat_timeout=0.2, frame_tap=tap) as e:
        name = e.add_cartridge(path)
        await e.start(name)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:

                async def napping_call() -> None:
                    result = await e.call_bytes(NAP, [("media:enc=utf-8", "x")])
                    assert result.data  # the nap's answer came through

                tg.start_soon(napping_call)
                await anyio.sleep(0.3)  # the cartridge is asleep in its handler now
                assert not await e.probe(name)  # given up after 0.2 s
            await anyio.sleep(0.5)  # the late reply has come; nothing answers it
        assert (tap.sent, tap.received) == (1, 1)
        assert e.stats().heartbeat_misses == 1
