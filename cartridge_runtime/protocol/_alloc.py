"""Malloc tuning for large CHUNK payloads, scoped to the code that moves them (glibc only; a
no-op elsewhere).

Rules
-----
1. The tuning is held, not set: :func:`hold_allocator` raises glibc's mmap and trim thresholds
   while at least one holder (an engine, a cartridge runtime serving stdio) runs, and the last
   :func:`release_allocator` puts glibc's defaults back and gives the freed heap to the system.
2. A long-lived holder trims the heap itself (:func:`trim_heap`) now and then, so memory freed
   after a burst or an instance's restart does not stay mapped for the process's life.
3. Nothing happens on import, and nothing at all where glibc's ``mallopt`` is missing.

Why: glibc serves every allocation above its mmap threshold (128 KiB at start) with a fresh
``mmap`` and returns it with ``munmap`` on free. A 256 KiB CHUNK payload therefore costs a new
mapping and about 64-96 minor page faults each time cbor2 builds or slices one: measured on the
benchmark machine, ``decode_frame`` of a 256 KiB CHUNK took ~290 µs with the default settings
and ~60 µs tuned, and wrapping 256 KiB as a CBOR bstr ~280 µs against ~20 µs. That is as much
as the FNV-1a checksum of the same bytes (~335 µs), on every chunk, in every process that moves
data. The thresholds keep such buffers in the heap, where freed memory is reused; the price is
freed heap kept mapped, which rule 2 bounds.

glibc has no call that reads the thresholds back, so "restored" means glibc's documented
defaults (128 KiB each). Once set, glibc's sliding mmap threshold stays off for the process;
an application that wants none of this passes ``EngineConfig(tune_allocator=False)``.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

__all__ = (
    "MMAP_THRESHOLD",
    "TRIM_THRESHOLD",
    "allocator_holders",
    "hold_allocator",
    "release_allocator",
    "trim_heap",
    "tune_allocator",
)

#: Allocations at or below this size come from the heap (whole CHUNK frames fit: ~3.5 MiB).
MMAP_THRESHOLD = 4 << 20
#: Free heap memory kept before giving it back to the OS (bounds the extra RSS).
TRIM_THRESHOLD = 32 << 20
#: glibc's own values of both thresholds (``mallopt(3)``), put back by the last release.
_GLIBC_DEFAULT = 128 << 10

# mallopt parameter numbers from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_lock = threading.Lock()
_holders = 0
_libc: Any = None
_looked = False


def _glibc() -> Any:
    """glibc with ``mallopt`` and ``malloc_trim`` typed, or ``None`` on other platforms."""
    global _libc, _looked
    if _looked:
        return _libc
    _looked = True
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        mallopt, trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    _libc = libc
    return libc


def _set(mmap_threshold: int, trim_threshold: int) -> bool:
    libc = _glibc()
    if libc is None:
        return False
    ok = bool(libc.mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold)))
    return bool(libc.mallopt(_M_TRIM_THRESHOLD, int(trim_threshold))) and ok


def hold_allocator() -> bool:
    """Tune the allocator for large payloads while held (rule 1); True when it is tuned."""
    global _holders
    with _lock:
        if _holders == 0 and not _set(MMAP_THRESHOLD, TRIM_THRESHOLD):
            return False
        _holders += 1
        return True


def release_allocator() -> None:
    """Drop one hold; the last puts glibc's defaults back and trims the heap (rule 1). A
    release without a hold does nothing."""
    global _holders
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders == 0:
            _set(_GLIBC_DEFAULT, _GLIBC_DEFAULT)
            trim_heap()


def allocator_holders() -> int:
    """How many holders keep the allocator tuned now (0: glibc's defaults)."""
    return _holders


def trim_heap() -> bool:
    """Give the heap's free pages back to the system (``malloc_trim(0)``, rule 2); whether
    any memory was released."""
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))


def tune_allocator() -> bool:
    """Tune the allocator for the rest of the process's life: for a process that does nothing
    but move frames, such as a cartridge. Same as a :func:`hold_allocator` never released."""
    return hold_allocator()
