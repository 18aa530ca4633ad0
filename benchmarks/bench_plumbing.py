#!/usr/bin/env python3
"""The IO plumbing per small frame: each shell's own writer and reader next to the shared one.

Each measured setup writes small responses (STREAM_START, a 16-byte CHUNK, STREAM_END, END,
a new request id each) into a pipe and reads them back from its other end, in one process on
asyncio, the way the shell does it:

- ``cartridge``: writer queues each frame outside a hold and writes the batch with
  ``flush_now`` (the handler's path); the reader dispatches from the loop's reader callback,
  pausing while the writer's queue is full. Old: ``runtime._writer.FrameWriter`` with
  ``runtime._stdin.LoopReceiveStream.pump`` and ``runtime._reader.InputReader``. New:
  ``FrameOutbox(encode_at=FLUSH, bound=256)`` with ``FramePump(room=outbox)``.
- ``engine``: the frames are queued under a hold and written on its release; the reader
  dispatches every block under a hold. Old: ``engine._outbox.Outbox`` with
  ``engine._conn.Connection._on_block`` over ``_fdio.read_blocks``. New:
  ``FrameOutbox(encode_at=QUEUE)`` with ``FramePump(hold=outbox)`` over ``FdReader.pump``.

Since the switch-over the "old" modules are thin faces over the shared plumbing, so "old"
then measures what those faces add; the figures from before it are in the commit that added
this script and in ``benchmarks/README.md``.

The dispatch of each END queues the next response at once, so a round is one write, one
reader callback and four dispatches, with no task switch: what is measured is the plumbing.

Two figures per setup: CPU time per frame (best of ``--repeat`` runs, old and new
interleaved), and, with ``--instructions``, instructions per frame counted by valgrind's
cachegrind (two runs of ``--rounds`` and twice as many: the difference cancels start-up), a
figure no host load moves. The ratio new/old is printed for each.

Usage::

    .venv/bin/python benchmarks/bench_plumbing.py [--rounds 20000] [--repeat 5]
        [--instructions]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cartridge_runtime._plumbing import (
    EncodeAt,
    FdReader,
    FdReceiveStream,
    FdSendStream,
    FdWriter,
    FrameOutbox,
    FramePump,
    make_pipe,
    sink_for,
)
from cartridge_runtime.protocol import Frame, FrameDecoder, FrameType, Limits, MessageId, frames

FRAMES_PER_ROUND = 4
SETUPS = ("cartridge-old", "cartridge-new", "engine-old", "engine-new")


def responses(rounds: int) -> list[list[Frame]]:
    """The frames to send, made before anything is measured."""
    out = []
    for i in range(rounds):
        rid = MessageId(i + 1)
        out.append(
            [
                frames.stream_start(rid, "s", "media:json"),
                frames.chunk(rid, "s", 0, b"0123456789abcdef"),
                frames.stream_end(rid, "s", 1),
                frames.end(rid),
            ]
        )
    return out


class Rounds:
    """Sends the next response whenever the last one's END is dispatched."""

    def __init__(self, rounds: int, send: Callable[[list[Frame]], None], w: int) -> None:
        self.todo = responses(rounds)
        self.next = 0
        self.send = send
        self.w = w
        self.dispatched = 0

    def start(self) -> None:
        self.send(self.todo[0])
        self.next = 1

    def dispatch(self, frame: Frame) -> None:
        self.dispatched += 1
        if frame.frame_type is FrameType.END:
            if self.next < len(self.todo):
                self.send(self.todo[self.next])
                self.next += 1
            else:
                os.close(self.w)  # the reader sees its end


async def cartridge_old(rounds: int) -> int:
    from cartridge_runtime.runtime._reader import InputReader
    from cartridge_runtime.runtime._stdin import LoopReceiveStream
    from cartridge_runtime.runtime._writer import FrameWriter

    r, w = make_pipe()
    receive, send = LoopReceiveStream(r), FdSendStream(w)
    limits = Limits()
    writer = FrameWriter(send, lambda: limits.max_frame)

    def respond(batch: list[Frame]) -> None:
        for f in batch:
            writer.try_send(f)
        writer.flush_now()

    run = Rounds(rounds, respond, w)

    class Reader(InputReader):
        def __init__(self) -> None:
            self.decoder = FrameDecoder()
            self.receive_stream = receive
            self.writer = writer

        def _dispatch(self, frame: Frame) -> None:
            run.dispatch(frame)

    reader = Reader()
    task = asyncio.create_task(writer.run())
    await asyncio.sleep(0)
    run.start()
    await receive.pump(reader._on_block, reader._read_size, reader._until_drained)
    writer.close()
    await task
    receive.restore()
    os.close(r)
    return run.dispatched


async def cartridge_new(rounds: int) -> int:
    r, w = make_pipe()
    receive, send = FdReceiveStream(r), FdSendStream(w)
    limits = Limits()
    outbox = FrameOutbox(
        sink_for(send), lambda: limits.max_frame, encode_at=EncodeAt.FLUSH, bound=256
    )

    def respond(batch: list[Frame]) -> None:
        for f in batch:
            outbox.try_send(f)
        outbox.flush_now()

    run = Rounds(rounds, respond, w)
    pump = FramePump(FrameDecoder(), run.dispatch, room=outbox)
    task = asyncio.create_task(outbox.run())
    await asyncio.sleep(0)
    run.start()
    await pump.run(receive)
    outbox.close()
    await task
    receive.restore()
    os.close(r)
    return run.dispatched


async def engine_old(rounds: int) -> int:
    from cartridge_runtime import _fdio
    from cartridge_runtime.engine._config import EngineConfig
    from cartridge_runtime.engine._conn import Connection
    from cartridge_runtime.engine._proc import Counters

    r, w = make_pipe()

    class Conn(Connection):
        """Just the connection's reading and writing halves."""

        def __init__(self) -> None:
            self.state = "ready"
            self.counters = Counters()
            self.limits = Limits()
            self.config = EngineConfig()
            self._init_outbox()
            self._stdin = _fdio.FdWriter(w)
            self._decoder = FrameDecoder()
            self._stray = None

        def _dispatch(self, frame: Frame) -> None:
            run.dispatch(frame)

    conn = Conn()

    def respond(batch: list[Frame]) -> None:
        conn.hold()
        for f in batch:
            conn.send(f)
        conn.release()

    run = Rounds(rounds, respond, w)
    task = asyncio.create_task(conn._writer())
    await asyncio.sleep(0)
    run.start()
    size = conn.config.read_size
    reader = _fdio.FdReader(r)
    await _fdio.read_blocks(reader, size, conn._on_block, conn._read_size, bytearray(size))
    task.cancel()
    reader.close()
    return run.dispatched


async def engine_new(rounds: int) -> int:
    from cartridge_runtime.engine._proc import Counters

    r, w = make_pipe()
    limits = Limits()
    outbox = FrameOutbox(FdWriter(w), lambda: limits.max_frame, counts=Counters())

    def respond(batch: list[Frame]) -> None:
        outbox.hold()
        for f in batch:
            outbox.push(f)
        outbox.release()

    run = Rounds(rounds, respond, w)
    pump = FramePump(FrameDecoder(), run.dispatch, hold=outbox, read_size=1 << 20)
    task = asyncio.create_task(outbox.run())
    await asyncio.sleep(0)
    run.start()
    reader = FdReader(r)
    await pump.run(reader)
    task.cancel()
    reader.close()
    return run.dispatched


RUNNERS = {
    "cartridge-old": cartridge_old,
    "cartridge-new": cartridge_new,
    "engine-old": engine_old,
    "engine-new": engine_new,
}


def run_setup(setup: str, rounds: int) -> float:
    """CPU seconds per frame of one run (checks that every frame arrived)."""
    start = time.process_time()
    got = asyncio.run(RUNNERS[setup](rounds))
    elapsed = time.process_time() - start
    if got != rounds * FRAMES_PER_ROUND:
        raise SystemExit(f"{setup}: {got} frames dispatched, {rounds * FRAMES_PER_ROUND} sent")
    return elapsed / got


def count_instructions(setup: str, rounds: int) -> int:
    """Instructions of one driver run under cachegrind."""
    with tempfile.TemporaryDirectory(prefix="bench-plumbing-") as out:
        path = Path(out) / "cg.out"
        env = dict(os.environ, PYTHONHASHSEED="0")
        subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                "--branch-sim=no",
                f"--cachegrind-out-file={path}",
                "-q",
                sys.executable,
                __file__,
                "--driver",
                setup,
                "--rounds",
                str(rounds),
            ],
            check=True,
            env=env,
            capture_output=True,
        )
        for line in path.read_text().splitlines():
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise SystemExit("cachegrind wrote no summary")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20000, help="responses per run")
    parser.add_argument(
        "--repeat", type=int, default=5, help="timed runs per setup (0: none, count only)"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions (valgrind)"
    )
    parser.add_argument("--driver", choices=SETUPS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.driver:
        run_setup(args.driver, args.rounds)
        return 0
    best = {s: float("inf") for s in SETUPS}
    for _ in range(args.repeat):
        for setup in SETUPS:
            best[setup] = min(best[setup], run_setup(setup, args.rounds))
    if args.repeat:
        print(f"CPU time per small frame (best of {args.repeat} runs of {args.rounds} responses):")
    for side in ("cartridge", "engine") if args.repeat else ():
        old, new = best[f"{side}-old"], best[f"{side}-new"]
        print(
            f"  {side:9}  old {old * 1e9:7.0f} ns   new {new * 1e9:7.0f} ns   "
            f"new/old {new / old:.3f}"
        )
    if args.instructions:
        short, long = max(200, args.rounds // 10), max(200, args.rounds // 10) * 2
        per: dict[str, float] = {}
        for setup in SETUPS:
            a = count_instructions(setup, short)
            b = count_instructions(setup, long)
            per[setup] = (b - a) / ((long - short) * FRAMES_PER_ROUND)
        print(f"Instructions per small frame (cachegrind, {long - short} responses counted):")
        for side in ("cartridge", "engine"):
            old, new = per[f"{side}-old"], per[f"{side}-new"]
            print(f"  {side:9}  old {old:9,.0f}   new {new:9,.0f}   new/old {new / old:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
