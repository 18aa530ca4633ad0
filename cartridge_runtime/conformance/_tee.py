"""``cartridge tee``: a transparent stand-in cartridge that records both directions.

The host starts ``cartridge tee --out DIR -- TARGET...`` instead of the cartridge; the tee
starts the real one, copies stdin to it and its stdout back byte for byte (stderr is
inherited), and writes each direction to ``DIR`` plus an index of when each read ended, so
``cartridge trace DIR`` can interleave the two directions in arrival order.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from ._session import target_command
from ._trace import C2H, H2C, INDEX_NAME, capture_names

__all__ = ("run_tee",)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def run_tee(
    target: Sequence[str], out_dir: str | os.PathLike[str], *, stdin_fd: int = 0, stdout_fd: int = 1
) -> int:
    """Run ``target`` (argv; a leading ``.py`` runs under this interpreter) as a recorded
    pass-through between ``stdin_fd``/``stdout_fd`` and the child. Returns its exit status."""
    argv = target_command(target[0]) + list(target[1:]) if target else []
    if not argv:
        raise ValueError("tee needs a target command")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = capture_names(out)
    files: dict[str, BinaryIO] = {d: open(p, "wb") for d, p in names.items()}  # noqa: SIM115
    index = open(out / INDEX_NAME, "w", encoding="utf-8")  # noqa: SIM115
    lock = threading.Lock()
    closed = False
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    child_in = proc.stdin.fileno()
    child_out = proc.stdout.fileno()

    def record(direction: str, data: bytes, total: int, t: float) -> None:
        with lock:
            if closed:
                return
            files[direction].write(data)
            files[direction].flush()  # a killed tee still leaves what it forwarded on disk
            index.write(json.dumps({"dir": direction, "t": round(t - t0, 6), "end": total}) + "\n")
            index.flush()

    def host_to_child() -> None:
        total = 0
        try:
            while True:
                data = os.read(stdin_fd, 65536)
                t = time.monotonic()  # before forwarding: anything it causes comes later
                if not data:
                    break
                total += len(data)
                try:
                    _write_all(child_in, data)
                except OSError:
                    record(H2C, data, total, t)
                    break
                record(H2C, data, total, t)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]

    def child_to_host() -> None:
        total = 0
        while True:
            try:
                data = os.read(child_out, 65536)
            except OSError:
                break
            t = time.monotonic()
            if not data:
                break
            total += len(data)
            with contextlib.suppress(OSError):
                _write_all(stdout_fd, data)
            record(C2H, data, total, t)

    up = threading.Thread(target=host_to_child, daemon=True)
    down = threading.Thread(target=child_to_host, daemon=True)
    up.start()
    down.start()
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.kill()
        rc = proc.wait()
    down.join(timeout=5)
    with lock:
        closed = True
        for f in files.values():
            f.close()
        index.close()
    return rc


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - thin wrapper
    """``python -m cartridge_runtime.conformance._tee DIR TARGET...``."""
    args = sys.argv[1:] if argv is None else argv
    return run_tee(args[1:], args[0])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
