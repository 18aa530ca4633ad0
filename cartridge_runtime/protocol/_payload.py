"""CHUNK payload encoding: scalar items, text splitting, sequence fragments (REQ-5..REQ-9).

Scalar mode: every payload is exactly one CBOR item. Sequence mode: each item is encoded
once as CBOR and cut into raw fragments; the receiver joins fragments and decodes an item
once it is whole (RFC 8742 CBOR sequence).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import cbor2

from ._errors import FrameDecodeError

_CBOR_ERRORS = (
    cbor2.CBORDecodeError,
    ValueError,
    TypeError,
    UnicodeDecodeError,
    OverflowError,
    RecursionError,
    IndexError,
    KeyError,
)


def bstr_head(n: int) -> bytes:
    """The CBOR head of a byte string of ``n`` bytes."""
    return _head(0x40, n)


def tstr_head(n: int) -> bytes:
    """The CBOR head of a text string of ``n`` UTF-8 bytes."""
    return _head(0x60, n)


def _head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes((major | n,))
    if n < 0x100:
        return bytes((major | 24, n))
    if n < 0x10000:
        return bytes((major | 25,)) + n.to_bytes(2, "big")
    if n < 0x100000000:
        return bytes((major | 26,)) + n.to_bytes(4, "big")
    return bytes((major | 27,)) + n.to_bytes(8, "big")


def _string_span(payload: bytes) -> tuple[int, int] | None:
    """(header length, content length) when ``payload`` starts with a definite bstr/tstr head."""
    info = payload[0] & 0x1F
    if info < 24:
        return 1, info
    if info == 24:
        return (2, payload[1]) if len(payload) >= 2 else None
    if info == 25:
        return (3, int.from_bytes(payload[1:3], "big")) if len(payload) >= 3 else None
    if info == 26:
        return (5, int.from_bytes(payload[1:5], "big")) if len(payload) >= 5 else None
    if info == 27:
        return (9, int.from_bytes(payload[1:9], "big")) if len(payload) >= 9 else None
    return None


def decode_scalar(payload: bytes) -> Any:
    """Decode a scalar-mode chunk payload that must be exactly one CBOR item.

    :raises FrameDecodeError: empty, not CBOR, truncated, or followed by extra bytes.
    """
    if not payload:
        raise FrameDecodeError("scalar chunk payload is empty")
    major = payload[0] & 0xE0
    if major == 0x40 or major == 0x60:
        span = _string_span(payload)
        if span is not None:
            hl, n = span
            if hl + n == len(payload):
                if major == 0x40:
                    return payload[hl:]
                try:
                    return payload[hl:].decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise FrameDecodeError(f"scalar chunk text is not UTF-8: {exc}") from exc
    fp = io.BytesIO(payload)
    try:
        value = cbor2.CBORDecoder(fp).decode()
    except _CBOR_ERRORS as exc:
        raise FrameDecodeError(f"scalar chunk payload is not one CBOR item: {exc}") from exc
    if fp.tell() != len(payload):
        raise FrameDecodeError(
            f"scalar chunk payload holds {len(payload) - fp.tell()} bytes after its CBOR item"
        )
    return value


def split_text(text: str, max_bytes: int) -> Iterator[bytes]:
    """UTF-8 pieces of ``text`` of at most ``max_bytes``, cut on character boundaries."""
    data = text.encode("utf-8")
    n = len(data)
    if n <= max_bytes:
        yield data
        return
    pos = 0
    while pos < n:
        end = min(pos + max_bytes, n)
        if end < n:
            while end > pos and (data[end] & 0xC0) == 0x80:
                end -= 1
            if end == pos:  # max_bytes smaller than one character: cut after it anyway
                end = pos + 1
                while end < n and (data[end] & 0xC0) == 0x80:
                    end += 1
        yield data[pos:end]
        pos = end


def scalar_payloads(value: Any, max_chunk: int) -> list[bytes]:
    """Scalar-mode payloads for one emitted value, as the reference splits them (REQ-6).

    bytes: bstr pieces of at most ``max_chunk``; text: tstr pieces cut on character
    boundaries; list: one chunk per element; map: one ``[key, value]`` chunk per entry;
    anything else: one chunk.
    """
    if type(value) is bytes and 0 < len(value) <= max_chunk:  # the common small write
        return [bstr_head(len(value)) + value]
    if isinstance(value, bytes | bytearray | memoryview):
        mv = memoryview(value).cast("B")
        n = len(mv)
        if n == 0:
            return [b"\x40"]
        out = []
        for pos in range(0, n, max_chunk):
            piece = mv[pos : pos + max_chunk]
            out.append(b"".join((bstr_head(len(piece)), piece)))
        return out
    if isinstance(value, str):
        return [tstr_head(len(p)) + p for p in split_text(value, max_chunk)]
    if isinstance(value, list | tuple):
        return [cbor2.dumps(element) for element in value]
    if isinstance(value, dict):
        return [cbor2.dumps([k, v]) for k, v in value.items()]
    return [cbor2.dumps(value)]


def sequence_fragments(value: Any, max_chunk: int, *, encoded: bool = False) -> list[bytes]:
    """The raw fragments of one sequence item: its CBOR encoding cut at ``max_chunk``."""
    data = value if encoded else cbor2.dumps(value)
    if len(data) <= max_chunk:
        return [data]
    mv = memoryview(data)
    return [bytes(mv[pos : pos + max_chunk]) for pos in range(0, len(data), max_chunk)]


class SequenceAssembler:
    """Joins sequence fragments of one stream and yields whole items (REQ-8).

    A partial item is buffered; when its head says how long it is (a byte or text string, the
    common case for large items) no decode is tried until that many bytes are there, so a big
    item costs one decode, not one per fragment.
    """

    __slots__ = ("_buf", "_need")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._need: int | None = None

    @property
    def in_item(self) -> bool:
        """True while a partial item is buffered."""
        return bool(self._buf)

    def _note_partial(self) -> None:
        """Work out the length of the buffered partial item, when its head tells it."""
        self._need = None
        if self._buf and self._buf[0] & 0xE0 in (0x40, 0x60):
            span = _string_span(bytes(self._buf[:9]))
            if span is not None:
                self._need = span[0] + span[1]

    def feed(self, fragment: bytes) -> list[Any]:
        """Add a fragment; return the items it completed (possibly none).

        :raises FrameDecodeError: the bytes cannot be a CBOR item.
        """
        if not self._buf:
            # Fast path: a fragment that is exactly one item.
            fp = io.BytesIO(fragment)
            items: list[Any] = []
            try:
                while fp.tell() < len(fragment):
                    start = fp.tell()
                    try:
                        items.append(cbor2.CBORDecoder(fp).decode())
                    except cbor2.CBORDecodeEOF:
                        self._buf += fragment[start:]
                        self._note_partial()
                        break
            except _CBOR_ERRORS as exc:
                raise FrameDecodeError(f"sequence fragment is not CBOR: {exc}") from exc
            return items
        self._buf += fragment
        if self._need is not None and len(self._buf) < self._need:
            return []
        data = bytes(self._buf)
        fp = io.BytesIO(data)
        items = []
        consumed = 0
        try:
            while consumed < len(data):
                try:
                    items.append(cbor2.CBORDecoder(fp).decode())
                except cbor2.CBORDecodeEOF:
                    break
                consumed = fp.tell()
        except _CBOR_ERRORS as exc:
            raise FrameDecodeError(f"sequence fragment is not CBOR: {exc}") from exc
        del self._buf[:consumed]
        self._note_partial()
        return items
