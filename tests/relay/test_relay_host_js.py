"""Our engine's switch driven by a cartridge host written in JavaScript (``js/host.js``: raw
frames, its own CBOR codec): attach with POLICY first and the identity probe, echo with the
routing id kept, a large stream under flow control, a re-announced inventory, a host dying
mid-call and coming back in place, a wrong probe, and RELAY_STATE reaching the host."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from _js import JsPeer, js_peer, needs_node

from cartridge_runtime.engine import CallError, Engine, NoRoute
from cartridge_runtime.protocol import ErrorCode
from cartridge_runtime.relay import HostState

pytestmark = needs_node

ECHO = "cap:op=js-echo"
REVERSE = "cap:op=js-reverse"
STALL = "cap:op=js-stall"
IDENTITY = "cap:effect=none"


async def until(check: object, within: float = 15.0) -> None:
    with anyio.fail_after(within):
        while not check():  # type: ignore[operator]  # noqa: ASYNC110 - polling a snapshot
            await anyio.sleep(0.02)


@contextlib.asynccontextmanager
async def js_host(sock: Path, *args: str) -> AsyncIterator[JsPeer]:
    """The JavaScript host listening on ``sock``."""
    async with js_peer("host.js", "--listen", str(sock), *args) as host:
        await host.wait_for("listening")
        yield host


async def attached(engine: Engine, sock: Path, state: HostState = HostState.HEALTHY) -> str:
    name = await engine.add_host(sock)
    await until(lambda: engine.hosts()[0].state is state)
    return name


def received(host: JsPeer) -> list[str]:
    """The kinds of the frames the host got from the switch (chunks and credits left out)."""
    return [e["type"] for e in host.named("frame")]


async def _echo_and_state(sock_dir: Path) -> None:
    sock = sock_dir / "js.sock"
    async with js_host(sock) as host, Engine() as engine:
        name = await attached(engine, sock)
        probe = await host.wait_for("probe")
        kinds = received(host)
        assert kinds[0] == "POLICY"  # RLY-5: the policy before anything else
        assert kinds[1] == "REQ" and host.named("frame")[1]["cap"] == IDENTITY  # RLY-6
        assert len(bytes.fromhex(probe["nonce"])) == 32
        result = await engine.call(ECHO, [("media:", b"hello from python")])
        assert result.data == b"hello from python"
        request = await host.wait_for("request", cap=ECHO)
        assert request["xid"] is not None  # RLY-8: the routed REQ carries a routing id
        served = await host.wait_for("served", cap=ECHO)
        assert served["xid_missing"] == 0  # the switch kept it on every frame of the request
        assert served["violations"] == 0 and served["bad_checksums"] == 0
        engine.set_host_state(name, b"\x00resources\xff")
        state = await host.wait_for("state")
        assert bytes.fromhex(state["payload"]) == b"\x00resources\xff"
        assert (await engine.call(ECHO, [("media:", b"again")])).data == b"again"


@pytest.mark.asyncio
async def test_an_echo_call_through_a_javascript_host(sock_dir: Path) -> None:
    await _echo_and_state(sock_dir)


def test_an_echo_call_through_a_javascript_host_on_trio(sock_dir: Path) -> None:
    anyio.run(_echo_and_state, sock_dir, backend="trio")
