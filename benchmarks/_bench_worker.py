#!/usr/bin/env python3
"""One benchmark measurement in a fresh process: ``_bench_worker.py PAIR METRIC [options]``.

Run by ``benchmarks/bench.py``, one process per (pair, metric), so that the peak RSS
(VmHWM) read at the end belongs to this measurement alone and imports of one
side never leak into another. Prints one line ``BENCH-RESULT {json}`` on stdout.

Pairs (see ``_bench_common.PAIRS``): ``a`` Python through ``cat``; ``b``/``e`` the
capdag host (threads, ``_bench_capdag_host``) with capdag's / our cartridge;
``c``/``d`` our engine (asyncio) with our / capdag's cartridge; ``f`` the checksum floor
(echo only): pipes and FNV-1a 64 as a Bifaci echo needs them, without the protocol.

Metrics:

* ``echo``: ``--bytes`` through the echo cap, fed as 256 KiB blocks and counted as it
  comes back (nothing held); result ``mb_s`` (10^6 bytes per second).
* ``seq``: ``--calls`` small ``double`` calls one at a time; ``calls_s``.
* ``par``: ``--calls`` small calls with ``--inflight`` in flight; ``calls_s``.
* ``cold``: ``--reps`` times: start a fresh host/engine, spawn the cartridge, first
  ``double`` result; ``ms`` is the median.
* ``rss``: an echo of ``--bytes``, then VmHWM of this (driver) process and of the
  cartridge process, in MiB.

Every measurement is preceded by one warm-up call (so the cartridge is spawned and
hand-shaken before timing), except ``cold``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import (
    BLOCK,
    PAIRS,
    RESULT_MARK,
    SMALL_ANSWER,
    SMALL_INPUT,
    CpuMeter,
    find_cap,
    read_manifest,
    venv_env,
    vm_hwm_mib,
)

Result = dict[str, Any]


def _blocks(total: int) -> Iterator[bytes]:
    """``total`` bytes as 256 KiB blocks (the same block object reused: no allocation)."""
    block = bytes(range(256)) * (BLOCK // 256)
    full, rest = divmod(total, BLOCK)
    for _ in range(full):
        yield block
    if rest:
        yield block[:rest]


def _check_answer(answer: bytes) -> None:
    if answer.strip() != SMALL_ANSWER:
        raise RuntimeError(f"double answered {answer!r}, expected {SMALL_ANSWER!r}")


# ---------------------------------------------------------------------------------------
# (a) physical reference: Python writing through cat and reading it back
# ---------------------------------------------------------------------------------------


class _Cat:
    """``cat`` with unbuffered pipes; a round trip of ``n`` bytes is a write then a read."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            ["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.win = self.proc.stdin.fileno()
        self.rout = self.proc.stdout.fileno()

    def read_exactly(self, n: int) -> bytes:
        parts: list[bytes] = []
        while n > 0:
            data = os.read(self.rout, n)
            if not data:
                raise RuntimeError("cat closed early")
            parts.append(data)
            n -= len(data)
        return b"".join(parts)

    def echo(self, total: int) -> int:
        """Writer thread pushes ``total`` bytes; this thread reads them back into one buffer."""

        def writer() -> None:
            for block in _blocks(total):
                view = memoryview(block)
                while view:
                    view = view[os.write(self.win, view) :]

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        buf = bytearray(BLOCK)
        got = 0
        while got < total:
            n = self.proc.stdout.readinto(buf)  # type: ignore[union-attr]
            if not n:
                raise RuntimeError("cat closed early")
            got += n
        thread.join()
        return got

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=10)


def run_cat(metric: str, args: argparse.Namespace) -> Result:
    if metric == "cold":
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            cat = _Cat()
            os.write(cat.win, SMALL_INPUT)
            cat.read_exactly(len(SMALL_INPUT))
            times.append(time.perf_counter() - t0)
            cat.close()
        return {"ms": statistics.median(times) * 1000, "samples_ms": [t * 1000 for t in times]}
    cat = _Cat()
    try:
        os.write(cat.win, SMALL_INPUT)
        cat.read_exactly(len(SMALL_INPUT))
        meter = CpuMeter([cat.proc.pid])
        return _timed_cat(cat, metric, args) | meter.stop()
    finally:
        cat.close()


def _timed_cat(cat: _Cat, metric: str, args: argparse.Namespace) -> Result:
    if metric in ("echo", "rss"):
        t0 = time.perf_counter()
        got = cat.echo(args.bytes)
        dt = time.perf_counter() - t0
        result: Result = {"bytes": got, "seconds": dt, "mb_s": got / dt / 1e6}
        if metric == "rss":
            result["driver_mib"] = vm_hwm_mib(os.getpid())
            result["cartridge_mib"] = vm_hwm_mib(cat.proc.pid)
        return result
    if metric == "seq":
        t0 = time.perf_counter()
        for _ in range(args.calls):
            os.write(cat.win, SMALL_INPUT)
            cat.read_exactly(len(SMALL_INPUT))
        dt = time.perf_counter() - t0
        return {"calls": args.calls, "seconds": dt, "calls_s": args.calls / dt}
    if metric == "par":
        # ``inflight`` messages written before any is read back.
        batch = SMALL_INPUT * args.inflight
        rounds = max(1, args.calls // args.inflight)
        t0 = time.perf_counter()
        for _ in range(rounds):
            os.write(cat.win, batch)
            cat.read_exactly(len(batch))
        dt = time.perf_counter() - t0
        calls = rounds * args.inflight
        return {"calls": calls, "seconds": dt, "calls_s": calls / dt}
    raise ValueError(metric)


# ---------------------------------------------------------------------------------------
# (f) checksum floor: a bare echo that hashes as the protocol requires
# ---------------------------------------------------------------------------------------

FLOOR_CHILD = Path(__file__).resolve().parent / "_bench_floor.py"


def run_floor(metric: str, args: argparse.Namespace) -> Result:
    """Echo through ``_bench_floor.py`` with the checksum work of a Bifaci echo and nothing
    else: a writer thread hashes each 256 KiB block before writing it (the sender's
    checksum), the child hashes it before writing it back (the cartridge's verification),
    and this thread hashes it after reading it (the engine's verification). Pipes are
    enlarged as the engine enlarges them. The two threads here hash in parallel, so the
    figure is what an implementation with no per-frame cost at all would reach."""
    from fnv_c.ext._fnv import ffi, lib

    from cartridge_runtime._plumbing import grow_pipe

    if metric != "echo":
        raise ValueError(f"the checksum floor measures echo only, not {metric}")
    proc = subprocess.Popen(
        [sys.executable, str(FLOOR_CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    )
    assert proc.stdin is not None and proc.stdout is not None
    win, rout = proc.stdin.fileno(), proc.stdout.fileno()
    grow_pipe(win)
    grow_pipe(rout)
    total = args.bytes

    def writer() -> None:
        for block in _blocks(total):
            lib.fnv1a_64(block, len(block))
            view = memoryview(block)
            while view:
                view = view[os.write(win, view) :]

    buf = bytearray(BLOCK)
    view = memoryview(buf)
    source = ffi.from_buffer(buf)

    def read_block(want: int) -> int:
        have = 0
        while have < want:
            n = os.readv(rout, [view[have:want]])
            if n == 0:
                raise RuntimeError("the floor echo closed early")
            have += n
        return have

    try:
        # Warm-up: one block there and back, so the child's start-up is not timed.
        os.write(win, bytes(BLOCK))
        read_block(BLOCK)
        meter = CpuMeter([proc.pid])
        t0 = time.perf_counter()
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        got = 0
        while got < total:
            have = read_block(min(BLOCK, total - got))
            lib.fnv1a_64(source, have)
            got += have
        thread.join()
        dt = time.perf_counter() - t0
        return {"bytes": got, "seconds": dt, "mb_s": got / dt / 1e6} | meter.stop()
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


# ---------------------------------------------------------------------------------------
# (b), (e): capdag's CartridgeHost
# ---------------------------------------------------------------------------------------


def run_capdag(cartridge: Path, metric: str, args: argparse.Namespace) -> Result:
    from _bench_capdag_host import CapdagHostDriver

    os.environ["PATH"] = venv_env()["PATH"]
    manifest = read_manifest(cartridge)
    echo_cap, echo_media = find_cap(manifest, "echo")
    double_cap, double_media = find_cap(manifest, "double")

    def small(driver: CapdagHostDriver) -> None:
        _check_answer(driver.call_bytes(double_cap, double_media, SMALL_INPUT))

    if metric == "cold":
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            driver = CapdagHostDriver(str(cartridge), manifest)
            small(driver)
            times.append(time.perf_counter() - t0)
            driver.close()
        return {"ms": statistics.median(times) * 1000, "samples_ms": [t * 1000 for t in times]}

    driver = CapdagHostDriver(str(cartridge), manifest)
    try:
        small(driver)
        pid = driver.cartridge_pid()
        meter = CpuMeter([pid] if pid else [])
        return _timed_capdag(driver, small, metric, args, echo_cap, echo_media) | meter.stop()
    finally:
        driver.close()


def _timed_capdag(
    driver: Any,
    small: Callable[[Any], None],
    metric: str,
    args: argparse.Namespace,
    echo_cap: str,
    echo_media: str,
) -> Result:
    if metric in ("echo", "rss"):
        t0 = time.perf_counter()
        got = driver.call_stream(echo_cap, echo_media, _blocks(args.bytes))
        dt = time.perf_counter() - t0
        if got != args.bytes:
            raise RuntimeError(f"echo returned {got} bytes of {args.bytes}")
        result: Result = {"bytes": got, "seconds": dt, "mb_s": got / dt / 1e6}
        if metric == "rss":
            pid = driver.cartridge_pid()
            result["driver_mib"] = vm_hwm_mib(os.getpid())
            result["cartridge_mib"] = vm_hwm_mib(pid) if pid else None
        return result
    if metric == "seq":
        t0 = time.perf_counter()
        for _ in range(args.calls):
            small(driver)
        dt = time.perf_counter() - t0
        return {"calls": args.calls, "seconds": dt, "calls_s": args.calls / dt}
    if metric == "par":
        per = max(1, args.calls // args.inflight)
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                for _ in range(per):
                    small(driver)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.inflight)]
        t0 = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        dt = time.perf_counter() - t0
        if errors:
            raise RuntimeError(f"parallel call failed: {errors[0]!r}")
        calls = per * args.inflight
        return {"calls": calls, "seconds": dt, "calls_s": calls / dt}
    raise ValueError(metric)


# ---------------------------------------------------------------------------------------
# (c), (d): our engine
# ---------------------------------------------------------------------------------------


def run_engine(cartridge: Path, metric: str, args: argparse.Namespace) -> Result:
    import asyncio

    from _bench_engine import measure

    manifest = read_manifest(cartridge)
    caps = {
        "echo": find_cap(manifest, "echo"),
        "double": find_cap(manifest, "double"),
    }
    return asyncio.run(measure(cartridge, caps, metric, args))


# ---------------------------------------------------------------------------------------
# (g): the `cartridge call` command line, as a user runs it
# ---------------------------------------------------------------------------------------


def _cli_call(cartridge: Path, source: Path) -> float:
    """Seconds for ``cartridge call CARTRIDGE echo < SOURCE > /dev/null``."""
    with source.open("rb") as stdin, open(os.devnull, "wb") as stdout:
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "cartridge_runtime.cli", "call", str(cartridge), "echo"],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            check=True,
            timeout=600,
        )
        return time.perf_counter() - t0


def run_cli(cartridge: Path, metric: str, args: argparse.Namespace) -> Result:
    """Echo through the CLI: a file of ``--bytes`` on stdin, stdout to /dev/null. The time of
    the same command on a 1-byte file (interpreter, imports, cartridge start) is taken away,
    so the figure is the data path's, comparable with the engine's echo (c)."""
    import tempfile

    if metric != "echo":
        raise ValueError(metric)
    with tempfile.TemporaryDirectory() as folder:
        big, tiny = Path(folder) / "big.bin", Path(folder) / "tiny.bin"
        with big.open("wb") as f:
            for block in _blocks(args.bytes):
                f.write(block)
        tiny.write_bytes(b"x")
        starts, totals = [], []
        for _ in range(max(1, args.reps)):
            starts.append(_cli_call(cartridge, tiny))
            totals.append(_cli_call(cartridge, big))
    start, total = statistics.median(starts), statistics.median(totals)
    data = max(total - start, 1e-9)
    return {
        "bytes": args.bytes,
        "seconds": data,
        "mb_s": args.bytes / data / 1e6,
        "start_s": start,
        "whole_mb_s": args.bytes / total / 1e6,
    }


RUNNERS: dict[str, Callable[[Path, str, argparse.Namespace], Result]] = {
    "capdag": run_capdag,
    "engine": run_engine,
    "cli": run_cli,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pair", choices=sorted(PAIRS))
    parser.add_argument("metric", choices=["echo", "seq", "par", "cold", "rss"])
    parser.add_argument("--bytes", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    spec = PAIRS[args.pair]
    if spec.driver == "cat":
        result = run_cat(args.metric, args)
    elif spec.driver == "floor":
        result = run_floor(args.metric, args)
    else:
        assert spec.cartridge is not None
        result = RUNNERS[spec.driver](spec.cartridge, args.metric, args)
    result.update(pair=args.pair, metric=args.metric)
    if args.metric != "rss":
        result.setdefault("driver_mib", vm_hwm_mib(os.getpid()))
    sys.stdout.write(RESULT_MARK + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
