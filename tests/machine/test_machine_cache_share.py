"""A step whose output repeats a run's input file, or a blob a hit replayed, stores no copy of
its own: the entries share one blob, copied from the file (never linked to it) or the replayed
one itself. The sharing keeps every guarantee of the cache: a shared blob outlives the entries
that go, a truncated one is a miss for every entry naming it, and a file that changed while
the run read it leaves nothing stored under a name that does not describe it.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path

import pytest
from test_machine_cache import CHAIN, Kit, run

from cartridge_runtime.engine import MachineRunError
from cartridge_runtime.engine._machines import _cache_write
from cartridge_runtime.engine._machines._cache import CacheStore
from cartridge_runtime.engine._machines._cache_follow import Leader, file_stamp
from cartridge_runtime.engine._machines._cache_key import digest_of

DATA = "media:data;runs"
PIECE = 256 * 1024


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    return Kit(tmp_path)


def count_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes each stored stream wrote of its own, one count per piece written."""
    written: list[int] = []
    write = _cache_write._OpenOutput.write

    def counting(
        self: _cache_write._OpenOutput, piece: object, value: object, meta: object
    ) -> None:
        before = self.file.tell()
        write(self, piece, value, meta)
        written.append(self.file.tell() - before)

    monkeypatch.setattr(_cache_write._OpenOutput, "write", counting)
    return written


def blobs(store: CacheStore) -> list[Path]:
    return sorted((store.root / "blobs").glob("*/*"))


def source_of(path: Path) -> Leader:
    data = path.read_bytes()
    return Leader.complete(path, len(data), digest_of([data], False), file_stamp(path))


def follow_file(store: CacheStore, doc: Path, data: bytes, key: str) -> bool:
    """One call whose only output is ``data``, following ``doc``; whether it was stored."""
    writer = store.writer("cap:echo", "e")
    writer.follows = [source_of(doc)]
    writer.started("s", None, DATA, False, None)
    for pos in range(0, len(data), PIECE):
        writer.piece("s", data[pos : pos + PIECE], data[pos : pos + PIECE])
    writer.digest("s")
    return writer.commit(key)


def test_an_output_repeating_its_input_file_is_copied_never_linked(tmp_path: Path) -> None:
    store = CacheStore(tmp_path / "c")
    doc = tmp_path / "doc.bin"
    data = bytes(range(256)) * 3000 + b"end"
    doc.write_bytes(data)
    assert follow_file(store, doc, data, "a" * 64)
    entry = store.lookup("a" * 64)
    assert entry is not None
    (out,) = entry.outputs
    assert out.blob == hashlib.sha256(data).hexdigest() and out.size == len(data)
    blob = store.blob_path(out.blob)
    assert blob.read_bytes() == data
    assert blob.stat().st_ino != doc.stat().st_ino and blob.stat().st_nlink == 1
    doc.write_bytes(b"changed in place")  # the user's file changes: the blob does not
    assert blob.read_bytes() == data


def test_an_output_that_differs_from_its_input_file_stores_its_own_bytes(tmp_path: Path) -> None:
    store = CacheStore(tmp_path / "c")
    doc = tmp_path / "doc.bin"
    data = bytes(range(256)) * 3000
    doc.write_bytes(data)
    own = data[:500_000] + b"X" + data[500_001:]
    assert follow_file(store, doc, own, "b" * 64)
    entry = store.lookup("b" * 64)
    assert entry is not None
    assert store.blob_path(entry.outputs[0].blob).read_bytes() == own
    assert entry.outputs[0].digest == digest_of([own], False)


@pytest.mark.parametrize("when", ["before the end", "at the difference"])
def test_an_input_file_that_changed_leaves_nothing_stored(tmp_path: Path, when: str) -> None:
    store = CacheStore(tmp_path / "c")
    doc = tmp_path / "doc.bin"
    data = bytes(range(256)) * 3000
    doc.write_bytes(data)
    writer = store.writer("cap:echo", "e")
    writer.follows = [source_of(doc)]
    writer.started("s", None, DATA, False, None)
    writer.piece("s", data[:PIECE], data[:PIECE])
    os.utime(doc, ns=(1, 1))  # the file's stamp no longer matches what was hashed
    if when == "at the difference":
        writer.piece("s", b"other bytes", b"other bytes")
    else:
        writer.piece("s", data[PIECE:], data[PIECE:])
    writer.digest("s")
    assert not writer.commit("c" * 64)
    assert store.lookup("c" * 64) is None and blobs(store) == []


@pytest.mark.asyncio
async def test_a_chain_over_a_file_shares_one_blob_that_outlives_pruned_entries(
    kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "doc.bin"
    doc.write_bytes(bytes(range(256)) * 20_000)
    written = count_writes(monkeypatch)
    first = await run(kit, CHAIN, {"doc": doc})
    assert sum(written) == 0  # each step repeated the file: none wrote a byte of its own
    assert first["out"].data == doc.read_bytes()
    store = CacheStore(kit.cache)
    entries = store.entries()
    assert len(entries) == 3 and len({e.outputs[0].blob for e in entries}) == 1
    (blob,) = blobs(store)
    assert blob.stat().st_ino != doc.stat().st_ino
    # Within the size of the one blob every entry fits: a shared blob is counted once.
    assert store.gc(doc.stat().st_size) == (0, 0) and len(store.entries()) == 3
    by_step = {e.step: e for e in entries}
    by_step["s1"].path.unlink()  # one entry goes: the blob stays for the others
    store.gc()
    assert blobs(store) == [blob]
    assert store.lookup(by_step["s1"].key) is None
    assert store.lookup(by_step["s2"].key) is not None
    assert store.lookup(by_step["fin"].key) is not None
    kit.reset()
    again = await run(kit, CHAIN, {"doc": doc})
    assert kit.calls()["stage-1"] == 1
    assert again["out"].data == doc.read_bytes()
    assert blobs(store) == [blob]


@pytest.mark.asyncio
async def test_a_truncated_shared_blob_is_a_miss_for_every_entry(kit: Kit, tmp_path: Path) -> None:
    doc = tmp_path / "doc.bin"
    doc.write_bytes(b"shared" * 50_000)
    await run(kit, CHAIN, {"doc": doc})
    store = CacheStore(kit.cache)
    (blob,) = blobs(store)
    with blob.open("r+b") as f:
        f.truncate(100)
    assert all(store.lookup(e.key) is None for e in store.entries())
    kit.reset()
    result = await run(kit, CHAIN, {"doc": doc})
    assert kit.calls()["stage-1"] == 1
    assert result["out"].data == doc.read_bytes()
    assert blob.read_bytes() == doc.read_bytes()


@pytest.mark.asyncio
async def test_a_step_after_a_hit_repeating_the_replayed_blob_stores_no_copy(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"resume" * 60_000
    kit.fail.write_text("on")  # the last step fails: the first two are stored
    with pytest.raises(MachineRunError):
        await run(kit, CHAIN, {"doc": data})
    kit.fail.unlink()
    store = CacheStore(kit.cache)
    (blob,) = blobs(store)
    inode = blob.stat().st_ino
    kit.reset()
    written = count_writes(monkeypatch)
    result = await run(kit, CHAIN, {"doc": data})
    assert kit.calls() == Counter({"final": 1}) and result["out"].data == data
    assert sum(written) == 0  # the step after the hits repeated the replayed blob
    assert blobs(store) == [blob] and blob.stat().st_ino == inode  # not written again
    assert {e.outputs[0].blob for e in store.entries()} == {blob.name}
    assert not [p for p in (kit.cache / "tmp").iterdir() if ".blob." in p.name]
