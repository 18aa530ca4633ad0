"""Our engine drives capdag 1.524.58's host runtime behind its RelaySlave: attach (POLICY,
identity probe), echo, a 64 MiB stream, typed errors, a peer call through the switch, and the
host killed mid-stream (the call ends with MASTER_DIED)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

pytest.importorskip("capdag")

from cartridge_runtime.engine import CallError, Engine
from cartridge_runtime.protocol import ErrorCode
from cartridge_runtime.relay import HostState

HERE = Path(__file__).resolve().parent
INTEROP = str(HERE.parents[1] / "cartridges" / "interop.py")


@pytest.fixture
def capdag_host(sock_dir: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    sock = sock_dir / "capdag.sock"
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "fixtures" / "capdag_host.py"), str(sock), INTEROP],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    try:
        yield sock, proc
    finally:
        proc.kill()
        proc.wait()


async def _attached(engine: Engine, sock: Path) -> None:
    await engine.add_host(sock)
    with anyio.fail_after(20):
        while engine.hosts()[0].state is not HostState.HEALTHY:
            assert engine.hosts()[0].state is HostState.PROBING, engine.hosts()[0].last_error
            await anyio.sleep(0.05)


@pytest.mark.asyncio
async def test_our_switch_drives_the_reference_host(
    capdag_host: tuple[Path, subprocess.Popen[str]],
) -> None:
    sock, _proc = capdag_host
    async with Engine() as engine:
        await _attached(engine, sock)
        (view,) = engine.hosts()
        assert view.inventory.records[0].id == "interop"
        assert (await engine.call("cap:echo", [("media:", b"to capdag")])).data == b"to capdag"
        big = os.urandom(64 << 20)
        assert (await engine.call("cap:echo", [("media:", big)])).data == big
        with pytest.raises(CallError) as failed:
            await engine.call(
                'cap:fail;in="media:enc=utf-8";out="media:enc=utf-8"', [("media:enc=utf-8", "x")]
            )
        assert failed.value.code == "INTEROP_FAIL"
        # a peer call from the reference host's cartridge comes back through our switch
        peer = await engine.call("cap:peer-echo", [("media:", b"round trip")])
        assert peer.data == b"round trip"


@pytest.mark.asyncio
async def test_the_reference_host_killed_mid_stream_ends_the_call(
    capdag_host: tuple[Path, subprocess.Popen[str]],
) -> None:
    sock, proc = capdag_host
    async with Engine() as engine:
        await _attached(engine, sock)
        gen = 'cap:generate;in="media:fmt=json;record"'
        with pytest.raises(CallError) as failed, anyio.fail_after(120):
            async with engine.call(gen, [("media:fmt=json;record", b'{"size": 400000000}')]) as r:
                got = 0
                async for _event in r:
                    got += 1
                    if got == 20:
                        proc.kill()
        assert failed.value.code == ErrorCode.MASTER_DIED
        assert failed.value.attribution_class == "environment"
        with anyio.fail_after(10):
            while engine.hosts()[0].state is not HostState.DETACHED:  # noqa: ASYNC110
                await anyio.sleep(0.05)


@pytest.mark.asyncio
async def test_cancel_through_the_reference_host(
    capdag_host: tuple[Path, subprocess.Popen[str]],
) -> None:
    sock, _proc = capdag_host
    async with Engine(cancel_grace=0.5) as engine:
        await _attached(engine, sock)
        sleep = 'cap:in="media:fmt=json;record";out="media:enc=utf-8";sleep'
        with anyio.fail_after(60):
            async with engine.call(sleep, [("media:fmt=json;record", b'{"ms": 20000}')]) as r:
                await anyio.sleep(0.5)
                await r.cancel()  # the reference host drops CANCEL (HST-16): the grace ends it
        # the link is still good afterwards
        assert (await engine.call("cap:echo", [("media:", b"after")])).data == b"after"
