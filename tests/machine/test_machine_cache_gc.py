"""``gc`` and the files a writer leaves in the store's ``tmp/`` (MCH-30): a writer that died
(SIGKILL) leaves partial files that ``gc`` removes; a live writer's files, in this process or
another, are never removed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from cartridge_runtime.engine._machines._cache import CacheStore

DATA = "media:data;runs"

WRITER = textwrap.dedent(
    """
    import sys, time
    from cartridge_runtime.engine._machines._cache import CacheStore

    store = CacheStore(sys.argv[1])
    writer = store.writer("cap:x", "other")
    writer.started("s", None, "media:data;runs", False, None)
    writer.piece("s", b"p" * 300_000, b"p" * 300_000)
    writer.digest("s")  # the writer thread caught up: the partial blob is on disk
    print("ready", flush=True)
    time.sleep(120)
    """
)


def partial(store: Path) -> list[str]:
    return sorted(p.name for p in (store / "tmp").iterdir() if not p.name.startswith("owner."))


def test_gc_removes_a_killed_writers_partial_blob_and_keeps_a_live_ones(tmp_path: Path) -> None:
    root = tmp_path / "store"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    other = subprocess.Popen(
        [sys.executable, str(script), str(root)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert other.stdout is not None and other.stdout.readline() == "ready\n"
        store = CacheStore(root)
        mine = store.writer("cap:x", "mine")
        mine.started("s", None, DATA, False, None)
        mine.piece("s", b"m" * 1000, b"m" * 1000)
        mine.digest("s")
        both = partial(root)
        assert len(both) == 2 and all(".blob." in name for name in both)
        assert store.gc(temp_age=0) == (0, 0)  # two live writers: nothing removed
        assert partial(root) == both
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait(timeout=30)
    removed, freed = store.gc(temp_age=3600)
    assert (removed, freed) == (0, 300_000)  # the dead writer's blob, however fresh
    assert len(partial(root)) == 1 and len(list((root / "tmp").glob("owner.*.lock"))) == 1
    assert mine.commit("k" * 64)  # the live writer goes on as if nothing happened
    assert store.lookup("k" * 64) is not None and partial(root) == []


def test_a_file_that_names_no_writer_goes_by_age(tmp_path: Path) -> None:
    store = CacheStore(tmp_path / "store")
    old = tmp_path / "store" / "tmp" / "blob.abc"  # an older layout's name
    old.write_bytes(b"x" * 10)
    assert store.gc() == (0, 0)
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert store.gc() == (0, 10)
    assert not old.exists()
