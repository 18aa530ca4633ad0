"""``cartridge conform --host PATH``: the host catalogue passes against our host, fails on a
host that breaks the rules, and the command refuses ambiguous arguments."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from cartridge_runtime.conformance import HOST_CHECKS, Status, run_host_conformance
from cartridge_runtime.engine import Engine
from cartridge_runtime.host import listen

INTEROP = str(Path(__file__).resolve().parents[2] / "cartridges" / "interop.py")


@pytest.mark.asyncio
async def test_our_host_passes_the_host_catalogue(sock_dir: Path) -> None:
    sock = sock_dir / "h.sock"
    async with Engine() as engine:
        await engine.start(engine.add_cartridge(INTEROP))
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: listen(engine, sock, on_ready=ready.set))
            await ready.wait()
            report = await anyio.to_thread.run_sync(
                lambda: run_host_conformance(str(sock), timeout=10)
            )
            tg.cancel_scope.cancel()
    assert [r.id for r in report.results] == [c[0] for c in HOST_CHECKS]
    assert report.ok, report.summary()
    assert all(r.status is Status.PASS for r in report.results)


@pytest.mark.asyncio
async def test_a_host_that_says_nothing_fails(sock_dir: Path) -> None:
    sock = sock_dir / "mute.sock"

    async def mute(stream: anyio.abc.SocketStream) -> None:
        await stream.aclose()  # closes every link at once, never a RELAY_NOTIFY

    listener = await anyio.create_unix_listener(sock, mode=0o600)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, mute)
        report = await anyio.to_thread.run_sync(lambda: run_host_conformance(str(sock), timeout=1))
        tg.cancel_scope.cancel()
    assert not report.ok
    assert report.results[0].status is Status.FAIL
    assert "RELAY_NOTIFY" in report.results[0].detail


def test_conform_wants_a_target_or_a_host_not_both() -> None:
    cli = Path(sys.executable).with_name("cartridge")
    for args in ([], ["x.py", "--host", "/tmp/none.sock"]):
        done = subprocess.run(
            [str(cli), "conform", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert done.returncode == 2
        assert "give a cartridge TARGET or --host SOCKET" in done.stdout + done.stderr
