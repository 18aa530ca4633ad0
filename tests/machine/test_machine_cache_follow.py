"""A stored stream that repeats the stream its input came from is not written twice (the
follower reads the leader's bytes back instead): equal streams share one blob, a difference
anywhere (a changed byte, a longer or shorter stream, a leader that failed) stores exactly the
follower's own bytes under their own digest.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cartridge_runtime.engine._machines import _cache_follow
from cartridge_runtime.engine._machines._cache import CacheStore, EntryWriter
from cartridge_runtime.engine._machines._cache_key import digest_of

DATA = "media:data;runs"
PIECE = 256 * 1024


def pieces(data: bytes) -> list[bytes]:
    return [data[i : i + PIECE] for i in range(0, len(data), PIECE)] or [b""]


def feed(writer: EntryWriter, data: bytes, *, end: bool = True) -> None:
    writer.started("s", None, DATA, False, None)
    for piece in pieces(data):
        writer.piece("s", piece, piece)
    if end:
        writer.digest("s")


def blob_of(store: CacheStore, key: str) -> bytes:
    entry = store.lookup(key)
    assert entry is not None
    (out,) = entry.outputs
    content = store.blob_path(out.blob).read_bytes()
    assert out.digest == digest_of([content], False) and out.size == len(content)
    assert out.blob == hashlib.sha256(content).hexdigest()
    return content


def leader_and_follower(store: CacheStore, data: bytes) -> tuple[EntryWriter, EntryWriter]:
    leader = store.writer("cap:a", "a")
    feed(leader, data)
    follower = store.writer("cap:b", "b")
    lead = leader.lead("s")
    assert lead is not None
    follower.follows = [lead]
    return leader, follower


def blobs(store: CacheStore) -> list[Path]:
    return sorted((store.root / "blobs").glob("*/*"))


def test_a_follower_equal_to_its_leader_shares_its_blob_and_writes_nothing(tmp_path: Path) -> None:
    store = CacheStore(tmp_path / "c")
    data = bytes(range(256)) * 4096 + b"tail"
    leader, follower = leader_and_follower(store, data)
    feed(follower, data, end=False)
    follower.digest("s")
    temps = [p for p in (store.root / "tmp").iterdir() if ".blob." in p.name]
    assert sorted(p.stat().st_size for p in temps) == [0, len(data)]  # the follower wrote none
    assert follower.commit("f" * 64) and leader.commit("e" * 64)
    assert blob_of(store, "f" * 64) == blob_of(store, "e" * 64) == data
    assert len(blobs(store)) == 1
    assert [p for p in (store.root / "tmp").iterdir() if ".blob." in p.name] == []


def test_a_chain_of_followers_shares_one_blob(tmp_path: Path) -> None:
    store = CacheStore(tmp_path / "c")
    data = b"chain" * 200_000
    first, second = leader_and_follower(store, data)
    feed(second, data)
    third = store.writer("cap:c", "c")
    lead = second.lead("s")
    assert lead is not None
    third.follows = [lead]
    feed(third, data)
    assert first.commit("1" * 64) and second.commit("2" * 64) and third.commit("3" * 64)
    assert blob_of(store, "1" * 64) == blob_of(store, "2" * 64) == blob_of(store, "3" * 64)
    assert len(blobs(store)) == 1


@pytest.mark.parametrize(
    "change",
    ["middle byte", "last byte", "longer", "shorter", "empty", "first piece"],
)
def test_a_follower_that_differs_stores_its_own_bytes(tmp_path: Path, change: str) -> None:
    store = CacheStore(tmp_path / "c")
    data = bytes(range(256)) * 5000
    own = {
        "middle byte": data[:600_000] + b"X" + data[600_001:],
        "last byte": data[:-1] + b"X",
        "longer": data + b"more",
        "shorter": data[:-7],
        "empty": b"",
        "first piece": b"Z" + data[1:],
    }[change]
    leader, follower = leader_and_follower(store, data)
    feed(follower, own)
    assert follower.commit("f" * 64) and leader.commit("e" * 64)
    assert blob_of(store, "f" * 64) == own
    assert blob_of(store, "e" * 64) == data


def test_a_follower_whose_leader_was_discarded_keeps_what_it_matched(tmp_path: Path) -> None:
    store = CacheStore(tmp_path / "c")
    data = b"gone" * 300_000
    leader, follower = leader_and_follower(store, data)
    feed(follower, data)
    leader.discard()  # the leader's call failed: its file is removed
    assert follower.commit("f" * 64)
    assert blob_of(store, "f" * 64) == data


def test_a_follower_never_waits_for_bytes_its_leader_was_not_handed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cache_follow, "FOLLOW_WAIT", 60.0)
    store = CacheStore(tmp_path / "c")
    leader = store.writer("cap:a", "a")
    leader.started("s", None, DATA, False, None)
    leader.piece("s", b"abc", b"abc")
    follower = store.writer("cap:b", "b")
    lead = leader.lead("s")
    assert lead is not None
    follower.follows = [lead]
    feed(follower, b"abcdef")  # past what the leader holds: it stops following at once
    assert follower.commit("f" * 64)
    assert blob_of(store, "f" * 64) == b"abcdef"
    leader.piece("s", b"def", b"def")
    leader.digest("s")
    assert leader.commit("e" * 64)
    assert blob_of(store, "e" * 64) == b"abcdef"


@pytest.mark.asyncio
async def test_a_chain_of_echo_steps_stores_one_blob(tmp_path: Path) -> None:
    from test_machine_cache import CHAIN, Kit, run

    kit = Kit(tmp_path)
    doc = tmp_path / "doc.bin"
    doc.write_bytes(bytes(range(256)) * 20_000)
    first = await run(kit, CHAIN, {"doc": doc})
    assert first["out"].data == doc.read_bytes()
    store = CacheStore(kit.cache)
    entries = store.entries()
    assert len(entries) == 3 and len({e.outputs[0].blob for e in entries}) == 1
    assert len(blobs(store)) == 1 and store.size() == doc.stat().st_size
    kit.reset()
    second = await run(kit, CHAIN, {"doc": doc})
    assert kit.calls() == {} and second["out"].data == doc.read_bytes()
