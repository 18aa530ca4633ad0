"""What the first bytes of a file say it is: signatures, text, JSON, CSV (sans-IO).

Rules (chapter 15 of the protocol spec):

1. Only the head is looked at: the caller reads at most :data:`SNIFF_BYTES` and says whether
   that was the whole file (DET-3).
2. A binary signature wins over every text test; text is UTF-8 (a BOM allowed) with no NUL
   byte (DET-4).
3. JSON, JSON Lines and CSV are refinements of text: JSON by its first token (and, for a whole
   file, a full parse), JSON Lines by objects one per line, CSV by rows of equal width (DET-5).

:func:`sniff` returns a :class:`Sniffed` value: a ``kind`` word from :data:`KINDS`, and for
JSON the shape of the top-level value. Nothing here touches a file.
"""

from __future__ import annotations

import codecs
import csv
import json
import zlib
from typing import Final

import attrs

__all__ = ("KINDS", "SNIFF_BYTES", "Sniffed", "sniff")

#: Bytes of a file the detector reads, at most: enough for every signature here (tar's magic
#: sits at offset 257, a PDF header may follow up to 1 KiB of junk) and for a few lines of text.
SNIFF_BYTES: Final = 8192
#: Bytes of a gzip stream inflated to look for a tar header inside (its magic ends at 262).
_GZIP_PEEK: Final = 512
#: Where a PDF header may start: readers accept junk before it within the first KiB.
_PDF_WINDOW: Final = 1024
#: Lines of text a CSV or JSON Lines guess looks at, at most.
_TABLE_LINES: Final = 20
#: Words a table field may hold: more reads as a sentence.
_FIELD_WORDS: Final = 8
#: Share of control characters above which non-UTF-8 text is called binary.
_CONTROL_SHARE: Final = 0.05

#: Every kind :func:`sniff` can report. ``empty``: no bytes; ``binary``: bytes with no known
#: signature; ``text``: text in no format we recognise; ``text-8bit``: NUL-free text that is not
#: UTF-8 (an older encoding); the rest name a format.
KINDS: Final = frozenset(
    {
        "empty",
        "binary",
        "text",
        "text-8bit",
        "json",
        "jsonl",
        "csv",
        "tsv",
        "xml",
        "html",
        "pdf",
        "png",
        "jpeg",
        "gif",
        "webp",
        "bmp",
        "tiff",
        "heic",
        "wav",
        "avi",
        "mp3",
        "flac",
        "ogg",
        "m4a",
        "mp4",
        "mov",
        "webm",
        "mkv",
        "zip",
        "gzip",
        "tgz",
        "tar",
        "bz2",
        "xz",
        "7z",
        "sqlite",
    }
)


@attrs.frozen(kw_only=True)
class Sniffed:
    """What a file's head says.

    :ivar kind: one of :data:`KINDS`.
    :ivar json_shape: for ``json``: ``record`` (an object), ``records`` (an array whose first
        item is an object), ``list`` (another array) or ``scalar``; else ``None``.
    """

    kind: str
    json_shape: str | None = None

    @property
    def is_text(self) -> bool:
        """Whether the head is UTF-8 text (any text kind but ``text-8bit``)."""
        return self.kind in ("text", "json", "jsonl", "csv", "tsv", "xml", "html")


def _riff(head: bytes) -> str | None:
    if head[:4] != b"RIFF" or len(head) < 12:
        return None
    return {b"WAVE": "wav", b"WEBP": "webp", b"AVI ": "avi"}.get(head[8:12])


def _ftyp(head: bytes) -> str | None:
    if head[4:8] != b"ftyp" or len(head) < 12:
        return None
    brand = head[8:12]
    if brand == b"M4A ":
        return "m4a"
    if brand == b"qt  ":
        return "mov"
    if brand in (b"heic", b"heix", b"mif1", b"msf1"):
        return "heic"
    return "mp4"


def _mp3(head: bytes) -> bool:
    if head[:3] == b"ID3":
        return True
    # An MPEG audio frame sync: eleven set bits, then a version and a layer that is not 00
    # (layer 00 is reserved; ADTS AAC uses it).
    return len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06 != 0


def _gzip(head: bytes) -> str:
    try:
        inner = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, _GZIP_PEEK)
    except zlib.error:
        return "gzip"
    return "tgz" if inner[257:262] == b"ustar" else "gzip"


def _signature(head: bytes) -> str | None:
    """The binary format whose signature ``head`` starts with, or ``None``."""
    simple: tuple[tuple[bytes, str], ...] = (
        (b"\x89PNG\r\n\x1a\n", "png"),
        (b"\xff\xd8\xff", "jpeg"),
        (b"GIF87a", "gif"),
        (b"GIF89a", "gif"),
        (b"II*\x00", "tiff"),
        (b"MM\x00*", "tiff"),
        (b"fLaC", "flac"),
        (b"OggS", "ogg"),
        (b"PK\x03\x04", "zip"),
        (b"PK\x05\x06", "zip"),
        (b"PK\x07\x08", "zip"),
        (b"\xfd7zXZ\x00", "xz"),
        (b"7z\xbc\xaf\x27\x1c", "7z"),
        (b"SQLite format 3\x00", "sqlite"),
        (b"\x1a\x45\xdf\xa3", "ebml"),
    )
    for magic, kind in simple:
        if head.startswith(magic):
            if kind == "ebml":
                return "webm" if b"webm" in head[:64] else "mkv"
            return kind
    if head[:3] == b"\x1f\x8b\x08":
        return _gzip(head)
    if head[:3] == b"BZh" and head[3:4].isdigit() and head[3:4] != b"0":
        return "bz2"
    if head[:2] == b"BM" and len(head) >= 26 and head[6:10] == b"\x00\x00\x00\x00":
        return "bmp"
    at = head.find(b"%PDF-", 0, _PDF_WINDOW)
    if at == 0 or (at > 0 and _decode(head[:at], True) is None):
        return "pdf"  # junk before the header counts only when it is not text about PDFs
    if head[257:262] == b"ustar":
        return "tar"
    return _riff(head) or _ftyp(head) or ("mp3" if _mp3(head) else None)


def _decode(head: bytes, whole: bool) -> str | None:
    """``head`` as UTF-8 text (BOM dropped), or ``None`` when it is not. A character cut at
    the end of a partial head is not an error."""
    if b"\x00" in head:
        return None
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    try:
        return decoder.decode(head, final=whole)
    except UnicodeDecodeError:
        return None


def _is_8bit_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    control = sum(1 for b in head if b < 0x20 and b not in (0x09, 0x0A, 0x0C, 0x0D, 0x1B))
    return control <= _CONTROL_SHARE * len(head)


def _json_shape(text: str, whole: bool) -> str | None:
    """The shape of the JSON value ``text`` starts (or, whole, is), or ``None``."""
    body = text.lstrip()
    if not body:
        return None
    if whole:
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if isinstance(value, dict):
            return "record"
        if isinstance(value, list):
            return "records" if value and isinstance(value[0], dict) else "list"
        return "scalar"
    # A partial head: the first token decides; an object or an array is what a JSON file of
    # more than a few KiB almost always is.
    if body[0] == "{":
        return "record"
    if body[0] == "[":
        inner = body[1:].lstrip()
        return "records" if inner[:1] == "{" else "list"
    return None


def _complete_lines(text: str, whole: bool) -> list[str]:
    """The first non-blank lines of ``text`` that are whole (the last of a partial head may be
    cut short)."""
    lines = text.splitlines()
    if not whole and lines:
        lines = lines[:-1]
    return [line for line in lines[:_TABLE_LINES] if line.strip()]


def _json_lines(lines: list[str]) -> bool:
    """Whether two lines or more are each one JSON object (JSON Lines)."""
    if len(lines) < 2 or not all(line.lstrip().startswith("{") for line in lines):
        return False
    try:
        return all(isinstance(json.loads(line), dict) for line in lines)
    except (ValueError, RecursionError):
        return False


def _table(lines: list[str]) -> str | None:
    """``csv`` or ``tsv`` when the lines are rows of one width: three rows or more, or two of
    three columns or more, no field a long run of words (prose with a comma per line is not a
    table)."""
    for delimiter, kind in ((",", "csv"), ("\t", "tsv")):
        try:
            rows = list(csv.reader(lines, delimiter=delimiter))
        except csv.Error:
            continue
        widths = {len(row) for row in rows}
        if len(widths) != 1:
            continue
        width = widths.pop()
        if width < 2 or (len(rows) < 3 and width < 3):
            continue
        if all(len(field.split()) <= _FIELD_WORDS for row in rows for field in row):
            return kind
    return None


def _markup(text: str) -> str | None:
    start = text.lstrip()[:64].lower()
    if start.startswith("<!doctype html") or start.startswith("<html"):
        return "html"
    if start.startswith("<?xml"):
        return "xml"
    return None


def sniff(head: bytes, *, whole: bool) -> Sniffed:
    """What ``head`` (the first bytes of a file; ``whole`` when it is all of it) is (DET-4,
    DET-5)."""
    if not head:
        return Sniffed(kind="empty")
    signature = _signature(head)
    if signature is not None:
        return Sniffed(kind=signature)
    text = _decode(head, whole)
    if text is None:
        return Sniffed(kind="text-8bit" if _is_8bit_text(head) else "binary")
    shape = _json_shape(text, whole)
    if shape is not None:
        return Sniffed(kind="json", json_shape=shape)
    lines = _complete_lines(text, whole)
    if _json_lines(lines):
        return Sniffed(kind="jsonl")
    return Sniffed(kind=_markup(text) or _table(lines) or "text")
