#!/usr/bin/env python3
"""Codec benchmark: our frame codec next to raw cbor2 and the reference (capdag).

Measures, in one run:

- encode+decode time per small frame (an END, a LOG, a 12-byte CHUNK): ours
  (``encode_frame`` + ``decode_frame``, prefix and validation included), raw
  ``cbor2.dumps`` + ``cbor2.loads`` of the same map, and capdag's ``encode_frame`` +
  ``decode_frame`` when capdag is importable;
- throughput of the 256 KiB CHUNK path (checksum computation, encode, decode, checksum
  verification) for ours and the reference; raw cbor2 (dumps+loads, no checksum) is the floor.

Goals, printed as met/missed: small frame <= 2x raw cbor2 (every frame); chunk path >= 400 MB/s,
judged for the sender side (checksum + encode) and the receiver side (decode + verify), and
shown for the round trip too. FNV-1a is one serial multiply per byte (~750 MB/s on a current
x86 core), so a round trip that hashes the payload twice cannot reach 400 MB/s on one core;
the table prints that ceiling next to the figure.
Timings are CPU time, best of several repeats, so other load on the machine inflates them less.

Usage: ``.venv/bin/python benchmarks/bench_codec.py [--quick]``
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cbor2
from rich.console import Console
from rich.table import Table

from cartridge_runtime.protocol import (
    Frame,
    FrameDecoder,
    MessageId,
    checksum,
    decode_frame,
    encode_frame,
    frame_to_map,
    frames,
    verify_chunk,
)

try:  # the reference, only as a yardstick
    from capdag.bifaci import frame as ref_frame
    from capdag.bifaci import io as ref_io
except ImportError:  # pragma: no cover - optional
    ref_frame = ref_io = None

SMALL_GOAL = 2.0  # ours / raw cbor2
CHUNK_GOAL_MBS = 400.0
CHUNK_DATA = 256 * 1024


def best_us(fn: Callable[[], Any], repeat: int, min_time: float) -> float:
    """Best per-call time in microseconds over ``repeat`` runs of at least ``min_time`` s.

    Measured in CPU time of this process (``time.process_time``), not wall time, so that other
    load on a shared machine distorts the figures less.
    """
    timer = timeit.Timer(fn, timer=time.process_time)
    number = 1
    while True:
        t = timer.timeit(number)
        if t >= min_time:
            break
        number *= 2 if t == 0 else max(2, int(min_time / t * 1.2))
    return min(timer.repeat(repeat, number)) / number * 1e6


def minor_faults(fn: Callable[[], Any], n: int = 50) -> float:
    """Minor page faults per call of ``fn`` (averaged over ``n`` calls)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / n


def to_ref(frame: Frame) -> Any:
    """The same frame as a capdag ``Frame``."""
    assert ref_frame is not None
    fields = {
        name: getattr(frame, name)
        for name in (
            "seq",
            "version",
            "content_type",
            "payload",
            "len",
            "offset",
            "eof",
            "cap",
            "stream_id",
            "media_urn",
            "chunk_index",
            "chunk_count",
            "checksum",
            "is_sequence",
            "force_kill",
            "credit",
            "unbounded",
            "output",
        )
    }
    meta = None if frame.meta is None else dict(frame.meta)
    rid = None if frame.routing_id is None else ref_frame.MessageId(frame.routing_id.value)
    return ref_frame.Frame(
        frame_type=ref_frame.FrameType(int(frame.frame_type)),
        id=ref_frame.MessageId(frame.id.value),
        meta=meta,
        routing_id=rid,
        **fields,
    )


def small_frames() -> list[tuple[str, Frame]]:
    rid = MessageId(bytes(range(16)))
    xid = MessageId(1)
    return [
        ("END (response)", frames.end(rid, xid=xid, seq=3)),
        ("LOG (info)", frames.log(rid, "info", "decoded 12 rows", "internal", xid=xid, seq=1)),
        (
            "CHUNK (12 B)",
            frames.chunk(
                rid, "resp-8b857afa-0", 0, cbor2.dumps(b"hello bifaci")[:12], xid=xid, seq=1
            ),
        ),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter repeats (a rough figure)")
    args = ap.parse_args()
    repeat, min_time = (3, 0.05) if args.quick else (7, 0.2)
    console = Console()
    have_ref = ref_io is not None
    met: list[tuple[str, bool]] = []

    small = Table(title="Small frames: encode + decode, µs per frame (lower is better)")
    small.add_column("frame")
    small.add_column("bytes", justify="right")
    small.add_column("ours", justify="right")
    small.add_column("raw cbor2", justify="right")
    small.add_column("ours / raw", justify="right")
    if have_ref:
        small.add_column("capdag", justify="right")
        small.add_column("capdag / ours", justify="right")
    worst = 0.0
    for name, frame in small_frames():
        raw = encode_frame(frame)
        m = frame_to_map(frame)
        ours = best_us(lambda f=frame: decode_frame(encode_frame(f)), repeat, min_time)
        rawt = best_us(lambda m=m: cbor2.loads(cbor2.dumps(m)), repeat, min_time)
        ratio = ours / rawt
        worst = max(worst, ratio)
        row = [name, str(len(raw)), f"{ours:.2f}", f"{rawt:.2f}", f"{ratio:.2f}x"]
        if have_ref:
            rf = to_ref(frame)
            assert ref_io.encode_frame(rf) == raw[4:], f"reference encodes {name} differently"
            reft = best_us(
                lambda rf=rf: ref_io.decode_frame(ref_io.encode_frame(rf)), repeat, min_time
            )
            row += [f"{reft:.2f}", f"{reft / ours:.2f}x"]
        small.add_row(*row)
    console.print(small)
    met.append(
        (f"small frame <= {SMALL_GOAL:.0f}x raw cbor2 (worst {worst:.2f}x)", worst <= SMALL_GOAL)
    )

    # 256 KiB CHUNK path, per side and round trip. Sender side: checksum + encode.
    # Receiver side: decode (through FrameDecoder, as a runtime reads) + checksum verification.
    rid = MessageId(bytes(range(16)))
    xid = MessageId(1)
    payload = cbor2.dumps(bytes(i & 0xFF for i in range(CHUNK_DATA)))
    mb = len(payload) / 1e6
    big = frames.chunk(rid, "resp-8b857afa-0", 0, payload, xid=xid, seq=1)
    big_raw = encode_frame(big)

    def ours_send() -> bytes:
        return encode_frame(frames.chunk(rid, "resp-8b857afa-0", 0, payload, xid=xid, seq=1))

    def ours_receive() -> None:
        dec = FrameDecoder()
        dec.feed(big_raw)
        f = dec.next_frame()
        assert f is not None
        verify_chunk(f)

    pieces = [big_raw[i : i + 65536] for i in range(0, len(big_raw), 65536)]

    def ours_receive_pieces() -> None:
        dec = FrameDecoder()
        for piece in pieces:  # as a pipe delivers it: 64 KiB reads
            dec.feed(piece)
        f = dec.next_frame()
        assert f is not None
        verify_chunk(f)

    def ours_round_trip() -> None:
        f = frames.chunk(rid, "resp-8b857afa-0", 0, payload, xid=xid, seq=1)
        verify_chunk(decode_frame(encode_frame(f)))

    bm = frame_to_map(big)
    body = big_raw[4:]
    chunk = Table(
        title=f"256 KiB CHUNK path ({len(payload)} payload bytes): MB/s (higher is better)"
    )
    chunk.add_column("path")
    chunk.add_column("µs per frame", justify="right")
    chunk.add_column("MB/s", justify="right")
    chunk.add_column("ours / this", justify="right")
    t_fnv = best_us(lambda: checksum(payload), repeat, min_time)
    t_send = best_us(ours_send, repeat, min_time)
    t_recv = best_us(ours_receive, repeat, min_time)
    t_rt = best_us(ours_round_trip, repeat, min_time)
    rows = [
        ("FNV-1a 64 alone (fnv-c), one pass", t_fnv),
        ("ours send: checksum + encode", t_send),
        ("ours receive: FrameDecoder + verify", t_recv),
        ("  (info) same, fed in 64 KiB reads", best_us(ours_receive_pieces, repeat, min_time)),
        ("ours round trip: checksum+encode+decode+verify", t_rt),
        ("raw cbor2 dumps (no checksum)", best_us(lambda: cbor2.dumps(bm), repeat, min_time)),
        ("raw cbor2 loads (no checksum)", best_us(lambda: cbor2.loads(body), repeat, min_time)),
        (
            "raw cbor2 dumps+loads (no checksum)",
            best_us(lambda: cbor2.loads(cbor2.dumps(bm)), repeat, min_time),
        ),
    ]
    if have_ref:

        def ref_round_trip() -> None:
            cs = ref_frame.compute_checksum(payload)
            f = ref_frame.Frame.chunk(
                ref_frame.MessageId(rid.value), "resp-8b857afa-0", 1, payload, 0, cs
            )
            f.routing_id = ref_frame.MessageId(1)
            ref_frame.verify_chunk_checksum(ref_io.decode_frame(ref_io.encode_frame(f)))

        # The reference's checksum is a pure-Python loop (~50 ms per pass): time it briefly.
        rows.append(
            (
                "capdag round trip: checksum+encode+decode+verify",
                best_us(ref_round_trip, 2 if args.quick else 3, 0.0),
            )
        )
    for name, t in rows:
        chunk.add_row(
            name, f"{t:.1f}", f"{mb / (t / 1e6):.0f}", f"{t_rt / t:.2f}x" if "round" in name else ""
        )
    console.print(chunk)
    faults = ", ".join(
        f"{name} {minor_faults(fn):.0f}"
        for name, fn in (
            ("send", ours_send),
            ("receive", ours_receive),
            ("64 KiB reads", ours_receive_pieces),
            ("round trip", ours_round_trip),
        )
    )
    console.print(
        f"Minor page faults per frame: {faults}. Each 256 KiB buffer glibc serves by mmap faults "
        "in ~64 pages when it is touched; on a VM that can cost more than the hashing, so these "
        "rows vary between runs with the allocator's state (MALLOC_MMAP_THRESHOLD_ changes it)."
    )
    fnv_mbs = mb / (t_fnv / 1e6)
    for side, t in (("send", t_send), ("receive", t_recv)):
        mbs = mb / (t / 1e6)
        met.append(
            (
                f"256 KiB chunk {side} side >= {CHUNK_GOAL_MBS:.0f} MB/s (ours {mbs:.0f} MB/s)",
                mbs >= CHUNK_GOAL_MBS,
            )
        )
    rt_mbs = mb / (t_rt / 1e6)
    met.append(
        (
            f"256 KiB chunk round trip >= {CHUNK_GOAL_MBS:.0f} MB/s (ours {rt_mbs:.0f} MB/s; "
            f"two FNV passes cap it at {fnv_mbs / 2:.0f} MB/s here)",
            rt_mbs >= CHUNK_GOAL_MBS,
        )
    )

    goals = Table(title="Goals")
    goals.add_column("goal")
    goals.add_column("result")
    for name, ok in met:
        goals.add_row(name, "[green]met[/green]" if ok else "[red]missed[/red]")
    console.print(goals)
    if not have_ref:
        console.print("capdag not importable: reference columns left out")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
