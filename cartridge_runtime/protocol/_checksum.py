"""FNV-1a 64 checksum of CHUNK payloads (REQ-5), computed in C by fnv-c."""

from __future__ import annotations

from fnv_c.ext._fnv import ffi as _ffi
from fnv_c.ext._fnv import lib as _lib

from ._errors import ChecksumMismatchError
from ._frame import Frame

FNV64_OFFSET_BASIS = 0xCBF29CE484222325
FNV64_PRIME = 0x100000001B3

_fnv1a_64 = _lib.fnv1a_64
_from_buffer = _ffi.from_buffer


def checksum(data: bytes | bytearray | memoryview) -> int:
    """FNV-1a 64 of ``data``: the value CHUNK key 16 carries for payload ``data``."""
    if type(data) is bytes:
        return int(_fnv1a_64(data, len(data)))
    mv = memoryview(data).cast("B")
    return int(_fnv1a_64(_from_buffer(mv), len(mv)))


def verify_chunk(frame: Frame) -> None:
    """Check a CHUNK's checksum against its payload (an absent payload counts as empty).

    :raises ChecksumMismatchError: the checksum does not match.
    """
    payload = frame.payload or b""
    actual = int(_fnv1a_64(payload, len(payload)))
    if actual != frame.checksum:
        raise ChecksumMismatchError(
            f"Checksum mismatch: stream {frame.stream_id!r} chunk {frame.chunk_index} "
            f"expected {frame.checksum}, computed {actual}"
        )
