"""Early cut-off in the step cache (MCH-29): a cached step fed by a step that is not cached
holds its input to the end, looks its key up, and hits when the input came out as before.

Calls are counted where they land: runskit appends each call's op to a log file.
"""

from __future__ import annotations

import hashlib
import io
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import cbor2
import pytest
from test_machine_cache import CHAIN, TEXT, Kit, cap, partial_files, run

from cartridge_runtime.engine import CborValue, Item, MachineRunError
from cartridge_runtime.engine._machines import _spool
from cartridge_runtime.engine._machines._cache import CacheStore
from cartridge_runtime.engine._machines._spool import Spool

MADE = 6_000_000  # more than a spool keeps in memory: the held input goes to a file


def made(size: int) -> bytes:
    block = hashlib.sha256(b"runskit").digest() * ((1 << 20) // 32)
    return (block * (size // len(block) + 1))[:size]


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    return Kit(tmp_path)


@pytest.mark.asyncio
async def test_a_large_input_from_an_uncached_step_is_held_on_disk_and_hits(kit: Kit) -> None:
    text = (
        f"m {cap('make', TEXT)}\ns1 {cap('stage-1')}\ndoc -> m{{cache=false}} -> a\na -> s1 -> out"
    )
    first = await run(kit, text, {"doc": str(MADE)})
    assert first["out"].data == made(MADE)
    assert first.steps["s1"].cache_misses == 1
    kit.reset()
    second = await run(kit, text, {"doc": str(MADE)})
    assert kit.calls() == Counter({"make": 1})
    assert (second.steps["s1"].cache_hits, second.steps["s1"].calls) == (1, 0)
    assert second["out"].data == made(MADE)
    assert partial_files(kit.cache) == []
    kit.reset()
    other = await run(kit, text, {"doc": str(MADE - 1)})  # other bytes: a miss, called
    assert kit.calls() == Counter({"make": 1, "stage-1": 1})
    assert other["out"].data == made(MADE - 1)


@pytest.mark.asyncio
async def test_an_input_given_as_an_iterable_is_looked_up_once_it_ended(kit: Kit) -> None:
    async def pieces() -> AsyncIterator[bytes]:
        for n in range(5):
            yield bytes([65 + n]) * 1000

    first = await run(kit, CHAIN, {"doc": pieces()})
    kit.reset()
    second = await run(kit, CHAIN, {"doc": pieces()})
    assert kit.calls() == Counter()
    assert (
        first["out"].data
        == second["out"].data
        == b"".join(bytes([65 + n]) * 1000 for n in range(5))
    )


@pytest.mark.asyncio
async def test_a_held_input_is_removed_when_the_call_fails(kit: Kit) -> None:
    text = CHAIN.replace("a -> s2 -> b", "a -> s2{cache=false} -> b")
    doc = b"q" * (_spool.SPOOL_MEMORY + 1000)
    kit.fail.write_text("on")
    with pytest.raises(MachineRunError) as failed:
        await run(kit, text, {"doc": doc})
    assert failed.value.step == "fin"
    assert partial_files(kit.cache) == []
    kit.fail.unlink()
    kit.reset()
    result = await run(kit, text, {"doc": doc})
    assert kit.calls() == Counter({"stage-2": 1, "final": 1})
    assert result["out"].data == doc
    kit.reset()
    await run(kit, text, {"doc": doc})
    assert kit.calls() == Counter({"stage-2": 1})


def _temps(tmp_path: Path) -> list[str]:
    """The store's temporary files, its owner lock aside."""
    return [p.name for p in (tmp_path / "store" / "tmp").iterdir() if ".spool." in p.name]


async def _aiter(pieces: list[object]) -> AsyncIterator[object]:
    for piece in pieces:
        yield piece


@pytest.mark.asyncio
@pytest.mark.parametrize("memory", [1 << 30, 8])
async def test_a_spool_gives_back_every_kind_of_piece_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory: int
) -> None:
    monkeypatch.setattr(_spool, "SPOOL_MEMORY", memory)
    scalar = [b"ab", memoryview(b"cd"), bytearray(b"e" * 300), "text", 7, CborValue(b"raw")]
    spool = Spool(CacheStore(tmp_path / "store").new_temp, False)
    await spool.fill(_aiter(scalar))
    assert (spool.path is not None) == (memory == 8)
    back = [piece async for piece in spool.pieces()]
    assert back == [b"ab", b"cd", b"e" * 300, "text", 7, CborValue(b"raw")]
    assert _temps(tmp_path) == []
    items = [Item(value=b"one", meta={"index": 0}), Item(value="two"), b"three"]
    spool = Spool(CacheStore(tmp_path / "store").new_temp, True)
    await spool.fill(_aiter(items))
    back = [p if isinstance(p, Item) else Item(value=p) async for p in spool.pieces()]
    assert [(i.value, dict(i.meta or {})) for i in back] == [
        (b"one", {"index": 0}),
        ("two", {}),
        (b"three", {}),
    ]
    assert _temps(tmp_path) == []


@pytest.mark.asyncio
async def test_a_spool_file_is_cbor_and_discard_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_spool, "SPOOL_MEMORY", 1)
    spool = Spool(CacheStore(tmp_path / "store").new_temp, False)
    await spool.fill(_aiter([b"x" * 70_000, b"y"]))
    assert spool.path is not None
    decoder = cbor2.CBORDecoder(io.BytesIO(spool.path.read_bytes()))
    assert [decoder.decode(), decoder.decode()] == [b"x" * 70_000, b"y"]
    spool.discard()
    assert _temps(tmp_path) == []
