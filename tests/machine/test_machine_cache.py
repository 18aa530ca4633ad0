"""The step cache of machine runs: hits replay without a call, misses are stored whole or not at
all, keys change with every input byte, cartridge file and manifest, non-deterministic caps
and ``cache=false`` steps are always called, two runs share one store.

Calls are counted where they land: runskit appends each call's op to a log file.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from cartridge_runtime.engine import Engine, MachineOutputData, MachineRunError
from cartridge_runtime.engine._machines._cache import CacheStore
from cartridge_runtime.engine._machines._cache_key import digest_of, step_key
from cartridge_runtime.engine._machines._cache_step import cartridge_identity
from cartridge_runtime.engine._machines._events import StepFinished

KIT = Path(__file__).with_name("runskit.py")
DATA = "media:data;runs"
TEXT = "media:enc=utf-8"
PART = "media:enc=utf-8;part"


def cap(op: str, src: str = DATA, dst: str = DATA) -> str:
    return f'cap:in="{src}";op={op};out="{dst}"'


CHAIN = "\n".join(
    [
        f"s1 {cap('stage-1')}",
        f"s2 {cap('stage-2')}",
        f"fin {cap('final')}",
        "doc -> s1 -> a",
        "a -> s2 -> b",
        "b -> fin -> out",
    ]
)


class Kit:
    """A runskit copy in a folder of its own, its call log, and its fail switch."""

    def __init__(self, tmp: Path) -> None:
        self.folder = tmp / "kit"
        self.folder.mkdir(exist_ok=True)
        self.script = self.folder / "runskit.py"
        shutil.copy(KIT, self.script)
        self.log = tmp / "calls.log"
        self.log.touch()
        self.fail = tmp / "fail"
        self.cache = tmp / "cache"

    def engine(self) -> Engine:
        engine = Engine()
        env = {**os.environ, "RUNSKIT_CALL_LOG": str(self.log), "RUNSKIT_FAIL": str(self.fail)}
        engine.add_cartridge(self.script, env=env)
        return engine

    def calls(self) -> Counter[str]:
        return Counter(self.log.read_text().split())

    def reset(self) -> None:
        self.log.write_text("")


def partial_files(cache: Path) -> list[str]:
    """The files being written in a store's ``tmp/`` (the writers' lock files aside)."""
    return [p.name for p in (cache / "tmp").iterdir() if not p.name.startswith("owner.")]


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    return Kit(tmp_path)


async def run(kit: Kit, text: str, inputs: dict[str, Any], **kw: Any) -> Any:
    async with kit.engine() as engine:
        return await engine.run_machine(text, inputs, cache=kit.cache, **kw)


# -- resume --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_resumed_run_calls_only_the_step_that_failed(kit: Kit) -> None:
    kit.fail.write_text("on")
    with pytest.raises(MachineRunError) as failed:
        await run(kit, CHAIN, {"doc": b"x" * 100_000})
    assert failed.value.step == "fin"
    assert kit.calls() == Counter({"stage-1": 1, "stage-2": 1, "final": 1})
    kit.fail.unlink()
    kit.reset()
    result = await run(kit, CHAIN, {"doc": b"x" * 100_000})
    assert kit.calls() == Counter({"final": 1})
    assert result["out"].data == b"x" * 100_000
    steps = result.steps
    assert (steps["s1"].cache_hits, steps["s1"].calls) == (1, 0)
    assert (steps["s2"].cache_hits, steps["s2"].calls) == (1, 0)
    assert (steps["fin"].cache_misses, steps["fin"].calls) == (1, 1)
    kit.reset()
    again = await run(kit, CHAIN, {"doc": b"x" * 100_000})
    assert kit.calls() == Counter()
    assert again["out"].data == b"x" * 100_000
    assert again.steps["fin"].cache_hits == 1


@pytest.mark.asyncio
async def test_a_hit_streams_its_events_and_says_so(kit: Kit) -> None:
    await run(kit, CHAIN, {"doc": b"abc" * 1000})
    async with kit.engine() as engine:
        machine = await engine.machine(CHAIN)
        async with engine.stream_machine(machine, {"doc": b"abc" * 1000}, cache=kit.cache) as r:
            events = [e async for e in r]
    finished = {e.step: e.cache for e in events if isinstance(e, StepFinished)}
    assert finished == {"s1": "hit", "s2": "hit", "fin": "hit"}
    data = b"".join(e.value for e in events if isinstance(e, MachineOutputData))
    assert data == b"abc" * 1000


# -- what the key is made of -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_changed_input_byte_misses(kit: Kit) -> None:
    await run(kit, CHAIN, {"doc": b"a" * 5000})
    kit.reset()
    await run(kit, CHAIN, {"doc": b"a" * 4999 + b"b"})
    assert kit.calls() == Counter({"stage-1": 1, "stage-2": 1, "final": 1})


@pytest.mark.asyncio
async def test_a_file_input_hits_like_the_same_bytes(kit: Kit, tmp_path: Path) -> None:
    await run(kit, CHAIN, {"doc": b"same bytes"})
    path = tmp_path / "doc.bin"
    path.write_bytes(b"same bytes")
    kit.reset()
    result = await run(kit, CHAIN, {"doc": path})
    assert kit.calls() == Counter()
    assert result["out"].data == b"same bytes"


@pytest.mark.asyncio
async def test_a_changed_byte_of_an_input_file_misses(kit: Kit, tmp_path: Path) -> None:
    path = tmp_path / "doc.bin"
    path.write_bytes(b"0123456789")
    await run(kit, CHAIN, {"doc": path})
    kit.reset()
    await run(kit, CHAIN, {"doc": path})  # known by its path, size and times: not hashed again
    assert kit.calls() == Counter()
    path.write_bytes(b"0123456780")  # same size, one byte changed
    result = await run(kit, CHAIN, {"doc": path})
    assert kit.calls() == Counter({"stage-1": 1, "stage-2": 1, "final": 1})
    assert result["out"].data == b"0123456780"


@pytest.mark.asyncio
async def test_a_changed_cartridge_file_misses(kit: Kit) -> None:
    await run(kit, CHAIN, {"doc": b"q"})
    kit.script.write_text(kit.script.read_text() + "\n# a change that changes no behaviour\n")
    kit.reset()
    await run(kit, CHAIN, {"doc": b"q"})
    assert kit.calls() == Counter({"stage-1": 1, "stage-2": 1, "final": 1})


@pytest.mark.asyncio
async def test_a_changed_manifest_misses(kit: Kit) -> None:
    await run(kit, CHAIN, {"doc": b"q"})
    # The identity reads the script's bytes and the manifest: prove the manifest alone counts.
    source = KIT.read_text()
    assert 'version="1.0.0"' in source
    first = cartridge_identity(("prog",), b'{"version":"1.0.0"}')
    assert first != cartridge_identity(("prog",), b'{"version":"1.0.1"}')
    kit.script.write_text(source.replace('version="1.0.0"', 'version="1.0.1"'))
    kit.reset()
    await run(kit, CHAIN, {"doc": b"q"})
    assert kit.calls()["stage-1"] == 1


def test_the_key_covers_cap_cartridge_policy_and_each_input_in_order() -> None:
    a = digest_of([b"one"], False)
    b = digest_of([b"two"], False)
    base = step_key("cap:x", "id", "", [("media:a", a), ("media:b", b)])
    assert base == step_key("cap:x", "id", "", [("media:a", a), ("media:b", b)])
    others = {
        step_key("cap:y", "id", "", [("media:a", a), ("media:b", b)]),
        step_key("cap:x", "id2", "", [("media:a", a), ("media:b", b)]),
        step_key("cap:x", "id", "{retry=1}", [("media:a", a), ("media:b", b)]),
        step_key("cap:x", "id", "", [("media:b", b), ("media:a", a)]),
        step_key("cap:x", "id", "", [("media:a", b), ("media:b", a)]),
    }
    assert base not in others and len(others) == 5


def test_a_digest_does_not_depend_on_the_pieces_but_on_their_kind() -> None:
    whole = digest_of([b"abcdef"], False)
    assert whole == digest_of([b"ab", b"cd", memoryview(b"ef")], False)
    assert whole != digest_of(["abcdef"], False)  # text pieces are values, not bytes
    assert whole != digest_of([b"abcdef"], True)  # one item is not a scalar
    assert digest_of([b"ab", "cd"], False) != digest_of([b"a", "bcd"], False)


# -- never cached --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_non_deterministic_cap_is_called_every_time(kit: Kit) -> None:
    text = f"r {cap('random')}\ns1 {cap('stage-1')}\ndoc -> r -> a\na -> s1 -> out"
    first = await run(kit, text, {"doc": b"seed"})
    second = await run(kit, text, {"doc": b"seed"})
    assert kit.calls() == Counter({"random": 2, "stage-1": 2})
    assert first["out"].data != second["out"].data
    assert second.steps["r"].cache_hits == second.steps["r"].cache_misses == 0


@pytest.mark.asyncio
async def test_a_step_with_cache_false_is_called_every_time(kit: Kit) -> None:
    text = CHAIN.replace("a -> s2 -> b", "a -> s2{cache=false} -> b")
    await run(kit, text, {"doc": b"z"})
    kit.reset()
    result = await run(kit, text, {"doc": b"z"})
    # The step after it holds its input to the end, looks its key up and hits: the uncached
    # step gave the same bytes (early cut-off, MCH-29).
    assert kit.calls() == Counter({"stage-2": 1})
    assert result.steps["s1"].cache_hits == 1
    assert (result.steps["s2"].calls, result.steps["s2"].cache_misses) == (1, 0)
    assert (result.steps["fin"].cache_hits, result.steps["fin"].calls) == (1, 0)
    assert result["out"].data == b"z"
    last = CHAIN.replace("b -> fin -> out", "b -> fin{cache=false} -> out")
    await run(kit, last, {"doc": b"z"})
    kit.reset()
    await run(kit, last, {"doc": b"z"})
    assert kit.calls() == Counter({"final": 1})


# -- outputs as they were ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_hit_replays_items_with_meta_and_leaves_an_optional_output_absent(
    kit: Kit,
) -> None:
    text = f"p {cap('parts', TEXT, PART)}\ndoc -> p -> (parts=ws, note=n)"
    cold = await run(kit, text, {"doc": "one two three"})
    kit.reset()
    warm = await run(kit, text, {"doc": "one two three"})
    assert kit.calls() == Counter()
    assert [(i.value, dict(i.meta or {})) for i in warm["ws"].items] == [
        (b"one", {"index": 0}),
        (b"two", {"index": 1}),
        (b"three", {"index": 2}),
    ]
    assert warm["ws"].items == cold["ws"].items
    assert cold.absent == warm.absent == ("n",)
    kit.reset()
    loud = await run(kit, text, {"doc": "one two!"})
    again = await run(kit, text, {"doc": "one two!"})
    assert kit.calls() == Counter({"parts": 1})
    assert loud["n"].data == again["n"].data == b"loud" and again.absent == ()


@pytest.mark.asyncio
async def test_per_item_steps_hit_item_by_item(kit: Kit) -> None:
    text = f"p {cap('parts', TEXT, PART)}\nsh {cap('shout', PART, PART)}\ndoc -> p -> ws\nws -> sh -> loud"
    await run(kit, text, {"doc": "a b"})
    kit.reset()
    warm = await run(kit, text, {"doc": "a b c"})
    assert kit.calls() == Counter({"parts": 1, "shout": 1})  # only the new word
    assert [i.value for i in warm["loud"].items] == [b"A", b"B", b"C"]
    assert (warm.steps["sh"].cache_hits, warm.steps["sh"].cache_misses) == (2, 1)


# -- the store ---------------------------------------------------------------------------------


CRASH = """
import os, sys, anyio
from cartridge_runtime.engine import Engine
from cartridge_runtime.engine._machines import _cache

def dying_place(self, data, final):
    # Half the entry reaches its temporary file, then the process dies before the rename.
    f, temp = self.new_temp("entry")
    f.write(data[: len(data) // 2])
    f.flush()
    os._exit(9)

_cache.CacheStore._place = dying_place

async def main():
    async with Engine() as engine:
        engine.add_cartridge(sys.argv[1], env={**os.environ})
        await engine.run_machine(sys.argv[2], {"doc": b"crash" * 1000}, cache=sys.argv[3])

anyio.run(main)
"""


@pytest.mark.asyncio
async def test_a_crash_while_storing_leaves_no_usable_entry(kit: Kit, tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    process = await anyio.run_process(
        [sys.executable, str(script), str(kit.script), CHAIN, str(kit.cache)],
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert process.returncode == 9, process.stderr.decode()
    assert list((kit.cache / "entries").glob("*/*.json")) == []
    assert partial_files(kit.cache)  # the half-written file is left in tmp/ only
    kit.reset()
    result = await run(kit, CHAIN, {"doc": b"crash" * 1000})
    assert kit.calls() == Counter({"stage-1": 1, "stage-2": 1, "final": 1})
    assert result["out"].data == b"crash" * 1000


@pytest.mark.asyncio
async def test_a_truncated_blob_or_entry_is_a_miss(kit: Kit) -> None:
    await run(kit, CHAIN, {"doc": b"t" * 10_000})
    blobs = sorted((kit.cache / "blobs").glob("*/*"))
    assert blobs
    for blob in blobs:
        with blob.open("r+b") as f:
            f.truncate(5)
    kit.reset()
    result = await run(kit, CHAIN, {"doc": b"t" * 10_000})
    # The first step misses and stores its blob again; the ones after it may then hit it.
    assert kit.calls()["stage-1"] == 1
    assert result["out"].data == b"t" * 10_000
    for entry in (kit.cache / "entries").glob("*/*.json"):
        entry.write_text(entry.read_text()[:40])
    kit.reset()
    await run(kit, CHAIN, {"doc": b"t" * 10_000})
    assert kit.calls() == Counter({"stage-1": 1, "stage-2": 1, "final": 1})


@pytest.mark.asyncio
async def test_a_failed_call_stores_nothing(kit: Kit) -> None:
    kit.fail.write_text("on")
    with pytest.raises(MachineRunError):
        await run(kit, CHAIN, {"doc": b"f"})
    entries = [json.loads(p.read_text()) for p in (kit.cache / "entries").glob("*/*.json")]
    assert sorted(e["step"] for e in entries) == ["s1", "s2"]
    assert partial_files(kit.cache) == []


@pytest.mark.asyncio
async def test_two_concurrent_runs_share_one_store(kit: Kit) -> None:
    results: list[Any] = []

    async def one(doc: bytes) -> None:
        results.append(await run(kit, CHAIN, {"doc": doc}))

    async with anyio.create_task_group() as tg:
        for doc in (b"shared" * 1000, b"shared" * 1000, b"other" * 1000):
            tg.start_soon(one, doc)
    assert sorted(r["out"].data for r in results) == sorted(
        [b"shared" * 1000, b"shared" * 1000, b"other" * 1000]
    )
    kit.reset()
    for doc in (b"shared" * 1000, b"other" * 1000):
        assert (await run(kit, CHAIN, {"doc": doc}))["out"].data == doc
    assert kit.calls() == Counter()
    store = CacheStore(kit.cache)
    assert len(store.entries()) == 6
    assert partial_files(kit.cache) == []


def test_gc_keeps_the_most_recent_entries_within_the_size(tmp_path: Path) -> None:
    import os as _os
    import time

    store = CacheStore(tmp_path / "c")
    for n in range(3):
        writer = store.writer("cap:x", f"s{n}")
        writer.started("s", None, DATA, False, None)
        writer.piece("s", bytes([n]) * 1000, bytes([n]) * 1000)
        assert writer.commit(f"{n:02d}" + "k" * 62)
        entry = next((tmp_path / "c" / "entries").glob(f"{n:02d}/*.json"))
        _os.utime(entry, (time.time() - 100 + n, time.time() - 100 + n))
    assert store.size() == 3000
    removed, freed = store.gc(2000)
    assert (removed, freed) == (1, 1000)
    assert [e.step for e in store.entries()] == ["s2", "s1"]
    store.clear()
    assert store.entries() == [] and store.size() == 0
