"""``cartridge cache gc`` after a ``cartridge run`` killed with SIGKILL: the partial blobs the
run was writing are removed (MCH-30); while the run lives, they are left alone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_cli_runs import KIT, TEXT, Home, cap

from cartridge_runtime.engine._machines._cache import CacheStore

#: Far more than the run writes before it is killed: it is still writing when gc runs.
MAKE = 64 << 30
SEEN = 4 << 20


def _partial(tmp: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    if tmp.is_dir():
        for path in tmp.iterdir():
            if not path.name.startswith("owner."):
                with contextlib.suppress(OSError):
                    found[path.name] = path.stat().st_size
    return found


def test_cache_gc_removes_what_a_killed_run_was_writing(tmp_path: Path) -> None:
    home = Home(tmp_path)
    machine = home.machine(
        f"m {cap('make', TEXT)}\ns1 {cap('stage-1')}\ndoc -> m -> a\na -> s1 -> out\n"
    )
    tmp = home.home / "steps" / "tmp"
    run = subprocess.Popen(
        [sys.executable, "-m", "cartridge_runtime.cli", "run", str(machine), "-c", str(KIT),
         "-i", f"doc={MAKE}", "--output", f"out={os.devnull}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=home.env, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not any(size > SEEN for size in _partial(tmp).values()):
            assert run.poll() is None, run.stderr.read() if run.stderr else ""
            assert time.monotonic() < deadline, "the run wrote no blob"
            time.sleep(0.02)
        writing = set(_partial(tmp))
        store = CacheStore(home.home / "steps")
        store.gc(temp_age=0)  # the run is alive: its files stay
        assert writing <= set(_partial(tmp))
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # the run and its cartridge, as a kill -9 would
        run.wait(timeout=30)
    assert _partial(tmp)
    gc = home.cartridge("cache", "gc")
    assert gc.returncode == 0, gc.stderr
    assert "freed 0 bytes" not in gc.stderr
    assert _partial(tmp) == {}
    assert sorted(p.name for p in tmp.iterdir()) == []
