"""Placements and replicas: ``Engine.add_cartridge(target, replicas=N, placement=...)``.

In process (``InProcess(runtime)``) the handlers wait on events the test holds, so where each
call is in flight is seen in ``Engine.status()`` without timing anything; as subprocesses the
fixture cartridge answers with its pid, so the replica that served each call is known.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any, Final

import anyio
import pytest
from _engine_helpers import ROOT

from cartridge_runtime.engine import (
    CallError,
    CartridgeDied,
    Engine,
    EngineError,
    InProcess,
    ReplicaStatus,
    SpawnFailed,
    Subprocess,
)
from cartridge_runtime.manifest import ArgDef, CapDef, Manifest, OutputDef
from cartridge_runtime.runtime import CartridgeRuntime, DryContext, Op, WetContext

FIXTURE: Final = ROOT / "tests" / "fixtures" / "replica_cartridge.py"
TEXT: Final = "media:enc=utf-8"
WORD: Final = "media:enc=utf-8;word"
HOLD: Final = f'cap:in="{TEXT}";op=hold;out="{TEXT}"'
WHOAMI: Final = f'cap:in="{WORD}";op=whoami;out="{WORD}"'
RELAY: Final = f'cap:in="{WORD}";op=relay;out="{WORD}"'


class Gate:
    """Calls to ``hold`` wait here until the test opens the gate."""

    def __init__(self) -> None:
        self.open = anyio.Event()
        self.arrived = 0


def held_runtime(gate: Gate, capacity: int | None = None) -> CartridgeRuntime:
    """A runtime whose ``hold`` cap answers its input once ``gate`` opens."""
    cap = CapDef(
        urn=HOLD,
        title="hold",
        aliases=("hold",),
        args=[ArgDef.stdin(TEXT, name="input", description="text")],
        outputs=[OutputDef(media_urn=TEXT, name="output", output_description="the same")],
    )
    manifest = Manifest.build(
        name="held",
        version="1.0.0",
        description="Holds calls",
        caps=[cap],
        capacities={HOLD: capacity} if capacity else None,
    )

    class Hold(Op):
        async def perform(self, dry: DryContext, wet: WetContext) -> None:
            text = await wet.request.take_input().require_stream_str(TEXT)
            gate.arrived += 1
            await gate.open.wait()
            await wet.request.output().write(text.encode())

    runtime = CartridgeRuntime(manifest)
    runtime.register_op(HOLD, Hold)
    return runtime


async def until(predicate: Any, seconds: float = 20) -> None:
    """Wait (polling the engine's state) until ``predicate()`` holds."""
    with anyio.fail_after(seconds):
        while not predicate():  # noqa: ASYNC110 - engine state has no event to wait on
            await anyio.sleep(0.01)


def replicas(engine: Engine, name: str) -> tuple[ReplicaStatus, ...]:
    (status,) = [s for s in engine.status() if s.name == name]
    return status.replicas


# -- in process ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_in_process_cartridge_is_served_over_memory_streams() -> None:
    gate = Gate()
    gate.open.set()
    async with Engine() as engine:
        name = engine.add_cartridge(held_runtime(gate))
        assert name == "held"
        result = await engine.call(HOLD, [(TEXT, b"hello")])
        assert result.data == b"hello"
        (status,) = engine.status()
        assert status.state == "running" and status.pid is None
        assert status.command == ("<in-process>", "held")
        (replica,) = status.replicas
        assert replica.placement_id == "in-process held/0" and replica.state == "running"


@pytest.mark.asyncio
async def test_the_interop_runtime_in_process_streams_probes_peer_calls_and_stops() -> None:
    from _bundled import load_cartridge

    interop = load_cartridge("interop")
    payload = bytes(range(256)) * (32 << 10)  # 8 MiB: many CHUNKs through the memory pipes
    async with Engine() as engine:
        name = engine.add_cartridge(interop.build_runtime(), replicas=2)
        echo = await engine.call(interop.URNS["echo"], [("media:", payload)])
        assert echo.data == payload
        peer = await engine.call(interop.URNS["peer-echo"], [("media:", b"via the engine")])
        assert peer.data == b"via the engine"
        assert await engine.probe(name, replica=0)
        await engine.stop(name)
        assert {r.state for r in replicas(engine, name)} == {"stopped"}
        again = await engine.call(interop.URNS["echo"], [("media:", b"again")])
        assert again.data == b"again"
        assert replicas(engine, name)[0].starts == 2


@pytest.mark.asyncio
async def test_each_call_goes_to_the_least_loaded_replica() -> None:
    gate = Gate()
    async with Engine() as engine, anyio.create_task_group() as tg:
        name = engine.add_cartridge("held", placement=InProcess(held_runtime(gate)), replicas=3)
        await engine.start(name)
        assert [r.state for r in replicas(engine, name)] == ["running"] * 3
        results: list[bytes] = []

        async def call(text: str) -> None:
            results.append((await engine.call(HOLD, [(TEXT, text)])).data)

        for i in range(6):
            tg.start_soon(call, f"t{i}")
        await until(lambda: gate.arrived == 6)
        assert [r.in_flight for r in replicas(engine, name)] == [2, 2, 2]
        ids = [r.placement_id for r in replicas(engine, name)]
        assert ids == [f"in-process {name}/{i}" for i in range(3)]
        assert engine.status()[0].in_flight == 6
        gate.open.set()
        await until(lambda: len(results) == 6)
    assert sorted(results) == [f"t{i}".encode() for i in range(6)]


@pytest.mark.asyncio
async def test_pool_capacities_apply_per_replica() -> None:
    gate = Gate()
    async with Engine() as engine, anyio.create_task_group() as tg:
        name = engine.add_cartridge(held_runtime(gate, capacity=1), replicas=2)
        await engine.start(name)
        done: list[bytes] = []

        async def call(text: str) -> None:
            done.append((await engine.call(HOLD, [(TEXT, text)])).data)

        for i in range(3):
            tg.start_soon(call, f"c{i}")
        await until(lambda: gate.arrived == 2 and engine.status()[0].queued == 1)
        state = replicas(engine, name)
        # One call runs on each replica; the third waits for a free slot of one of them.
        assert [r.in_flight for r in state] == [1, 1]
        assert sorted(r.queued for r in state) == [0, 1]
        assert all(s.pools[next(iter(s.pools))] for s in engine.status())
        gate.open.set()
        await until(lambda: len(done) == 3)
    assert sorted(done) == [b"c0", b"c1", b"c2"]


@pytest.mark.asyncio
async def test_a_replica_killed_fails_its_calls_and_is_respawned() -> None:
    gate = Gate()
    async with Engine() as engine, anyio.create_task_group() as tg:
        name = engine.add_cartridge(held_runtime(gate), replicas=2)
        await engine.start(name)
        errors: list[BaseException] = []
        done: list[bytes] = []

        async def call(text: str) -> None:
            try:
                done.append((await engine.call(HOLD, [(TEXT, text)])).data)
            except CallError as exc:
                errors.append(exc)

        tg.start_soon(call, "first")
        tg.start_soon(call, "second")
        await until(lambda: gate.arrived == 2)
        engine.kill(name, replica=1)
        await until(lambda: len(errors) == 1)
        (error,) = errors
        assert isinstance(error, CartridgeDied) and error.code == "CARTRIDGE_DIED"
        assert "killed by the engine" in error.message
        assert [r.state for r in replicas(engine, name)] == ["running", "dead"]
        # The next call is served (by replica 0) and starts replica 1 again meanwhile.
        gate.open.set()
        assert (await engine.call(HOLD, [(TEXT, "later")])).data == b"later"
        await until(lambda: replicas(engine, name)[1].state == "running")
        assert [r.starts for r in replicas(engine, name)] == [1, 2]
        assert engine.stats().respawns == 1
        await until(lambda: len(done) == 1)
    assert done == [b"first"]


@pytest.mark.asyncio
async def test_a_runtime_that_raises_is_a_typed_start_up_failure() -> None:
    class Broken:
        manifest = None

        async def serve(self, receive: Any, send: Any) -> int:
            raise RuntimeError("boom")

    async with Engine() as engine:
        name = engine.add_cartridge("broken", placement=InProcess(Broken()))  # type: ignore[arg-type]
        with pytest.raises(SpawnFailed) as info:
            await engine.start(name)
    assert info.value.code == "SPAWN_FAILED" and info.value.step == "hello"
    assert "serve() raised RuntimeError: boom" in info.value.message


@pytest.mark.asyncio
async def test_a_runtime_whose_setup_is_wrong_fails_at_spawn() -> None:
    manifest = Manifest.build(name="bad", version="1.0.0", description="x", caps=[])
    runtime = CartridgeRuntime(manifest)
    runtime.register_op(HOLD, Op)
    async with Engine() as engine:
        name = engine.add_cartridge(runtime)
        with pytest.raises(SpawnFailed) as info:
            await engine.call(HOLD, [(TEXT, b"x")])
    assert info.value.step == "spawn" and name == "bad"
    assert "the runtime cannot start" in info.value.message


def bad_arguments() -> Iterator[tuple[dict[str, Any], type[Exception], str]]:
    yield {"replicas": 0}, ValueError, "replicas must be a whole number of at least 1, not 0"
    yield {"replicas": "2"}, ValueError, "not '2'"
    yield {"replicas": True}, ValueError, "not True"
    yield {"placement": "subprocess"}, TypeError, "not str"


@pytest.mark.parametrize(("kwargs", "error", "words"), list(bad_arguments()))
def test_bad_arguments_are_refused_before_anything_is_added(
    kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    engine = Engine()
    with pytest.raises(error) as info:
        engine.add_cartridge(FIXTURE, **kwargs)
    assert words in str(info.value)
    assert engine.status() == []


def test_placements_refuse_targets_they_cannot_run() -> None:
    engine = Engine()
    gate = Gate()
    with pytest.raises(TypeError, match="InProcess needs a CartridgeRuntime"):
        InProcess(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a name or its runtime, not int"):
        engine.add_cartridge(42, placement=InProcess(held_runtime(gate)))
    with pytest.raises(TypeError, match="a script, a program or a command list, not int"):
        engine.add_cartridge(42, placement=Subprocess())
    assert engine.status() == []


@pytest.mark.asyncio
async def test_an_unknown_replica_is_an_engine_error() -> None:
    async with Engine() as engine:
        name = engine.add_cartridge(FIXTURE, replicas=2)
        with pytest.raises(EngineError, match="has no replica 2 \\(it has 2: 0 to 1\\)"):
            engine.kill(name, replica=2)
        with pytest.raises(EngineError, match="has no replica -1"):
            await engine.probe(name, replica=-1)


# -- subprocesses -------------------------------------------------------------------------


def pid_of(answer: bytes) -> int:
    return int(answer.decode().rsplit("@", 1)[1])


@pytest.mark.asyncio
async def test_a_per_item_map_spreads_over_replicas() -> None:
    words = [f"w{i}" for i in range(12)]
    text = "\n".join(
        [
            f'split cap:in="{TEXT}";op=split;out="{WORD}"',
            f"whoami {WHOAMI}",
            "doc -> split -> ws",
            "ws -> whoami -> out",
        ]
    )
    async with Engine() as engine:
        name = engine.add_cartridge(FIXTURE, replicas=2)
        await engine.start(name)
        pids = {r.pid for r in replicas(engine, name)}
        assert len(pids) == 2 and None not in pids
        result = await engine.run_machine(text, {"doc": " ".join(words)}, window=4)
    items = result["out"].items
    assert [item.value.decode().rsplit("@", 1)[0] for item in items] == words
    served = Counter(pid_of(item.value) for item in items)
    assert set(served) == pids, "items landed on both replicas"


@pytest.mark.asyncio
async def test_peer_calls_route_across_replicas() -> None:
    async with Engine() as engine:
        name = engine.add_cartridge(FIXTURE, replicas=2)
        await engine.start(name)
        pids = {r.pid for r in replicas(engine, name)}
        answers: list[bytes] = []

        async def relay(i: int) -> None:
            answers.append((await engine.call(RELAY, [(WORD, f"r{i}")])).data)

        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(relay, i)
    callers = {int(a.split(b">", 1)[0]) for a in answers}
    served = {pid_of(a.split(b">", 1)[1]) for a in answers}
    assert callers == pids and served == pids


@pytest.mark.asyncio
async def test_a_dead_subprocess_replica_fails_its_call_and_later_calls_work() -> None:
    async with Engine() as engine:
        name = engine.add_cartridge(FIXTURE, replicas=2, env={"REPLICA_PAUSE": "30"})
        await engine.start(name)
        first, second = replicas(engine, name)
        outcome: list[Any] = []

        async def call(word: str) -> None:
            try:
                outcome.append(await engine.call(WHOAMI, [(WORD, word)]))
            except CallError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "a")
            tg.start_soon(call, "b")
            await until(lambda: [r.in_flight for r in replicas(engine, name)] == [1, 1])
            engine.kill(name)
            await until(lambda: len(outcome) == 2)
        assert all(isinstance(o, CartridgeDied) for o in outcome)
        assert {"killed by signal 9 (SIGKILL)" in o.message for o in outcome} == {True}
        assert all(r.state == "dead" for r in replicas(engine, name))
    async with Engine() as engine:
        name = engine.add_cartridge(FIXTURE, replicas=2, env={"REPLICA_PAUSE": "0"})
        await engine.start(name)
        engine.kill(name, replica=0)
        await until(lambda: replicas(engine, name)[0].state == "dead")
        answer = await engine.call(WHOAMI, [(WORD, "x")])
        assert pid_of(answer.data) == replicas(engine, name)[1].pid
        await until(lambda: replicas(engine, name)[0].state == "running")
        assert replicas(engine, name)[0].pid not in (first.pid, second.pid, None)


def test_replicas_in_process_and_as_subprocesses_on_trio() -> None:
    gate = Gate()

    async def main() -> None:
        async with Engine() as engine, anyio.create_task_group() as tg:
            held = engine.add_cartridge(held_runtime(gate), replicas=2)
            spread = engine.add_cartridge(FIXTURE, replicas=2, env={"REPLICA_PAUSE": "0"})
            await engine.start(held)
            await engine.start(spread)
            for i in range(2):
                tg.start_soon(engine.call_bytes, HOLD, [(TEXT, f"h{i}")])
            await until(lambda: gate.arrived == 2)
            assert [r.in_flight for r in replicas(engine, held)] == [1, 1]
            gate.open.set()
            answer = await engine.call(WHOAMI, [(WORD, "t")])
            assert pid_of(answer.data) == replicas(engine, spread)[0].pid

    anyio.run(main, backend="trio")


@pytest.mark.asyncio
async def test_the_engine_default_placement_applies_to_cartridges_added_without_one() -> None:
    gate = Gate()
    gate.open.set()
    async with Engine(placement=InProcess(held_runtime(gate))) as engine:
        name = engine.add_cartridge("embedded")
        assert (await engine.call(HOLD, [(TEXT, "x")])).data == b"x"
        (status,) = engine.status()
    assert name == "embedded" and status.command == ("<in-process>", "held")
    assert status.replicas[0].placement_id == "in-process embedded/0"
