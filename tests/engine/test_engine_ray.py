"""The Ray placement on a real local one-node Ray cluster (started once for this module).

Skipped when the ``ray`` extra is not installed. Each cartridge runs in a Ray actor; the
fixture cartridges answer with their pid, so which replica served a call is known, and the
actors' pids come from the instances, so a test can kill one as a crash would.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import anyio
import pytest
from _engine_helpers import RAW, ROOT, raw_env

from cartridge_runtime.engine import CallError, CartridgeDied, Engine, OutputData, SpawnFailed

ray = pytest.importorskip("ray")

from cartridge_runtime.engine.ray import RayPlacement  # noqa: E402

pytestmark = pytest.mark.ray

REPLICA: Final = ROOT / "tests" / "fixtures" / "replica_cartridge.py"
DYING: Final = ROOT / "tests" / "fixtures" / "dying_cartridge.py"
TEXT: Final = "media:enc=utf-8"
WORD: Final = "media:enc=utf-8;word"
WHOAMI: Final = f'cap:in="{WORD}";op=whoami;out="{WORD}"'
SPLIT: Final = f'cap:in="{TEXT}";op=split;out="{WORD}"'
DIE: Final = f'cap:in="{TEXT}";op=die;out="{TEXT}"'
BYTES: Final = "media:"
#: CPUs each test instance reserves: room for a few replicas and their respawns on 2 cores.
CPU_SHARE: Final = 0.25


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    """One local Ray instance for the whole module (about 6 s and 460 MiB to start), started
    the way a user's first launch starts it: a placement with no address."""
    if ray.is_initialized():
        ray.shutdown()
    anyio.run(RayPlacement()._connect)
    try:
        yield
    finally:
        ray.shutdown()


def placement(**kwargs: Any) -> RayPlacement:
    kwargs.setdefault("placement_timeout", 60)
    return RayPlacement(num_cpus=CPU_SHARE, **kwargs)


def test_no_address_started_a_local_ray_instance() -> None:
    assert ray.is_initialized()
    assert ray.cluster_resources().get("CPU") == os.cpu_count()


def pid_of(answer: bytes) -> int:
    return int(answer.decode().rsplit("@", 1)[1])


def instance(engine: Engine, name: str, replica: int = 0) -> Any:
    """The running instance of a replica (a ``RayInstance``), for the tests that kill it."""
    conn = engine._slots[name].replicas[replica].conn
    assert conn is not None and conn.process is not None
    return conn.process


def rss_mib(pid: int) -> float:
    """A process's private resident memory (the shared object store's pages are left out:
    every process that reads a block from it maps them)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no RssAnon for pid {pid}")


def ended(pid: int) -> bool:
    """Whether a process is gone (or a zombie nobody reaped yet)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


async def until(predicate: Any, seconds: float = 60) -> None:
    with anyio.fail_after(seconds):
        while not predicate():  # noqa: ASYNC110 - engine state has no event to wait on
            await anyio.sleep(0.02)


@pytest.mark.asyncio
async def test_calls_route_to_ray_replicas() -> None:
    async with Engine() as engine:
        name = engine.add_cartridge(
            REPLICA, replicas=2, placement=placement(), env={"REPLICA_PAUSE": "0.2"}
        )
        await engine.start(name)
        (status,) = engine.status()
        assert [r.state for r in status.replicas] == ["running", "running"]
        ids = [r.placement_id or "" for r in status.replicas]
        assert all(i.startswith("ray actor ") for i in ids) and ids[0] != ids[1]
        remote = {instance(engine, name, i).remote_pid for i in (0, 1)}
        assert None not in remote and len(remote) == 2
        # On one host the bytes go over the actors' Unix sockets, not through Ray.
        assert [instance(engine, name, i).path for i in (0, 1)] == ["unix", "unix"]
        if os.geteuid() == 0:  # allowed to undo Ray's nice 15: the engine's niceness
            mine = os.getpriority(os.PRIO_PROCESS, 0)
            assert {os.getpriority(os.PRIO_PROCESS, pid) for pid in remote} == {mine}
        answers: list[bytes] = []

        async def call(word: str) -> None:
            answers.append((await engine.call(WHOAMI, [(WORD, word)])).data)

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(call, f"w{i}")
    assert sorted(a.decode().rsplit("@", 1)[0] for a in answers) == [f"w{i}" for i in range(4)]
    assert {pid_of(a) for a in answers} == remote


@pytest.mark.asyncio
async def test_the_engine_default_placement_and_joining_the_running_ray() -> None:
    # No address: Ray is already initialised in this process (the fixture), so it is joined.
    async with Engine(placement=RayPlacement(placement_timeout=60)) as engine:
        name = engine.add_cartridge(REPLICA, env={"REPLICA_PAUSE": "0"})
        answer = await engine.call(WHOAMI, [(WORD, "x")])
        assert pid_of(answer.data) == instance(engine, name).remote_pid
        assert (engine.status()[0].replicas[0].placement_id or "").startswith("ray actor ")


async def _blocks(total: int, size: int) -> AsyncIterator[bytes]:
    block = bytes(range(256)) * (size // 256)
    for _ in range(total // size):
        yield block


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("mib", "bound"),
    [(64, 48), pytest.param(1024, 150, marks=pytest.mark.slow, id="1GiB")],
    ids=lambda v: str(v),
)
async def test_an_echo_streams_both_ways_in_bounded_memory(mib: int, bound: int) -> None:
    total = mib << 20
    async with Engine() as engine:
        name = engine.add_cartridge(RAW, env=raw_env("echo"), placement=placement())
        await engine.start(name)
        actor = instance(engine, name).actor_pid
        base = {"driver": rss_mib(os.getpid()), "actor": rss_mib(actor)}
        peak = dict(base)
        received = 0
        async with engine.call("cap:echo", [(BYTES, _blocks(total, 256 << 10))]) as response:
            async for event in response:
                if isinstance(event, OutputData):
                    received += len(event.value)
                    peak["driver"] = max(peak["driver"], rss_mib(os.getpid()))
                    peak["actor"] = max(peak["actor"], rss_mib(actor))
    assert received == total
    growth = {k: peak[k] - base[k] for k in base}
    # Credit and the two bounded windows hold a few MiB in flight, never the payload.
    assert growth["driver"] < bound and growth["actor"] < bound, growth


@pytest.mark.asyncio
async def test_a_cartridge_dying_in_its_actor_is_cartridge_died_with_its_stderr() -> None:
    async with Engine() as engine:
        engine.add_cartridge(DYING, placement=placement())
        with pytest.raises(CartridgeDied) as info:
            await engine.call(DIE, [(TEXT, "test")])
    err = info.value
    assert err.code == "CARTRIDGE_DIED" and err.attribution_class == "environment"
    assert err.returncode == 7 and "exit status 7" in err.message
    assert "dying on purpose: test" in err.stderr_tail


@pytest.mark.asyncio
async def test_an_actor_killed_fails_its_call_and_the_next_call_is_served() -> None:
    async with Engine() as engine:
        name = engine.add_cartridge(REPLICA, placement=placement(), env={"REPLICA_PAUSE": "2"})
        await engine.start(name)
        first = instance(engine, name)
        outcome: list[Any] = []

        async def call() -> None:
            try:
                outcome.append(await engine.call(WHOAMI, [(WORD, "a")]))
            except CallError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await until(lambda: engine.status()[0].in_flight == 1)
            os.kill(first.actor_pid, signal.SIGKILL)
            with anyio.fail_after(30):  # a hang guard; Ray reports the death in about 2 s
                await until(lambda: bool(outcome))
        (err,) = outcome
        assert isinstance(err, CartridgeDied), err
        assert err.code == "CARTRIDGE_DIED" and err.attribution_class == "environment"
        assert "Ray actor was lost" in err.message
        # Its cartridge outlived the actor; the engine shut the socket down and it ended.
        await until(lambda: ended(first.remote_pid))
        answer = await engine.call(WHOAMI, [(WORD, "b")], timeout=120)
        second = instance(engine, name)
        assert second is not first and pid_of(answer.data) == second.remote_pid
        assert engine.status()[0].starts == 2


@pytest.mark.asyncio
async def test_the_engine_killing_a_ray_replica_fails_its_call_with_the_signal() -> None:
    async with Engine() as engine:
        name = engine.add_cartridge(REPLICA, placement=placement(), env={"REPLICA_PAUSE": "30"})
        await engine.start(name)
        async with anyio.create_task_group() as tg:
            outcome: list[Any] = []

            async def call() -> None:
                try:
                    outcome.append(await engine.call(WHOAMI, [(WORD, "a")]))
                except CallError as exc:
                    outcome.append(exc)

            tg.start_soon(call)
            await until(lambda: engine.status()[0].in_flight == 1)
            engine.kill(name)
            await until(lambda: bool(outcome))
        (err,) = outcome
        assert isinstance(err, CartridgeDied) and err.returncode == -9, err
        assert "killed by signal 9 (SIGKILL)" in err.message
        assert engine.status()[0].replicas[0].state == "dead"


@pytest.mark.asyncio
async def test_an_unsatisfiable_placement_is_spawn_failed_naming_the_resource() -> None:
    async with Engine() as engine:
        engine.add_cartridge(REPLICA, placement=RayPlacement(num_gpus=1, placement_timeout=1))
        with pytest.raises(SpawnFailed) as info:
            await engine.call(WHOAMI, [(WORD, "x")])
    err = info.value
    assert err.code == "SPAWN_FAILED" and err.step == "spawn"
    assert "missing GPU=1 (the cluster has 0)" in err.message
    assert "placement_timeout=1s" in err.message


@pytest.mark.asyncio
async def test_a_program_missing_on_the_node_is_spawn_failed() -> None:
    async with Engine() as engine:
        engine.add_cartridge(["/bin/sh"], placement=placement(), env={"PATH": ""})
        engine._slots["sh"].target = attrs_evolve_command(engine, "sh", "/no/such/program")
        with pytest.raises(SpawnFailed) as info:
            await engine.call(WHOAMI, [(WORD, "x")])
    assert "could not start it" in info.value.message
    assert "FileNotFoundError" in info.value.message


def attrs_evolve_command(engine: Engine, name: str, program: str) -> Any:
    """The slot's target with another program (as if it existed here but not on the node)."""
    import attrs

    return attrs.evolve(engine._slots[name].target, command=(program,))


async def _held() -> AsyncIterator[bytes]:
    """An input that sends one piece and never ends: only a cancel ends its call."""
    yield b"x"
    await anyio.sleep_forever()


@pytest.mark.asyncio
async def test_cancel_reaches_the_remote_cartridge() -> None:
    async with Engine(cancel_grace=20.0) as engine:
        engine.add_cartridge(RAW, env=raw_env("echo"), placement=placement())
        async with engine.call("cap:echo", [(BYTES, _held())]) as response:
            async for event in response:
                if isinstance(event, OutputData):
                    break  # the first piece came back: the call is running remotely
            await response.cancel()
            with pytest.raises(CallError) as info:
                await response.collect()
        # Answered by the cartridge (its ERR CANCELLED), not given up on after the grace.
        assert info.value.code == "CANCELLED" and "did not confirm" not in info.value.message
        assert (await engine.call("cap:echo", [(BYTES, b"after")])).data == b"after"


@pytest.mark.asyncio
async def test_a_per_item_map_spreads_over_ray_replicas() -> None:
    words = [f"w{i}" for i in range(12)]
    text = "\n".join(
        [
            f"split {SPLIT}",
            f"whoami {WHOAMI}",
            "doc -> split -> ws",
            "ws -> whoami -> out",
        ]
    )
    async with Engine() as engine:
        name = engine.add_cartridge(
            REPLICA, replicas=2, placement=placement(), env={"REPLICA_PAUSE": "0.1"}
        )
        await engine.start(name)
        remote = {instance(engine, name, i).remote_pid for i in (0, 1)}
        result = await engine.run_machine(text, {"doc": " ".join(words)}, window=4)
    items = result["out"].items
    assert [item.value.decode().rsplit("@", 1)[0] for item in items] == words
    served = Counter(pid_of(item.value) for item in items)
    assert set(served) == remote, "items landed on both replicas"


def test_on_trio_a_ray_placement_is_refused_with_a_typed_error() -> None:
    async def main() -> None:
        async with Engine() as engine:
            engine.add_cartridge(REPLICA, placement=placement())
            with pytest.raises(SpawnFailed) as info:
                await engine.call(WHOAMI, [(WORD, "x")])
            assert "needs the asyncio backend" in info.value.message
            assert "runs on trio" in info.value.message

    anyio.run(main, backend="trio")


@pytest.mark.asyncio
async def test_small_calls_in_flight_to_one_actor_share_round_trips() -> None:
    calls = 32
    async with Engine() as engine:
        # Through Ray (no direct stream): the coalesced writes are what this is about.
        name = engine.add_cartridge(RAW, env=raw_env("echo"), placement=placement(direct=False))
        await engine.call("cap:echo", [(BYTES, b"warm")])
        process = instance(engine, name)
        assert process.path == "ray"
        writes, blocks = process.stdin.writes, process.blocks
        answers: dict[int, bytes] = {}

        async def call(i: int) -> None:
            answers[i] = (await engine.call("cap:echo", [(BYTES, b"%d" % i)])).data

        async with anyio.create_task_group() as tg:
            for i in range(calls):
                tg.start_soon(call, i)
        writes = process.stdin.writes - writes
        blocks = process.blocks - blocks
    assert answers == {i: b"%d" % i for i in range(calls)}
    # Each write is one actor round trip: without coalescing, one per call. (How many
    # output blocks the answers come back in depends on the cartridge's pace against the
    # actor's reads, so it is counted here but not bounded.)
    assert writes <= calls // 4, (writes, blocks)
