#!/usr/bin/env python3
"""The issue-3 runtime benchmark: a large ``echo`` through one ``cartridges/interop.py`` process.

A lean raw-frame driver built on the sans-IO protocol core (no engine, no anyio): it spawns the
cartridge, does the handshake, the identity check and POLICY, then sends ``--mib`` MiB (256 by
default) through the ``echo`` cap as CHUNK frames, respecting the cartridge's credit, while the
main thread reads the response back, checks every returned chunk against what was sent, and
grants response credit. It prints the throughput (10^6 bytes per second, over the whole round
trip) and the cartridge's peak RSS (VmHWM), plus the CPU seconds of both processes.

The driver keeps its own cost small so that the figure measures the cartridge: the one data
block is built and checksummed once, each CHUNK is encoded by a template splice (no CBOR
encoder per chunk), reads are 1 MiB and CREDIT frames are batched.

Usage::

    .venv/bin/python benchmarks/bench_runtime_echo.py [--mib 256] [--profile FILE]

``--profile FILE`` starts the cartridge through a small wrapper that runs it under cProfile and
writes the stats to ``FILE`` when it exits (read them with ``pstats``); the figures printed are
then those of the profiled run.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cartridge_runtime.manifest import Manifest  # noqa: E402
from cartridge_runtime.protocol import (  # noqa: E402
    DEFAULT_LIMITS,
    Frame,
    FrameDecoder,
    FrameType,
    IdentityCheck,
    MessageId,
    accept_cartridge_hello,
    checksum,
    encode_frame,
    frames,
)

INTEROP = ROOT / "cartridges" / "interop.py"
READ_SIZE = 1 << 20
_PROFILE_WRAPPER = (
    "import cProfile, runpy, sys\n"
    "sys.argv = [sys.argv[1]]\n"
    "cProfile.run('runpy.run_path(sys.argv[0], run_name=\"__main__\")', {out!r})\n"
)


def _vm_hwm_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Driver:
    """Host side of one connection over the cartridge's pipes (blocking IO, two threads)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.wfd = proc.stdin.fileno()
        self.rfd = proc.stdout.fileno()
        self.decoder = FrameDecoder()
        self.lock = threading.Lock()
        self.seqs: dict[MessageId, int] = {}

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.wfd, view)
            view = view[n:]

    def send(self, frame: Frame) -> None:
        """Number a flow frame per request id and write it (serialised between threads)."""
        with self.lock:
            if frame.frame_type.is_flow:
                n = self.seqs.get(frame.id, 0)
                self.seqs[frame.id] = n + 1
                frame = frame.replace(seq=n)
            self.write(encode_frame(frame))

    def next_frame(self) -> Frame:
        while (frame := self.decoder.next_frame()) is None:
            data = os.read(self.rfd, READ_SIZE)
            if not data:
                raise RuntimeError("the cartridge closed its stdout")
            self.decoder.feed(data)
        return frame


def _chunk_template(rid: MessageId, sid: str, payload: bytes) -> tuple[bytes, bytes, bytes]:
    """Encode a CHUNK once and cut it around its two varying integers (seq, chunk_index).

    Both are encoded as 4-byte CBOR uints (0x1a) in the template, so a chunk is
    ``a + pack(seq) + b + pack(index) + c``; the decoder accepts non-shortest integers, and the
    cartridge sees exactly the frame it would get from ``frames.chunk``.
    """
    marker_seq, marker_idx = 0x7EADBEEF, 0x7EEDFACE
    f = Frame(
        frame_type=FrameType.CHUNK,
        id=rid,
        seq=marker_seq,
        payload=payload,
        stream_id=sid,
        chunk_index=marker_idx,
        checksum=checksum(payload),
    )
    data = encode_frame(f)
    i = data.index(struct.pack(">BI", 0x1A, marker_seq))
    j = data.index(struct.pack(">BI", 0x1A, marker_idx), i + 5)
    return data[: i + 1], data[i + 5 : j + 1], data[j + 5 :]


def run(total: int, profile: str | None) -> dict[str, float]:
    if profile:
        cmd = [sys.executable, "-c", _PROFILE_WRAPPER.format(out=profile), str(INTEROP)]
    else:
        cmd = [sys.executable, str(INTEROP)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env)
    d = Driver(proc)
    d.write(encode_frame(frames.hello(DEFAULT_LIMITS)))
    hello = accept_cartridge_hello(d.next_frame(), DEFAULT_LIMITS)
    limits = hello.limits
    manifest = Manifest.from_json(hello.manifest)
    cap = manifest.find_cap("echo")
    assert cap is not None, "interop has no echo cap"
    check = IdentityCheck()
    for f in check.frames():
        d.send(f)
    while not check.receive(d.next_frame()):
        pass
    d.send(frames.policy("offline"))

    rid = MessageId.new()
    sid = "bench-in"
    step = limits.effective_chunk
    block = bytes(range(256)) * (step // 256) + bytes(step % 256)
    head = bytes((0x5A,)) + len(block).to_bytes(4, "big") if len(block) >= 0x10000 else None
    assert head is not None, "max_chunk below 64 KiB is not supported by this driver"
    payload = head + block
    a, b, c = _chunk_template(rid, sid, payload)
    n_chunks, rest = divmod(total, step)
    assert not rest, f"--mib must be a multiple of the chunk size ({step} bytes)"

    credit = [limits.initial_credit]
    cond = threading.Condition()
    pack = struct.Struct(">I").pack
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            d.send(frames.req(rid, str(cap.cap_urn)))
            d.send(frames.stream_start(rid, sid, "media:"))
            for i in range(n_chunks):
                with cond:
                    while credit[0] <= 0:
                        cond.wait()
                    credit[0] -= 1
                with d.lock:
                    seq = d.seqs[rid]
                    d.seqs[rid] = seq + 1
                    d.write(b"".join((a, pack(seq), b, pack(i), c)))
            d.send(frames.stream_end(rid, sid, n_chunks))
            d.send(frames.end(rid, response=False))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    t0 = time.perf_counter()
    cpu0 = _cpu_s(proc.pid)
    th = threading.Thread(target=writer, daemon=True)
    th.start()
    received = 0
    pending: dict[str, int] = {}
    batch = max(1, limits.initial_credit // 2)
    while True:
        f = d.next_frame()
        ft = f.frame_type
        if ft is FrameType.CHUNK:
            if f.payload != payload:
                raise RuntimeError(f"chunk {f.chunk_index} came back different")
            received += len(block)
            n = pending.get(f.stream_id or "", 0) + 1
            if n >= batch:
                n = 0
                d.send(frames.credit(rid, batch, "response", stream_id=f.stream_id))
            pending[f.stream_id or ""] = n
        elif ft is FrameType.CREDIT:
            with cond:
                credit[0] += f.credit or 0
                cond.notify()
        elif ft is FrameType.END:
            break
        elif ft is FrameType.ERR:
            raise RuntimeError(f"echo failed: {f.meta}")
    seconds = time.perf_counter() - t0
    th.join()
    if errors:
        raise errors[0]
    if received != total:
        raise RuntimeError(f"received {received} bytes, sent {total}")
    hwm = _vm_hwm_mib(proc.pid)
    cpu = _cpu_s(proc.pid) - cpu0
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)
    return {
        "mib": total / (1 << 20),
        "seconds": seconds,
        "mb_s": total / seconds / 1e6,
        "cartridge_hwm_mib": hwm,
        "cartridge_cpu_s": cpu,
        "driver_cpu_s": time.process_time(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="MiB to echo (default 256)")
    parser.add_argument("--profile", help="run the cartridge under cProfile, stats to this file")
    args = parser.parse_args(argv)
    r = run(args.mib << 20, args.profile)
    print(
        f"echo {r['mib']:.0f} MiB: {r['mb_s']:.1f} MB/s in {r['seconds']:.2f} s; "
        f"cartridge VmHWM {r['cartridge_hwm_mib']:.1f} MiB, CPU {r['cartridge_cpu_s']:.2f} s; "
        f"driver CPU {r['driver_cpu_s']:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
