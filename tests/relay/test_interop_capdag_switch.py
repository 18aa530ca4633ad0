"""capdag 1.524.58's RelaySwitch drives our host over its Unix socket: the identity probe at
attach, echo, a 64 MiB stream, a cancel, the inventory, and a cartridge killed mid-stream."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

pytest.importorskip("capdag")

from _capdag_switch import CapdagSwitch

from cartridge_runtime.engine import Engine
from cartridge_runtime.host import listen

ROOT = Path(__file__).resolve().parents[2]
INTEROP = str(ROOT / "cartridges" / "interop.py")
ECHO_ONLY = str(ROOT / "tests" / "relay" / "fixtures" / "echo_only.py")


async def _with_host(sock: Path, body: object, after: object = None) -> None:
    async with Engine() as engine:
        engine.add_cartridge(INTEROP, name="interop")
        await engine.start("interop")
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: listen(engine, sock, on_ready=ready.set))
            await ready.wait()
            await anyio.to_thread.run_sync(body)  # type: ignore[arg-type]
            if after is not None:
                await after(engine)  # type: ignore[operator]
            tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_the_reference_switch_attaches_probes_and_calls_echo(sock_dir: Path) -> None:
    sock = sock_dir / "host.sock"
    seen: dict[str, object] = {}

    def drive() -> None:
        switch = CapdagSwitch(str(sock))
        try:
            installed = switch.switch.installed_cartridges()
            seen["ids"] = [r.id for r in installed]
            seen["routable"] = switch.switch.routable_capabilities()
            seen["echo"] = switch.call("cap:echo", [("media:", b"hello relay")])
            big = os.urandom(64 << 20)
            got = switch.call("cap:echo", [("media:", big)], timeout=60)
            seen["big_ok"] = bytes(got["data"]) == big
            seen["big_end"] = got["end"]
        finally:
            switch.close()

    await _with_host(sock, drive)
    assert seen["ids"] == ["interop"]
    assert b"cap:echo" in seen["routable"]  # type: ignore[operator]
    echo = seen["echo"]
    assert bytes(echo["data"]) == b"hello relay"  # type: ignore[index]
    assert echo["end"] is not None  # type: ignore[index]
    assert seen["big_ok"] is True and seen["big_end"] is not None
    assert not sock.exists()  # the listener removes its socket


@pytest.mark.asyncio
async def test_the_reference_switch_gets_typed_errors_and_cancels(sock_dir: Path) -> None:
    sock = sock_dir / "host.sock"
    seen: dict[str, object] = {}

    def drive() -> None:
        switch = CapdagSwitch(str(sock))
        try:
            seen["fail"] = switch.call(
                'cap:fail;in="media:enc=utf-8";out="media:enc=utf-8"',
                [("media:enc=utf-8", b"boom")],
            )
            rid = switch.start(
                'cap:in="media:fmt=json;record";out="media:enc=utf-8";sleep',
                [("media:fmt=json;record", b'{"ms": 30000}')],
            )
            switch.cancel(rid)  # the reference ends it at once and sends CANCEL on
            seen["live"] = switch.switch.is_request_live(rid)
            seen["after"] = switch.call("cap:echo", [("media:", b"still here")])
        finally:
            switch.close()

    async def cancelled_on_the_host(engine: Engine) -> None:
        with anyio.fail_after(10):  # the 30 s sleep was cancelled in the cartridge
            while engine.status()[0].in_flight:  # noqa: ASYNC110 - polling a snapshot
                await anyio.sleep(0.05)

    await _with_host(sock, drive, cancelled_on_the_host)
    assert seen["fail"]["error"]["code"] == "INTEROP_FAIL"  # type: ignore[index]
    assert seen["fail"]["error"]["attribution_class"] == "input"  # type: ignore[index]
    assert seen["live"] is False
    assert bytes(seen["after"]["data"]) == b"still here"  # type: ignore[index]


def test_our_host_killed_mid_stream_under_the_reference_switch(sock_dir: Path) -> None:
    import subprocess
    import sys
    import time

    sock = sock_dir / "host.sock"
    cli = Path(sys.executable).with_name("cartridge")
    host = subprocess.Popen(
        [str(cli), "host", "--listen", str(sock), INTEROP], stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert time.monotonic() < deadline, "the host did not listen"
            time.sleep(0.05)
        switch = CapdagSwitch(str(sock))
        rid = switch.start(
            'cap:generate;in="media:fmt=json;record"',
            [("media:fmt=json;record", b'{"size": 400000000}')],
        )
        assert switch.next_frame(rid, 30) is not None  # the stream is flowing
        host.kill()
        assert switch.ended.wait(timeout=30)  # the reference sees its only master gone
        assert not switch.switch.is_request_live(rid)  # and ended the request
        switch.close()
    finally:
        host.kill()
        host.wait()


@pytest.mark.asyncio
async def test_a_peer_call_crosses_our_hosts_under_the_reference_switch(sock_dir: Path) -> None:
    echo_only = ECHO_ONLY
    a, b = sock_dir / "a.sock", sock_dir / "b.sock"
    seen: dict[str, object] = {}

    async with Engine() as host_a, Engine() as host_b:
        await host_a.start(host_a.add_cartridge(INTEROP))
        await host_b.start(host_b.add_cartridge(echo_only))
        ready_a, ready_b = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: listen(host_a, a, on_ready=ready_a.set))
            tg.start_soon(lambda: listen(host_b, b, on_ready=ready_b.set))
            await ready_a.wait()
            await ready_b.wait()

            def drive() -> None:
                switch = CapdagSwitch(str(b), str(a))  # b first: cap:echo goes there
                try:
                    seen["peer"] = switch.call("cap:peer-echo", [("media:", b"across")])
                finally:
                    switch.close()

            await anyio.to_thread.run_sync(drive)
            tg.cancel_scope.cancel()
    assert bytes(seen["peer"]["data"]) == b"echo-only:across"  # type: ignore[index]
