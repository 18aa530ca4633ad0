"""``tune_allocator``: applies once on glibc Linux, is a harmless no-op elsewhere."""

from __future__ import annotations

import subprocess
import sys

from cartridge_runtime.protocol import tune_allocator


def test_tune_allocator_is_idempotent() -> None:
    first = tune_allocator()
    assert isinstance(first, bool)
    assert tune_allocator() is first


def test_tune_allocator_keeps_large_buffers_working() -> None:
    # In a fresh process, so this test run's allocator is not the one being tuned.
    code = (
        "from cartridge_runtime.protocol import tune_allocator, checksum\n"
        "ok = tune_allocator()\n"
        "blocks = [bytes([i]) * (256 * 1024) for i in range(64)]\n"
        "assert all(len(b) == 256 * 1024 for b in blocks)\n"
        "assert checksum(blocks[1][:4]) == checksum(b'\\x01' * 4)\n"
        "print(ok)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() in ("True", "False")
