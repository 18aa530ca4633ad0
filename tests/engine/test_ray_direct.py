"""The direct stream of the Ray placement, without a cluster: the actor's sockets and token,
the engine's dial and its fallback, the write shutdown that ends the cartridge's input, and an
actor lost while its cartridge still runs on the socket."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import anyio
import pytest
from _engine_helpers import RAW, raw_env

from cartridge_runtime.engine import CallError, CartridgeDied, Engine
from cartridge_runtime.engine.ray._direct import Listener, dial, socket_streams
from cartridge_runtime.engine.ray._host import CartridgeHost

pytest.importorskip("ray")

from test_engine_ray_fake import (
    REPLICA,
    WHOAMI,
    WORD,
    FakeActor,
    FakeRayPlacement,
)

TOKEN = b"t" * 32


def _gone(folder: str) -> bool:
    return not os.path.exists(folder)


def _accept_in_thread(listener: Listener, token: bytes, timeout: float = 10.0) -> dict[str, Any]:
    got: dict[str, Any] = {}

    def body() -> None:
        try:
            got["conn"] = listener.accept(token, timeout)
        except BaseException as exc:
            got["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    got["thread"] = thread
    return got


@pytest.mark.asyncio
@pytest.mark.parametrize("over", ["unix", "tcp"])
async def test_the_engine_reaches_the_actor_socket_with_its_token_and_bytes_flow(
    over: str,
) -> None:
    listener = Listener("127.0.0.1")
    addresses = listener.addresses()
    folder = os.path.dirname(addresses["unix"])
    if over == "tcp":
        addresses["host"] = "another-host"  # the Unix path is not ours: TCP it is
    got = _accept_in_thread(listener, TOKEN)
    # A connection without the token is refused; the engine's is taken.
    family, target = (
        (socket.AF_UNIX, addresses["unix"])
        if over == "unix"
        else (socket.AF_INET, tuple(addresses["tcp"]))
    )
    with socket.socket(family, socket.SOCK_STREAM) as stranger:
        stranger.connect(target)
        stranger.sendall(b"x" * 32)
        assert stranger.recv(1) == b""  # closed by the actor
    sock = await dial(addresses, TOKEN)
    assert sock is not None and sock.family == family
    got["thread"].join(10)
    listener.close()
    assert _gone(folder)
    conn = got["conn"]
    stdin, stdout = socket_streams(sock)
    try:
        await stdin.send_all([b"ping", b"!"])
        assert conn.recv(5, socket.MSG_WAITALL) == b"ping!"
        conn.sendall(b"pong")
        assert await stdout.receive() == b"pong"
        # Closing the engine's writing end is the cartridge's EOF; its answers still come.
        stdin.close()
        assert conn.recv(1) == b""
        conn.sendall(b"last")
        conn.close()
        assert await stdout.receive() == b"last"
        with pytest.raises(anyio.EndOfStream):
            await stdout.receive()
    finally:
        stdout.close()


@pytest.mark.asyncio
async def test_dial_is_none_when_no_address_answers() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused
    listener = Listener(None)
    try:
        addresses = listener.addresses()
        elsewhere = {"unix": addresses["unix"], "host": "another-host", "tcp": ["127.0.0.1", port]}
        assert await dial(elsewhere, TOKEN, within=2) is None
        assert await dial({}, TOKEN) is None
    finally:
        listener.close()


def test_the_actor_gives_up_when_no_engine_presents_the_token() -> None:
    listener = Listener(None)
    try:
        with pytest.raises(TimeoutError, match=r"did not connect within 0\.2 s"):
            listener.accept(TOKEN, 0.2)
    finally:
        listener.close()


class _FarHost(CartridgeHost):
    """An actor whose sockets the engine cannot reach (its Unix path on another host, no
    TCP address)."""

    def listen(self) -> dict[str, Any]:
        found = super().listen()
        found["host"] = "another-host"
        return found


class _FarActor(FakeActor):
    def __init__(self) -> None:
        super().__init__()
        self.host = _FarHost()


class _FarPlacement(FakeRayPlacement):
    def __init__(self) -> None:
        super().__init__(direct=True)

    async def launch(self, spec: Any, task_group: anyio.abc.TaskGroup) -> Any:
        import test_engine_ray_fake as fake

        real, fake.FakeActor = fake.FakeActor, _FarActor  # type: ignore[misc]
        try:
            return await super().launch(spec, task_group)
        finally:
            fake.FakeActor = real  # type: ignore[misc]


@pytest.mark.asyncio
async def test_without_a_direct_path_the_bytes_go_through_the_actor() -> None:
    placement = _FarPlacement()
    async with Engine() as engine:
        engine.add_cartridge(RAW, env=raw_env("echo"), placement=placement)
        assert (await engine.call("cap:echo", [("media:", b"hi")])).data == b"hi"
    (instance,) = placement.instances
    assert instance.path == "ray" and instance.blocks > 0


@pytest.mark.asyncio
async def test_from_another_host_the_engine_takes_the_tcp_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cartridge_runtime.engine.ray._host as host

    monkeypatch.setattr(host, "_node_address", lambda: "127.0.0.1")
    placement = _FarPlacement()
    async with Engine() as engine:
        engine.add_cartridge(RAW, env=raw_env("echo"), placement=placement)
        assert (await engine.call("cap:echo", [("media:", b"hi")])).data == b"hi"
        big = bytes(range(256)) * (12 << 12)  # 12 MiB: many chunks, credit both ways
        assert (await engine.call("cap:echo", [("media:", big)])).data == big
        (replica,) = engine.status()[0].replicas
        assert (replica.placement_id or "").endswith("over a tcp socket)")
    (instance,) = placement.instances
    assert instance.path == "tcp" and instance.blocks == 0


@pytest.mark.asyncio
async def test_an_actor_lost_while_its_cartridge_runs_ends_the_socket_and_the_cartridge() -> None:
    fake = FakeRayPlacement(direct=True)
    async with Engine() as engine:
        engine.add_cartridge(REPLICA, placement=fake, env={"REPLICA_PAUSE": "1"})
        await engine.call(WHOAMI, [(WORD, "warm")])
        outcome: list[Any] = []

        async def call() -> None:
            try:
                outcome.append(await engine.call(WHOAMI, [(WORD, "a")]))
            except CallError as exc:
                outcome.append(exc)

        (actor,) = fake.actors
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(30):
                while engine.status()[0].in_flight != 1:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            # The actor goes, its cartridge does not (nothing kills it later either): only the
            # engine's watch sees it.
            actor.host.kill = lambda: None  # type: ignore[method-assign]
            actor.dead = True
            for task in actor.tasks:
                task.cancel()
        (err,) = outcome
        assert isinstance(err, CartridgeDied) and "its Ray actor was lost" in err.message
        # The engine shut the socket down: the orphan read EOF and exited on its own.
        with anyio.fail_after(30):
            status = await anyio.to_thread.run_sync(actor.host.wait)
        assert status == 0
        answer = await engine.call(WHOAMI, [(WORD, "b")])
        assert answer.data.startswith(b"b@") and len(fake.actors) == 2


def test_a_silent_stranger_does_not_hold_the_engine_connection_up_for_long() -> None:
    listener = Listener(None)
    path = listener.addresses()["unix"]
    try:
        with socket.socket(socket.AF_UNIX) as stranger, socket.socket(socket.AF_UNIX) as engine:
            stranger.connect(path)  # first in line, and never says a word
            engine.connect(path)
            engine.sendall(TOKEN)
            # Taken after the stranger's short turn, well within the actor's overall wait.
            conn = listener.accept(TOKEN, timeout=10)
            with conn:
                engine.sendall(b"hi")
                assert conn.recv(2, socket.MSG_WAITALL) == b"hi"
    finally:
        listener.close()
