"""Process-wide malloc tuning for large CHUNK payloads (glibc only; a no-op elsewhere).

Why: glibc serves every allocation above its mmap threshold (128 KiB at start) with a fresh
``mmap`` and returns it with ``munmap`` on free. A 256 KiB CHUNK payload therefore costs a new
mapping and about 64-96 minor page faults each time cbor2 builds or slices one: measured on the
benchmark machine, ``decode_frame`` of a 256 KiB CHUNK took ~290 µs with the default settings
and ~60 µs after :func:`tune_allocator`, and wrapping 256 KiB as a CBOR bstr ~280 µs against
~20 µs. That is as much as the FNV-1a checksum of the same bytes (~335 µs), on every chunk, in
every process that moves data.

Fixing the thresholds keeps such buffers in the heap, where freed memory is reused. The cost
is bounded: at most ``trim_threshold`` bytes of freed heap stay mapped at the top of the heap.

This module does nothing on import; the IO shells (engine, cartridge runtime) call
:func:`tune_allocator` once at start-up.
"""

from __future__ import annotations

import ctypes
import sys

#: Allocations at or below this size come from the heap (whole CHUNK frames fit: ~3.5 MiB).
MMAP_THRESHOLD = 4 << 20
#: Free heap memory kept before giving it back to the OS (bounds the extra RSS).
TRIM_THRESHOLD = 32 << 20

# mallopt parameter numbers from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_tuned = False


def tune_allocator(
    mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD
) -> bool:
    """Raise glibc's mmap and trim thresholds for this process; True when applied.

    Idempotent and safe to call from any thread before the data starts flowing. Returns False
    (and changes nothing) on platforms without glibc's ``mallopt``.
    """
    global _tuned
    if _tuned:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold)))
    ok = bool(mallopt(_M_TRIM_THRESHOLD, int(trim_threshold))) and ok
    _tuned = ok
    return ok
