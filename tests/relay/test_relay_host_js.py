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
    # add_host returns once the identity probe has ended (RLY-6): nothing to poll for
    assert engine.hosts()[0].state is state
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
        assert served["seq_errors"] == 0  # numbered 0, 1, 2... per (rid, xid)
        engine.set_host_state(name, b"\x00resources\xff")
        state = await host.wait_for("state")
        assert bytes.fromhex(state["payload"]) == b"\x00resources\xff"
        assert (await engine.call(ECHO, [("media:", b"again")])).data == b"again"


@pytest.mark.asyncio
async def test_an_echo_call_through_a_javascript_host(sock_dir: Path) -> None:
    await _echo_and_state(sock_dir)


def test_an_echo_call_through_a_javascript_host_on_trio(sock_dir: Path) -> None:
    anyio.run(_echo_and_state, sock_dir, backend="trio")


async def _large_stream(sock_dir: Path) -> None:
    sock = sock_dir / "big.sock"
    # 64 KiB chunks and a window of 8: 128 chunks each way, credit spent many times over
    async with js_host(sock, "--max-chunk", "65536", "--credit", "8") as host, Engine() as engine:
        await attached(engine, sock)
        data = bytes(range(256)) * (8 << 12)  # 8 MiB
        result = await engine.call(ECHO, [("media:", data)])
        assert result.data == data
        served = await host.wait_for("served", cap=ECHO)
        assert served["bytes"] == len(data)
        assert served["chunks_in"] == len(data) // 65536  # the host's max_chunk was kept
        assert served["max_outstanding"] <= served["window"] == 8  # the switch waited for credit
        assert served["violations"] == 0 and served["bad_checksums"] == 0
        assert served["credits_in"] >= served["chunks_out"] - 8  # the caller granted the answer
        assert served["xid_missing"] == 0
        assert served["seq_errors"] == 0  # a streamed body is numbered like an inline one


@pytest.mark.asyncio
async def test_a_large_stream_through_a_javascript_host_under_flow_control(
    sock_dir: Path,
) -> None:
    await _large_stream(sock_dir)


def test_a_large_stream_through_a_javascript_host_on_trio(sock_dir: Path) -> None:
    anyio.run(_large_stream, sock_dir, backend="trio")


@pytest.mark.asyncio
async def test_the_javascript_host_reannounces_its_inventory(sock_dir: Path) -> None:
    sock = sock_dir / "inv.sock"
    async with js_host(sock) as host, Engine() as engine:
        await attached(engine, sock)
        assert engine.hosts()[0].inventory.caps == (IDENTITY, ECHO, STALL)
        with pytest.raises(NoRoute):
            await engine.call(REVERSE, [("media:", b"abc")])
        await host.command(cmd="announce", caps=["js-echo", "js-reverse"])  # a 2nd RELAY_NOTIFY
        await until(lambda: REVERSE in engine.hosts()[0].inventory.caps)
        assert engine.hosts()[0].state is HostState.HEALTHY
        assert (await engine.call(REVERSE, [("media:", b"abc")])).data == b"cba"
        with pytest.raises(NoRoute):  # no longer offered: not routed there
            await engine.call(STALL, [("media:", b"")])
        assert (await engine.call(ECHO, [("media:", b"still")])).data == b"still"
        assert engine.hosts()[0].attaches == 1  # the same link throughout


async def _dies_mid_call(sock_dir: Path) -> None:
    sock = sock_dir / "die.sock"
    failures: list[CallError] = []
    async with Engine() as engine:

        async def stalled() -> None:
            try:
                await engine.call(STALL, [("media:", b"wait")])
            except CallError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            async with js_host(sock) as host:
                name = await attached(engine, sock)
                engine.set_host_state(name, b"kept-by-the-switch")
                await host.wait_for("state")
                tg.start_soon(stalled)
                await host.wait_for("request", cap=STALL)
                host.kill()  # the host dies with the call open
                await until(lambda: bool(failures))
            assert failures[0].code == ErrorCode.MASTER_DIED
            assert failures[0].attribution_class == "environment"
            await until(lambda: engine.hosts()[0].state is HostState.DETACHED)
            async with js_host(sock) as back:  # a new process on the same socket path
                await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
                (view,) = engine.hosts()
                assert view.id == name and view.attaches == 2  # re-attached in place
                assert (await engine.call(ECHO, [("media:", b"back")])).data == b"back"
                await back.wait_for("served", cap=ECHO)
                kinds = received(back)
                assert kinds[:3] == ["POLICY", "RELAY_STATE", "REQ"]  # RLY-17: state after POLICY
                state = await back.wait_for("state")
                assert bytes.fromhex(state["payload"]) == b"kept-by-the-switch"


@pytest.mark.asyncio
async def test_a_javascript_host_dying_mid_call_is_reattached_in_place(sock_dir: Path) -> None:
    await _dies_mid_call(sock_dir)


def test_a_javascript_host_dying_mid_call_on_trio(sock_dir: Path) -> None:
    anyio.run(_dies_mid_call, sock_dir, backend="trio")


@pytest.mark.asyncio
async def test_a_wrong_probe_answer_leaves_the_javascript_host_unhealthy(sock_dir: Path) -> None:
    sock = sock_dir / "bad.sock"
    async with js_host(sock, "--bad-probe") as host, Engine() as engine:
        await attached(engine, sock, HostState.UNHEALTHY)
        (view,) = engine.hosts()
        assert view.inventory.records[0].id == "js-echo"  # the inventory is shown
        assert "differs" in (view.last_error or "")
        with pytest.raises(NoRoute, match=r"; hosts: bad \(unhealthy: .*differs"):
            await engine.call(ECHO, [("media:", b"x")])  # its caps are not routed, and why
        await host.wait_for("request", cap=IDENTITY)
        assert [e["cap"] for e in host.named("request")] == [IDENTITY]


@pytest.mark.asyncio
async def test_a_javascript_host_that_dials_the_engine(sock_dir: Path) -> None:
    sock = sock_dir / "in.sock"
    async with Engine() as engine:
        await engine.listen_for_host(sock, name="dialer")
        async with js_peer("host.js", "--connect", str(sock)) as host:
            await until(lambda: bool(engine.hosts()))
            await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
            assert (await engine.call(ECHO, [("media:", b"in")])).data == b"in"
            await host.wait_for("served", cap=ECHO)


@pytest.mark.asyncio
async def test_a_cancel_reaches_the_javascript_host_with_its_routing_id(sock_dir: Path) -> None:
    sock = sock_dir / "cancel.sock"
    async with js_host(sock) as host, Engine() as engine:
        await attached(engine, sock)
        with anyio.fail_after(15):
            async with engine.call(STALL, [("media:", b"wait")]) as call:
                request = await host.wait_for("request", cap=STALL)
                await call.cancel()
        await host.wait_for("cancelled", cap=STALL)
        cancel = await host.wait_for("frame", type="CANCEL")
        assert cancel["xid"] == request["xid"] and cancel["seq"] == 0
        assert (await engine.call(ECHO, [("media:", b"after")])).data == b"after"


@pytest.mark.asyncio
async def test_a_javascript_host_without_caps_is_probed_when_it_announces_some(
    sock_dir: Path,
) -> None:
    sock = sock_dir / "late.sock"
    async with js_host(sock, "--caps", "") as host, Engine() as engine:
        await attached(engine, sock)  # nothing to verify yet: healthy, no probe
        assert host.named("probe") == []
        with pytest.raises(NoRoute):
            await engine.call(ECHO, [("media:", b"x")])
        await host.command(cmd="announce", caps=["js-echo"])
        await host.wait_for("probe")  # RLY-6: probed once it offers caps
        await until(lambda: ECHO in engine.hosts()[0].inventory.caps)
        await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
        assert (await engine.call(ECHO, [("media:", b"late")])).data == b"late"
