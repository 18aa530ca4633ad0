#!/usr/bin/env python3
"""The far end of the checksum floor (benchmark pair f): a bare echo that verifies.

Reads stdin in blocks of up to ``BLOCK`` bytes, computes the FNV-1a 64 of each block
(what a cartridge must do to verify a CHUNK; the cost is per byte, whatever the cuts) and
writes the block back, until EOF. No
framing, no CBOR, no event loop: what is left is the pipe copies and the checksum, the
work every Bifaci implementation does per byte whatever its language.
"""

from __future__ import annotations

import os
import sys

from _bench_common import BLOCK
from fnv_c.ext._fnv import ffi, lib

from cartridge_runtime._plumbing import grow_pipe


def main() -> int:
    grow_pipe(0)
    grow_pipe(1)
    buf = bytearray(BLOCK)
    view = memoryview(buf)
    source = ffi.from_buffer(buf)
    while True:
        n = os.readv(0, [view])
        if n == 0:
            return 0
        lib.fnv1a_64(source, n)
        out = view[:n]
        while out:
            out = out[os.write(1, out) :]


if __name__ == "__main__":
    sys.exit(main())
