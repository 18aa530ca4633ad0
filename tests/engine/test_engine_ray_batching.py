"""The Ray sink coalesces writes: the frames of calls in flight to one actor share round trips.

The sink's rules, driven by hand against an actor whose answers the test gives (each write is
one round trip: counted, its bytes checked, answered when the test says), then the engine's
calls through the fake backend of ``test_engine_ray_fake`` counting the round trips they took.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import Any

import anyio
import anyio.abc
import pytest
from _engine_helpers import RAW, raw_env

from cartridge_runtime.engine import Engine, Instance, LaunchSpec

pytest.importorskip("ray")

from ray.exceptions import ActorDiedError
from test_engine_ray_fake import FakeRayPlacement

from cartridge_runtime.engine.ray._instance import (
    BATCH_BYTES,
    STDIN_WINDOW,
    RayInstance,
)


class Ref:
    def __init__(self) -> None:
        self.answer: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def future(self) -> concurrent.futures.Future[Any]:
        return self.answer


class Method:
    def __init__(self, calls: list[tuple[Any, ...]], refs: list[Ref]) -> None:
        self._calls, self._refs = calls, refs

    def remote(self, *args: Any) -> Ref:
        self._calls.append(args)
        self._refs.append(Ref())
        return self._refs[-1]


class HandActor:
    """Records ``write`` and ``close_stdin`` calls; the test answers each write."""

    def __init__(self) -> None:
        self.writes: list[tuple[Any, ...]] = []
        self.refs: list[Ref] = []
        self.closes: list[tuple[Any, ...]] = []
        self.write = Method(self.writes, self.refs)
        self.close_stdin = Method(self.closes, [])
        self._actor_id = type("Id", (), {"hex": lambda _self: "ab" * 16})()

    async def answer(self, index: int, error: BaseException | None = None) -> None:
        ref = self.refs[index]
        if error is None:
            ref.answer.set_result(None)
        else:
            ref.answer.set_exception(error)
        for _ in range(3):  # the answer crosses asyncio.wrap_future's call_soon
            await asyncio.sleep(0)


def sink() -> tuple[Any, HandActor]:
    actor = HandActor()
    return RayInstance(actor, {"node": "n", "pid": 1}, kill_actor=lambda _a: None).stdin, actor


@pytest.mark.asyncio
async def test_a_lone_write_goes_at_once_and_as_it_is() -> None:
    stdin, actor = sink()
    data = b"frame"
    assert stdin.write_now([data]) == []
    assert len(actor.writes) == 1 and actor.writes[0][0] == 0
    assert actor.writes[0][1] is data  # one bytes buffer: not copied
    await actor.answer(0)
    assert stdin.write_now([memoryview(b"ab"), b"cd"]) == []
    assert actor.writes[1] == (1, b"abcd") and type(actor.writes[1][1]) is bytes


@pytest.mark.asyncio
async def test_writes_while_one_is_unanswered_are_held_then_sent_as_one() -> None:
    stdin, actor = sink()
    stdin.write_now([b"a"])
    for part in (b"b", b"c", b"d"):
        assert stdin.write_now([part]) == []  # taken, not sent
    await stdin.send_all([b"e"])
    assert len(actor.writes) == 1 and stdin.writes == 1
    await actor.answer(0)
    assert actor.writes[1] == (1, b"bcde") and stdin.writes == 2
    await actor.answer(1)
    assert len(actor.writes) == 2  # nothing held: no empty write


@pytest.mark.asyncio
async def test_a_full_batch_goes_without_waiting_for_an_answer() -> None:
    stdin, actor = sink()
    stdin.write_now([b"a"])
    big = b"x" * BATCH_BYTES
    stdin.write_now([big])
    assert [w[0] for w in actor.writes] == [0, 1] and actor.writes[1][1] is big


@pytest.mark.asyncio
async def test_a_full_window_and_batch_hand_bytes_back_and_send_all_waits() -> None:
    stdin, actor = sink()
    big = b"x" * BATCH_BYTES
    for _ in range(STDIN_WINDOW + 1):
        assert stdin.write_now([big]) == []
    assert len(actor.writes) == STDIN_WINDOW  # the last batch is held
    assert stdin.write_now([b"y"]) == [b"y"]  # full: handed back, as a full pipe does
    done = anyio.Event()

    async def send() -> None:
        await stdin.send_all([b"z"])
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(send)
        await asyncio.sleep(0.01)
        assert not done.is_set()
        await actor.answer(0)  # room: the held batch goes, then "z" is taken
        await done.wait()
    assert len(actor.writes) == STDIN_WINDOW + 1 and actor.writes[-1][1] is big
    for i in range(1, STDIN_WINDOW + 1):
        assert len(actor.writes) == STDIN_WINDOW + 1  # "z" waits: writes are unanswered
        await actor.answer(i)
    assert actor.writes[-1] == (STDIN_WINDOW + 1, b"z")


@pytest.mark.asyncio
async def test_close_sends_the_held_bytes_before_the_end_of_input() -> None:
    stdin, actor = sink()
    stdin.write_now([b"a"])
    stdin.write_now([b"b"])
    stdin.close()
    assert actor.writes[1] == (1, b"b") and actor.closes == [(2,)]
    with pytest.raises(anyio.ClosedResourceError):
        stdin.write_now([b"c"])
    stdin.close()
    assert actor.closes == [(2,)]


@pytest.mark.asyncio
async def test_a_failed_write_drops_the_held_bytes_and_breaks_the_sink() -> None:
    stdin, actor = sink()
    stdin.write_now([b"a"])
    stdin.write_now([b"b"])
    await actor.answer(0, ActorDiedError())
    assert len(actor.writes) == 1  # the held bytes were not sent to a dead actor
    with pytest.raises(anyio.BrokenResourceError, match="stopped taking input: ActorDiedError"):
        stdin.write_now([b"c"])
    with pytest.raises(anyio.BrokenResourceError):
        await stdin.send_all([b"c"])
    stdin.close()
    assert actor.closes == [(1,)]


class SlowWrites(FakeRayPlacement):
    """The fake backend with a round trip of 50 ms per write, as a busy actor has."""

    async def launch(self, spec: LaunchSpec, task_group: anyio.abc.TaskGroup) -> Instance:
        instance = await super().launch(spec, task_group)
        host = self.actors[-1].host
        write = host.write

        def slow(seq: int, data: bytes) -> None:
            time.sleep(0.05)  # in the actor's thread, as a busy actor takes its time
            write(seq, data)

        host.write = slow  # type: ignore[method-assign]
        return instance


@pytest.mark.asyncio
async def test_calls_in_flight_to_one_fake_actor_share_round_trips() -> None:
    fake = SlowWrites()
    calls = 32
    async with Engine() as engine:
        name = engine.add_cartridge(RAW, env=raw_env("echo"), placement=fake)
        await engine.call("cap:echo", [("media:", b"warm")])
        instance: Any = engine._slots[name].replicas[0].conn.process  # type: ignore[union-attr]
        writes, blocks = instance.stdin.writes, instance.blocks
        answers: dict[int, bytes] = {}

        async def call(i: int) -> None:
            answers[i] = (await engine.call("cap:echo", [("media:", b"%d" % i)])).data

        async with anyio.create_task_group() as tg:
            for i in range(calls):
                tg.start_soon(call, i)
        writes = instance.stdin.writes - writes
        blocks = instance.blocks - blocks
    assert answers == {i: b"%d" % i for i in range(calls)}
    # The first call's write goes alone, the 31 others share the next one. Without
    # coalescing: one write per call up to the window of 8, then the rest in one.
    assert writes <= 3, (writes, blocks)
    # How many blocks the answers come back in follows the cartridge's pace against the
    # actor's reads (the host's load), so it is not bounded here.
