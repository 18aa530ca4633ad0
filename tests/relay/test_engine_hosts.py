"""Our engine as the switch, our engine as the host: ``Engine.add_host`` and
``listen_for_host``, calls routed beside local cartridges, a peer call crossing hosts, status
and events naming the host, a host that goes away and comes back (re-attached in place)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from cartridge_runtime.engine import CallError, Engine, HostLinkChanged, NoRoute
from cartridge_runtime.host import connect, listen
from cartridge_runtime.protocol import ErrorCode
from cartridge_runtime.relay import HostAttachError, HostState

ROOT = Path(__file__).resolve().parents[2]
INTEROP = str(ROOT / "cartridges" / "interop.py")
ECHO_ONLY = str(Path(__file__).resolve().parent / "fixtures" / "echo_only.py")


@contextlib.asynccontextmanager
async def hosted(sock: Path, *targets: str) -> AsyncIterator[Engine]:
    """A host engine serving ``targets`` on ``sock`` (the ``cartridge host --listen`` body)."""
    async with Engine() as engine:
        for target in targets:
            await engine.start(engine.add_cartridge(target))
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: listen(engine, sock, on_ready=ready.set))
            await ready.wait()
            yield engine
            tg.cancel_scope.cancel()


async def until(check: object, within: float = 10.0) -> None:
    with anyio.fail_after(within):
        while not check():  # type: ignore[operator]  # noqa: ASYNC110 - polling a snapshot
            await anyio.sleep(0.02)


@pytest.mark.asyncio
async def test_a_host_cartridge_is_routed_beside_local_ones(sock_dir: Path) -> None:
    sock = sock_dir / "left.sock"
    async with hosted(sock, INTEROP), Engine() as engine:
        engine.add_cartridge(ECHO_ONLY)  # local: cap:echo stays here
        seen: list[str] = []

        class Names:
            def call_started(self, call: object) -> None:
                if getattr(call, "cap", "").endswith("sha256"):
                    seen.append(call.cartridge)  # type: ignore[attr-defined]

            def call_event(self, token: object, event: object) -> None: ...

            def call_finished(self, token: object, outcome: object) -> None: ...

            def machine_event(self, run: object, event: object) -> None: ...

        engine.add_observer(Names())  # type: ignore[arg-type]
        name = await engine.add_host(sock)
        assert name == "left"
        await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
        local = await engine.call("cap:echo", [("media:", b"hi")])
        assert local.data == b"echo-only:hi"
        remote = await engine.call('cap:out="media:enc=utf-8";sha256', [("media:", b"abc")])
        assert remote.data.decode().startswith("ba7816bf")
        with pytest.raises(NoRoute, match=r"\(cartridges: echo_only\); hosts: left \(healthy\)$"):
            await engine.call("cap:nothing-serves-this", [("media:", b"")])
        (view,) = engine.hosts()
        assert view.id == "left" and view.inventory.records[0].id == "interop"
        statuses = {s.name: s for s in engine.status()}
        assert statuses["left/interop"].host == "left"
        assert statuses["left/interop"].state == "running" and statuses["left/interop"].healthy
        assert all(s.host is None for n, s in statuses.items() if "/" not in n)
        assert seen == ["left/interop"]  # observers (records, OpenTelemetry) name the host
        with pytest.raises(HostAttachError, match="already attached"):
            await engine.add_host(sock)


@pytest.mark.asyncio
async def test_a_big_stream_and_typed_errors_cross_a_host(sock_dir: Path) -> None:
    sock = sock_dir / "h.sock"
    async with hosted(sock, INTEROP), Engine() as engine:
        await engine.add_host(sock)
        await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
        data = bytes(range(256)) * (64 << 12)  # 64 MiB
        result = await engine.call("cap:echo", [("media:", data)])
        assert result.data == data
        with pytest.raises(CallError) as failed:
            await engine.call(
                'cap:fail;in="media:enc=utf-8";out="media:enc=utf-8"', [("media:enc=utf-8", "x")]
            )
        assert failed.value.code == "INTEROP_FAIL"
        assert failed.value.attribution_class == "input"


@pytest.mark.asyncio
async def test_a_peer_call_crosses_hosts(sock_dir: Path) -> None:
    a, b = sock_dir / "a.sock", sock_dir / "b.sock"
    async with hosted(b, ECHO_ONLY), hosted(a, INTEROP), Engine() as engine:
        await engine.add_host(b)  # attached first: cap:echo goes here
        await engine.add_host(a)
        await until(lambda: all(h.state is HostState.HEALTHY for h in engine.hosts()))
        result = await engine.call("cap:peer-echo", [("media:", b"ping")])
        assert result.data == b"echo-only:ping"  # served by host b for host a's cartridge


@pytest.mark.asyncio
async def test_cancel_through_a_host(sock_dir: Path) -> None:
    sock = sock_dir / "h.sock"
    async with hosted(sock, INTEROP) as host, Engine() as engine:
        await engine.add_host(sock)
        await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
        sleep = 'cap:in="media:fmt=json;record";out="media:enc=utf-8";sleep'
        with anyio.fail_after(15):
            async with engine.call(sleep, [("media:fmt=json;record", b'{"ms": 30000}')]) as r:
                await anyio.sleep(0.3)
                await r.cancel()
        await until(lambda: host.status()[0].in_flight == 0)


@pytest.mark.asyncio
async def test_a_dead_host_ends_its_calls_and_is_reattached_in_place(sock_dir: Path) -> None:
    sock = sock_dir / "h.sock"
    sleep = 'cap:in="media:fmt=json;record";out="media:enc=utf-8";sleep'
    failures: list[CallError] = []
    async with Engine() as engine, anyio.create_task_group() as tg:
        events = engine.subscribe()

        async def slow() -> None:
            try:
                await engine.call(sleep, [("media:fmt=json;record", b'{"ms": 30000}')])
            except CallError as exc:
                failures.append(exc)

        async with hosted(sock, INTEROP) as host:
            await engine.add_host(sock)
            await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
            tg.start_soon(slow)
            await until(lambda: host.status()[0].in_flight == 1)
        # the host is gone: its call ended with a typed error
        await until(lambda: bool(failures))
        assert failures[0].code == ErrorCode.MASTER_DIED
        assert failures[0].attribution_class == "environment"
        await until(lambda: engine.hosts()[0].state is HostState.DETACHED)
        async with hosted(sock, INTEROP):
            await until(lambda: engine.hosts()[0].state is HostState.HEALTHY, within=15)
            (view,) = engine.hosts()
            assert view.attaches == 2  # the same slot, re-attached in place
            assert (await engine.call("cap:echo", [("media:", b"back")])).data == b"back"
        states = [e.state for e in events.pending() if isinstance(e, HostLinkChanged)]
        assert "detached" in states and states.count("healthy") >= 2


@pytest.mark.asyncio
async def test_a_host_that_dials_the_engine(sock_dir: Path) -> None:
    sock = sock_dir / "in.sock"
    async with Engine() as engine:
        assert await engine.listen_for_host(sock, name="dialer") == "dialer"
        async with Engine() as host:
            await host.start(host.add_cartridge(INTEROP))
            async with anyio.create_task_group() as tg:
                tg.start_soon(connect, host, sock)
                await until(lambda: bool(engine.hosts()))
                await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
                assert (await engine.call("cap:echo", [("media:", b"in")])).data == b"in"
                tg.cancel_scope.cancel()


def test_the_switch_and_host_run_on_trio(sock_dir: Path) -> None:
    async def main() -> None:
        sock = sock_dir / "t.sock"
        async with hosted(sock, INTEROP), Engine() as engine:
            await engine.add_host(sock)
            await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
            result = await engine.call("cap:echo", [("media:", b"trio" * 100_000)])
            assert result.data == b"trio" * 100_000

    anyio.run(main, backend="trio")


@pytest.mark.asyncio
async def test_the_host_reannounces_its_inventory_when_a_cartridge_stops_idle(
    sock_dir: Path,
) -> None:
    sock = sock_dir / "idle.sock"
    async with Engine(idle_timeout=0.5) as host:
        await host.start(host.add_cartridge(INTEROP))
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: listen(host, sock, on_ready=ready.set))
            await ready.wait()
            async with Engine() as engine:
                await engine.add_host(sock)
                await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
                assert (await engine.call("cap:echo", [("media:", b"1")])).data == b"1"
                # idle stop on the host: announced without waiting for the next period
                await until(lambda: not engine.hosts()[0].inventory.records[0].running)
                # the next call starts it again, through the switch
                assert (await engine.call("cap:echo", [("media:", b"2")])).data == b"2"
                await until(lambda: engine.hosts()[0].inventory.records[0].running)
            tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_a_machine_resolves_and_runs_through_a_host(sock_dir: Path) -> None:
    sock = sock_dir / "m.sock"
    text = str(ROOT / "cartridges" / "wordkit.py")
    async with hosted(sock, text), Engine() as engine:
        await engine.add_host(sock)
        await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
        machine = await engine.machine(
            ROOT / "cartridges" / "samples" / "machines" / "shout.machine"
        )
        result = await engine.run_machine(machine, {"doc": "make it loud"})
        assert result.outputs["shouted"].data == b"MAKE IT LOUD"


@pytest.mark.asyncio
async def test_a_graph_runs_through_a_host_with_its_caps_shapes(sock_dir: Path) -> None:
    """A graph node served by a host is called through it, and its argument takes the shape
    the host cartridge's cap declares (GRW-17): ``join`` gets the words as items."""
    sock = sock_dir / "g.sock"
    split = 'cap:in="media:enc=utf-8";op=split;out="media:enc=utf-8;word"'
    join = 'cap:in="media:enc=utf-8";op=join;out="media:enc=utf-8"'
    async with hosted(sock, str(ROOT / "cartridges" / "wordkit.py")), Engine() as engine:
        await engine.add_host(sock)
        await until(lambda: engine.hosts()[0].state is HostState.HEALTHY)
        async with engine.graph() as g:
            v = g.add_value_node("make it loud", media="media:enc=utf-8")
            words = g.instantiate_with_deps(split, {"media:enc=utf-8": v})
            joined = g.instantiate_with_deps(join, {"words": words})
            result = await g.run()
            assert result.ok, result.error
            assert result[words].outputs[None].is_sequence
            assert result[joined].text == "make it loud"
