"""The manifest cache: a warm discovery starts no process, a changed file starts once, writes
are atomic, and a damaged or absent cache is only a miss (DSC-9 to DSC-11)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _discovery_helpers import BROKEN, SILENT, SpawnLog, write_cartridge, write_version

from cartridge_runtime.discovery import RefusalKind, default_cache_dir
from cartridge_runtime.discovery._digests import MEMO_FILE, FileDigests
from cartridge_runtime.engine import EngineConfig, discover


def _cache_files(cache_dir: Path) -> list[Path]:
    """Every manifest entry in the cache folder (the digest memo left out)."""
    return sorted(p for p in cache_dir.rglob("*") if p.is_file() and p.name != MEMO_FILE)


def _memo(cache_dir: Path) -> dict[str, object]:
    """The digest memo, once no temporary file is left beside it."""
    assert not list(cache_dir.rglob("*.tmp"))
    memo: dict[str, object] = json.loads((cache_dir / MEMO_FILE).read_text())
    return memo


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    write_cartridge(root / "alpha.py", "alpha", alias="shout")
    write_cartridge(root / "beta.py", "beta", alias="hum")
    (root / "broken.py").write_text(BROKEN)
    write_version(root / "inst" / "gamma" / "1.0.0", "gamma", "1.0.0", alias="gamma-op")
    return root


@pytest.mark.asyncio
async def test_a_warm_discovery_starts_nothing_and_a_change_starts_once(
    tmp_path: Path, spawn_log: SpawnLog, cache_dir: Path
) -> None:
    root = _root(tmp_path)
    cold = await discover(root, cache=cache_dir)
    assert (cold.spawns, cold.cache_hits) == (4, 0)
    assert sorted(spawn_log.names()) == ["alpha", "beta", "gamma"]
    assert [r.kind for r in cold.refused] == [RefusalKind.HANDSHAKE_FAILED]

    spawn_log.clear()
    warm = await discover(root, cache=cache_dir)
    assert (warm.spawns, warm.cache_hits) == (0, 4)  # the broken one is remembered too
    assert spawn_log.names() == []
    assert all(f.from_cache for f in warm.found)
    assert [f.manifest.to_json() for f in warm.found] == [f.manifest.to_json() for f in cold.found]
    assert [f.digest for f in warm.found] == [f.digest for f in cold.found]
    assert warm.refused == cold.refused

    write_cartridge(root / "alpha.py", "alpha", alias="yell")  # same size class, new content
    changed = await discover(root, cache=cache_dir)
    assert (changed.spawns, changed.cache_hits) == (1, 3)
    assert spawn_log.names() == ["alpha"]
    alpha = next(f for f in changed.found if f.name == "alpha")
    assert "yell" in alpha.aliases and not alpha.from_cache

    spawn_log.clear()
    (root / "inst" / "gamma" / "1.0.0" / "data.bin").write_bytes(b"a new support file")
    supported = await discover(root, cache=cache_dir)
    assert (supported.spawns, spawn_log.names()) == (1, ["gamma"])


@pytest.mark.asyncio
async def test_cache_entries_are_whole_files_with_no_temporary_left(
    tmp_path: Path, spawn_log: SpawnLog, cache_dir: Path
) -> None:
    root = tmp_path / "root"
    write_cartridge(root / "alpha.py", "alpha")
    result = await discover(root, cache=cache_dir)
    files = _cache_files(cache_dir)
    assert [p.name for p in files] == [f"{result.found[0].digest}.json"]
    entry = json.loads(files[0].read_text())
    assert entry["key"] == result.found[0].digest
    assert entry["manifest"]["name"] == "alpha"
    assert result.cache_dir == cache_dir and result.cache_errors == ()
    memo = _memo(cache_dir)
    assert list(memo) == [str(root / "alpha.py")]


@pytest.mark.asyncio
async def test_a_damaged_entry_is_a_miss_and_is_rewritten(
    tmp_path: Path, spawn_log: SpawnLog, cache_dir: Path
) -> None:
    root = tmp_path / "root"
    write_cartridge(root / "alpha.py", "alpha")
    first = await discover(root, cache=cache_dir)
    (entry,) = _cache_files(cache_dir)
    for damage in ("{truncated", json.dumps({"format": 1, "key": "another"}), "[]"):
        entry.write_text(damage)
        again = await discover(root, cache=cache_dir)
        assert (again.spawns, again.cache_hits) == (1, 0)
        assert again.found[0].manifest.to_json() == first.found[0].manifest.to_json()
    assert (await discover(root, cache=cache_dir)).spawns == 0


@pytest.mark.asyncio
async def test_no_cache_and_refresh_start_every_cartridge(
    tmp_path: Path, spawn_log: SpawnLog, cache_dir: Path
) -> None:
    root = tmp_path / "root"
    write_cartridge(root / "alpha.py", "alpha")
    uncached = await discover(root, cache=False)
    assert (uncached.spawns, uncached.cache_dir) == (1, None)
    assert _cache_files(cache_dir) == []
    await discover(root, cache=cache_dir)
    refreshed = await discover(root, cache=cache_dir, refresh=True)
    assert (refreshed.spawns, refreshed.cache_hits) == (1, 0)
    assert spawn_log.names() == ["alpha"] * 3


@pytest.mark.asyncio
async def test_an_unwritable_cache_is_reported_not_fatal(
    tmp_path: Path, spawn_log: SpawnLog
) -> None:
    root = tmp_path / "root"
    write_cartridge(root / "alpha.py", "alpha")
    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("x")
    result = await discover(root, cache=blocker)
    assert [f.name for f in result.found] == ["alpha"]
    assert result.cache_errors  # the entry and the digest memo
    assert all(str(blocker) in line for line in result.cache_errors)


def test_the_default_cache_lives_in_the_cartridge_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARTRIDGE_HOME", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine" / "manifests"
    monkeypatch.delenv("CARTRIDGE_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "cartridge" / "manifests"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "cartridge" / "manifests"


@pytest.mark.asyncio
async def test_a_start_that_ran_out_of_time_is_not_remembered(
    tmp_path: Path, cache_dir: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "silent.py").write_text(SILENT)
    config = EngineConfig(step_timeout=0.5, heartbeat_interval=None, shutdown_grace=0.1)
    for _ in range(2):
        result = await discover(root, cache=cache_dir, config=config)
        assert (result.spawns, result.cache_hits) == (1, 0)
        (refused,) = result.refused
        assert refused.kind is RefusalKind.HANDSHAKE_FAILED
        assert "0.5 s" in refused.reason
    assert _cache_files(cache_dir) == []


def test_an_unchanged_file_is_not_read_again_and_a_rewritten_one_is(tmp_path: Path) -> None:
    big = tmp_path / "entry.bin"
    big.write_bytes(b"a" * 3_000_000)
    first = FileDigests(tmp_path / "cache")
    digest = first.sha256(big)
    assert first.hashed == 1 and first.save() is None
    again = FileDigests(tmp_path / "cache")
    assert (again.sha256(big), again.hashed) == (digest, 0)
    before = big.stat()
    big.write_bytes(b"b" * 3_000_000)  # same size, and the same modification time put back
    os.utime(big, ns=(before.st_atime_ns, before.st_mtime_ns))
    changed = FileDigests(tmp_path / "cache")
    assert changed.sha256(big) != digest and changed.hashed == 1
    assert FileDigests(None).sha256(big) == changed.sha256(big)
