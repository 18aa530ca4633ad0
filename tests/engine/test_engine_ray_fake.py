"""The Ray placement's contract without a cluster: a fake backend runs the actor logic
(:class:`CartridgeHost`) in this process, pickling every argument and every answer as Ray
would, behind the driver side (:class:`RayInstance`) the engine really uses. Fast: no Ray
processes; needs the ``ray`` package only for its exception types.

The fake keeps Ray's shapes: every call runs in a thread of the actor's pool, as in a threaded
actor; ``actor.method.remote(...)`` returns an awaitable reference with ``future()``, a
streaming call an async iterator of references with at most ``backpressure`` blocks unread,
and a killed actor fails every pending and later call with ``ActorDiedError``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import pickle
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import anyio
import anyio.abc
import pytest
from _engine_helpers import RAW, ROOT, raw_env

from cartridge_runtime.engine import (
    CallError,
    CartridgeDied,
    Engine,
    Instance,
    LaunchSpec,
    OutputData,
    Subprocess,
    Target,
)
from cartridge_runtime.engine.ray._host import THREADS, CartridgeHost

ray = pytest.importorskip("ray")

from ray.exceptions import ActorDiedError  # noqa: E402

from cartridge_runtime.engine.ray._instance import RayInstance, start_actor  # noqa: E402

REPLICA: Final = ROOT / "tests" / "fixtures" / "replica_cartridge.py"
DYING: Final = ROOT / "tests" / "fixtures" / "dying_cartridge.py"
TEXT: Final = "media:enc=utf-8"
WORD: Final = "media:enc=utf-8;word"
WHOAMI: Final = f'cap:in="{WORD}";op=whoami;out="{WORD}"'
DIE: Final = f'cap:in="{TEXT}";op=die;out="{TEXT}"'


def wire(value: Any) -> Any:
    return pickle.loads(pickle.dumps(value))


class FakeActor:
    """A :class:`CartridgeHost` behind Ray's call shapes, in this process."""

    def __init__(self) -> None:
        self.host = CartridgeHost()
        self.pool = concurrent.futures.ThreadPoolExecutor(THREADS)
        self.dead = False
        self.tasks: set[asyncio.Future[Any]] = set()
        self.most_unread = 0
        self._actor_id = type("Id", (), {"hex": lambda _self: "fa4e" * 8})()

    def __getattr__(self, name: str) -> FakeMethod:
        return FakeMethod(self, getattr(self.host, name))

    def die(self) -> None:
        self.dead = True
        self.host.kill()
        for task in self.tasks:
            task.cancel()


class FakeMethod:
    def __init__(self, actor: FakeActor, fn: Any, streaming: int | None = None) -> None:
        self._actor, self._fn, self._streaming = actor, fn, streaming

    def options(self, **options: Any) -> FakeMethod:
        return FakeMethod(self._actor, self._fn, options["_generator_backpressure_num_objects"])

    def remote(self, *args: Any) -> Any:
        args = wire(args)
        if self._streaming is not None:
            return FakeStream(self._actor, self._fn(*args), self._streaming)
        return FakeRef(self._actor, self._fn, args)


class FakeRef:
    def __init__(self, actor: FakeActor, fn: Any, args: tuple[Any, ...]) -> None:
        self._actor = actor
        self._future: asyncio.Future[Any] = asyncio.ensure_future(self._run(fn, args))
        actor.tasks.add(self._future)
        self._future.add_done_callback(actor.tasks.discard)

    async def _run(self, fn: Any, args: tuple[Any, ...]) -> Any:
        if self._actor.dead:
            raise ActorDiedError()
        try:
            # A threaded actor: each call runs in a thread of the actor's pool.
            result = await asyncio.get_running_loop().run_in_executor(self._actor.pool, fn, *args)
        except asyncio.CancelledError:
            raise ActorDiedError() from None
        return wire(result)

    def future(self) -> asyncio.Future[Any]:
        return self._future

    def __await__(self) -> Any:
        return self._future.__await__()


class FakeStream:
    """A streaming generator call: at most ``backpressure`` blocks produced and unread."""

    def __init__(self, actor: FakeActor, gen: Iterator[bytes], backpressure: int) -> None:
        self._actor = actor
        self._queue: asyncio.Queue[Any] = asyncio.Queue(backpressure)
        self._task = asyncio.ensure_future(self._pump(gen))
        actor.tasks.add(self._task)

    async def _pump(self, gen: Iterator[bytes]) -> None:
        try:
            loop = asyncio.get_running_loop()
            while (
                block := await loop.run_in_executor(self._actor.pool, next, gen, None)
            ) is not None:
                await self._queue.put(wire(block))
                self._actor.most_unread = max(self._actor.most_unread, self._queue.qsize())
            await self._queue.put(StopAsyncIteration())
        except asyncio.CancelledError:
            self._queue.put_nowait(ActorDiedError()) if not self._queue.full() else None
            raise

    def __aiter__(self) -> FakeStream:
        return self

    async def __anext__(self) -> Any:
        if self._actor.dead and self._queue.empty():
            raise ActorDiedError()
        item = await self._queue.get()
        if isinstance(item, BaseException):
            raise item
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(item)
        return done


class FakeRayPlacement:
    """What :class:`RayPlacement` does, with the fake backend instead of Ray; ``direct``: the
    bytes go over the actor's Unix socket (else through the actor's calls)."""

    def __init__(self, *, direct: bool = False) -> None:
        self.actors: list[FakeActor] = []
        self.instances: list[RayInstance] = []
        self.direct = direct

    def resolve(self, target: object) -> Target:
        return Subprocess().resolve(target)

    async def launch(self, spec: LaunchSpec, task_group: anyio.abc.TaskGroup) -> Instance:
        actor = FakeActor()
        self.actors.append(actor)
        where, streams = await start_actor(
            actor, list(spec.target.command), spec.env, direct=self.direct
        )
        instance = RayInstance(
            actor, where, kill_actor=lambda a: a.die(), take_ready=_take_ready, direct=streams
        )
        if streams is not None:
            task_group.start_soon(instance.watch)
        self.instances.append(instance)
        return instance


def _take_ready(ref: asyncio.Future[bytes]) -> bytes | None:
    """What ``ray.get(ref, timeout=0)`` does for the fake's references."""
    return ref.result() if ref.done() else None


async def _blocks(total: int, size: int = 256 << 10) -> AsyncIterator[bytes]:
    block = bytes(range(256)) * (size // 256)
    for _ in range(total // size):
        yield block


@pytest.mark.asyncio
@pytest.mark.parametrize("direct", [False, True], ids=["through-ray", "direct"])
async def test_calls_and_a_streamed_echo_cross_the_fake_actor(direct: bool) -> None:
    fake = FakeRayPlacement(direct=direct)
    async with Engine() as engine:
        name = engine.add_cartridge(RAW, env=raw_env("echo"), placement=fake)
        assert (await engine.call("cap:echo", [("media:", b"hi")])).data == b"hi"
        received = 0
        async with engine.call("cap:echo", [("media:", _blocks(16 << 20))]) as response:
            async for event in response:
                if isinstance(event, OutputData):
                    received += len(event.value)
        assert received == 16 << 20
        (replica,) = engine.status()[0].replicas
        assert (replica.placement_id or "").startswith("ray actor fa4efa4efa4e on node")
        over = "over a unix socket)" if direct else "through ray)"
        assert (replica.placement_id or "").endswith(over)
        assert engine.status()[0].name == name
    (actor,) = fake.actors
    (instance,) = fake.instances
    if direct:
        assert instance.path == "unix" and actor.most_unread == 0  # no block crossed the actor
    else:
        assert instance.path == "ray"
        assert 0 < actor.most_unread <= 8  # the generator's backpressure bound held


@pytest.mark.asyncio
@pytest.mark.parametrize("direct", [False, True], ids=["through-ray", "direct"])
async def test_a_cartridge_dying_in_the_fake_actor_is_cartridge_died_with_stderr(
    direct: bool,
) -> None:
    async with Engine() as engine:
        engine.add_cartridge(DYING, placement=FakeRayPlacement(direct=direct))
        with pytest.raises(CartridgeDied) as info:
            await engine.call(DIE, [(TEXT, "fake")])
    assert info.value.returncode == 7 and "exit status 7" in info.value.message
    assert "dying on purpose: fake" in info.value.stderr_tail


@pytest.mark.asyncio
@pytest.mark.parametrize("direct", [False, True], ids=["through-ray", "direct"])
async def test_the_fake_actor_lost_fails_its_call_and_a_new_actor_serves_the_next(
    direct: bool,
) -> None:
    fake = FakeRayPlacement(direct=direct)
    async with Engine() as engine:
        engine.add_cartridge(REPLICA, placement=fake, env={"REPLICA_PAUSE": "1"})
        await engine.call(WHOAMI, [(WORD, "warm")])
        outcome: list[Any] = []

        async def call() -> None:
            try:
                outcome.append(await engine.call(WHOAMI, [(WORD, "a")]))
            except CallError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(30):
                while engine.status()[0].in_flight != 1:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            fake.actors[0].die()
        (err,) = outcome
        assert isinstance(err, CartridgeDied) and err.attribution_class == "environment"
        assert "its Ray actor was lost (ActorDiedError" in err.message
        answer = await engine.call(WHOAMI, [(WORD, "b")])
        assert answer.data.startswith(b"b@") and len(fake.actors) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("direct", [False, True], ids=["through-ray", "direct"])
async def test_cancel_reaches_the_cartridge_through_the_fake_actor(direct: bool) -> None:
    async def held() -> AsyncIterator[bytes]:
        yield b"x"
        await anyio.sleep_forever()

    async with Engine(cancel_grace=20.0) as engine:
        engine.add_cartridge(RAW, env=raw_env("echo"), placement=FakeRayPlacement(direct=direct))
        async with engine.call("cap:echo", [("media:", held())]) as response:
            async for event in response:
                if isinstance(event, OutputData):
                    break
            await response.cancel()
            with pytest.raises(CallError) as info:
                await response.collect()
        assert info.value.code == "CANCELLED" and "did not confirm" not in info.value.message
