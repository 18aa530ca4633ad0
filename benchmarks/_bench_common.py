"""Shared pieces of the benchmark: pair names, cartridge paths, manifests, /proc readers.

Used by both ``benchmarks/bench.py`` (the orchestrator) and ``benchmarks/_bench_worker.py``
(one measurement per process).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
INTEROP = ROOT / "cartridges" / "interop.py"
CAPDAG_CARTRIDGE = BENCHMARKS / "_bench_capdag_cartridge.py"

MIB = 1024 * 1024
#: Block size used everywhere data is streamed (the protocol's default max_chunk).
BLOCK = 256 * 1024
#: Small-call request body (``double`` input); its answer is ``42``.
SMALL_INPUT = b'{"value": 21}'
SMALL_ANSWER = b"42"
#: Marker before the worker's one JSON result line on stdout.
RESULT_MARK = "BENCH-RESULT "


@attrs.frozen(kw_only=True)
class PairSpec:
    """One measured pair: who drives (host side) and which cartridge."""

    key: str
    title: str
    driver: str  # "cat", "capdag", "engine", "floor", "cli"
    cartridge: Path | None


PAIRS: dict[str, PairSpec] = {
    "a": PairSpec(key="a", title="Python ↔ cat (physical)", driver="cat", cartridge=None),
    "b": PairSpec(
        key="b", title="capdag host → capdag cart.", driver="capdag", cartridge=CAPDAG_CARTRIDGE
    ),
    "c": PairSpec(key="c", title="our engine → our interop", driver="engine", cartridge=INTEROP),
    "d": PairSpec(
        key="d", title="our engine → capdag cart.", driver="engine", cartridge=CAPDAG_CARTRIDGE
    ),
    "e": PairSpec(key="e", title="capdag host → our interop", driver="capdag", cartridge=INTEROP),
    "f": PairSpec(key="f", title="checksum floor (no protocol)", driver="floor", cartridge=None),
    "g": PairSpec(
        key="g", title="`cartridge call` CLI → our interop", driver="cli", cartridge=INTEROP
    ),
}
#: Pairs that measure only some metrics (the others are not defined for them).
PAIR_METRICS: dict[str, tuple[str, ...]] = {"f": ("echo",), "g": ("echo",)}


def venv_env() -> dict[str, str]:
    """The environment with this interpreter's bin first on PATH.

    capdag's host launches ``.py`` cartridges as ``python3 <file>`` through PATH, so the
    interpreter that has capdag and this project installed must come first."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def read_manifest(cartridge: Path, timeout: float = 30.0) -> dict[str, Any]:
    """The cartridge's manifest, read from its HELLO (works for any runtime, no CLI needed)."""
    import json

    from cartridge_runtime.protocol import (
        DEFAULT_LIMITS,
        FrameDecoder,
        accept_cartridge_hello,
        encode_frame,
        frames,
    )

    proc = subprocess.Popen(
        [sys.executable, str(cartridge)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=venv_env(),
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(encode_frame(frames.hello(DEFAULT_LIMITS)))
        proc.stdin.flush()
        decoder = FrameDecoder(DEFAULT_LIMITS.max_frame)
        while True:
            data = os.read(proc.stdout.fileno(), 65536)
            decoder.feed(data)
            frame = decoder.next_frame()
            if frame is not None:
                break
            if not data:
                raise RuntimeError(f"{cartridge} closed stdout before its HELLO")
        hello = accept_cartridge_hello(frame, DEFAULT_LIMITS)
        return dict(json.loads(hello.manifest))
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def find_cap(manifest: dict[str, Any], alias: str) -> tuple[str, str]:
    """(cap URN, main-input media URN) of the cap whose aliases include ``alias``."""
    for group in manifest["cap_groups"]:
        for cap in group["caps"]:
            if alias in cap.get("aliases", ()):
                for arg in cap.get("args", ()):
                    for source in arg.get("sources", ()):
                        if "stdin" in source:
                            return str(cap["urn"]), str(source["stdin"])
                raise LookupError(f"cap {alias!r} has no stdin argument")
    raise LookupError(f"no cap with alias {alias!r} in manifest {manifest.get('name')!r}")


def vm_hwm_mib(pid: int) -> float | None:
    """Peak resident set (VmHWM) of ``pid`` in MiB, or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def child_pids(pid: int | None = None) -> list[int]:
    """Direct children of ``pid`` (default: this process), from /proc."""
    parent = os.getpid() if pid is None else pid
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{parent}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{parent}/task/{task}/children", encoding="ascii") as f:
                found.extend(int(x) for x in f.read().split())
        except OSError:
            continue
    return sorted(set(found))


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds used so far by ``pid`` (all its threads)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    # After the ")" of the command name: field 3 is index 0, so utime (14) is 11, stime 12.
    return (int(fields[11]) + int(fields[12])) / _TICK


class CpuMeter:
    """CPU seconds spent by this (driver) process and by the cartridge during a section.

    CPU time barely depends on what else the machine runs, so it complements the
    wall-clock figures on a busy machine."""

    def __init__(self, cartridge_pids: list[int]) -> None:
        self.pids = cartridge_pids
        self.driver0 = cpu_seconds(os.getpid())
        self.cart0 = [cpu_seconds(pid) for pid in cartridge_pids]

    def stop(self) -> dict[str, float | None]:
        driver1 = cpu_seconds(os.getpid())
        cart1 = [cpu_seconds(pid) for pid in self.pids]
        cart = [
            b - a for a, b in zip(self.cart0, cart1, strict=True) if a is not None and b is not None
        ]
        return {
            "cpu_driver_s": (driver1 - self.driver0)
            if driver1 is not None and self.driver0 is not None
            else None,
            "cpu_cartridge_s": sum(cart) if cart else None,
        }
