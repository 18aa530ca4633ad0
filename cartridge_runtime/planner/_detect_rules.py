"""The media URN a file name and its head make (sans-IO): the extension table and the rule
that weighs it against the content.

Rules (chapter 15 of the protocol spec):

1. The extension is the text after the last dot of the name, lower-cased; ``.tar.gz`` counts
   as ``tgz``; a name with no dot, or only a leading one, has none (DET-2).
2. The extension proposes; a content kind in its confirming set confirms it, a conclusive
   content kind outside that set corrects it, and an inconclusive head leaves it (DET-6).
3. Without a known extension the content alone decides (DET-7).

The URNs follow the reference's media vocabulary (``media:document;ext=pdf``,
``media:ext=png;image``, ``media:audio;ext=wav``, ``media:fmt=csv;list;record``...); text types
also carry the bundled cartridges' markers (``plain-text``, ``markdown``), and archives the
``archive`` marker, so one detected file conforms to the caps of both.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from ..urn import text_media_urn_for_ext
from ._detect_sniff import Sniffed

__all__ = ("Decision", "FileType", "EXTENSIONS", "decide", "extension_of", "media_for_kind")


class Decision(enum.StrEnum):
    """How a file's media URN was decided."""

    DECLARED = "declared"  #: the caller said so; nothing was read (DET-1)
    EXTENSION = "extension"  #: the extension alone; the content said nothing either way
    CONFIRMED = "confirmed"  #: the extension, and the content agrees
    CONTENT = "content"  #: the content, over the extension or without one


#: Every UTF-8 text kind :func:`~._detect_sniff.sniff` reports.
_TEXT: Final = frozenset({"text", "json", "jsonl", "csv", "tsv", "xml", "html"})


@attrs.frozen
class FileType:
    """What an extension claims.

    :ivar media: the media URN text the extension proposes.
    :ivar confirmed_by: the content kinds that confirm it; empty: no signature is known, so
        the content can neither confirm nor correct it (short of being conclusively another
        format).
    :ivar strict: whether a head with no recognised signature contradicts it (the format's
        signature is always at the start) or leaves it (the signature may be missing or late).
    """

    media: str
    confirmed_by: frozenset[str] = frozenset()
    strict: bool = True


def _t(media: str, *kinds: str, strict: bool = True) -> FileType:
    return FileType(media, frozenset(kinds), strict)


def _text(media: str) -> FileType:
    # Text types are confirmed by any UTF-8 text, and left as they are by 8-bit text.
    return FileType(media, _TEXT, strict=True)


_ZIPPED_DOCUMENTS: Final = ("docx", "xlsx", "pptx", "odt", "ods", "odp", "epub")

#: Extension (lower case, no dot) to the type it claims (DET-2, DET-6).
EXTENSIONS: Final[dict[str, FileType]] = {
    # text
    "txt": _text("media:enc=utf-8;ext=txt;plain-text"),
    "text": _text("media:enc=utf-8;ext=txt;plain-text"),
    "md": _text("media:enc=utf-8;ext=md;markdown"),
    "markdown": _text("media:enc=utf-8;ext=md;markdown"),
    "csv": _text("media:fmt=csv;list;record"),
    "tsv": _text("media:fmt=tsv;list;record"),
    "json": _t("media:fmt=json;list;record", "json"),
    "jsonl": _text("media:fmt=jsonl;list;record"),
    "ndjson": _text("media:fmt=jsonl;list;record"),
    "xml": _text("media:enc=utf-8;ext=xml"),
    "html": _text("media:enc=utf-8;ext=html"),
    "htm": _text("media:enc=utf-8;ext=html"),
    "yaml": _text("media:fmt=yaml"),
    "yml": _text("media:fmt=yaml"),
    "toml": _text("media:fmt=toml"),
    "svg": _text("media:ext=svg;image"),
    "rtf": _text("media:document;ext=rtf"),
    # documents
    "pdf": _t("media:document;ext=pdf", "pdf"),
    **{ext: _t(f"media:document;ext={ext}", "zip") for ext in _ZIPPED_DOCUMENTS},
    # images
    "png": _t("media:ext=png;image", "png"),
    "jpg": _t("media:ext=jpeg;image", "jpeg"),
    "jpeg": _t("media:ext=jpeg;image", "jpeg"),
    "jpe": _t("media:ext=jpeg;image", "jpeg"),
    "gif": _t("media:ext=gif;image", "gif"),
    "webp": _t("media:ext=webp;image", "webp"),
    "bmp": _t("media:ext=bmp;image", "bmp"),
    "tif": _t("media:ext=tiff;image", "tiff"),
    "tiff": _t("media:ext=tiff;image", "tiff"),
    "heic": _t("media:ext=heic;image", "heic", "mp4", strict=False),
    "heif": _t("media:ext=heic;image", "heic", "mp4", strict=False),
    # audio
    "wav": _t("media:audio;ext=wav", "wav"),
    "mp3": _t("media:audio;ext=mp3", "mp3", strict=False),
    "flac": _t("media:audio;ext=flac", "flac"),
    "ogg": _t("media:audio;ext=ogg", "ogg"),
    "oga": _t("media:audio;ext=ogg", "ogg"),
    "opus": _t("media:audio;ext=opus", "ogg"),
    "m4a": _t("media:audio;ext=m4a", "m4a", "mp4", strict=False),
    "aac": _t("media:audio;ext=aac"),
    # video
    "mp4": _t("media:ext=mp4;video", "mp4", "m4a", "mov", strict=False),
    "m4v": _t("media:ext=mp4;video", "mp4", "m4a", "mov", strict=False),
    "mov": _t("media:ext=mov;video", "mov", "mp4", strict=False),
    "avi": _t("media:ext=avi;video", "avi"),
    "webm": _t("media:ext=webm;video", "webm", "mkv"),
    "mkv": _t("media:ext=mkv;video", "mkv", "webm"),
    "ogv": _t("media:ext=ogv;video", "ogg"),
    # archives and compressed files
    "zip": _t("media:archive;ext=zip", "zip"),
    "jar": _t("media:archive;ext=jar", "zip"),
    "tar": _t("media:archive;ext=tar", "tar", strict=False),
    "tgz": _t("media:archive;ext=tgz", "tgz", "gzip"),
    "gz": _t("media:compressed;ext=gz", "gzip", "tgz"),
    "bz2": _t("media:compressed;ext=bz2", "bz2"),
    "xz": _t("media:compressed;ext=xz", "xz"),
    "7z": _t("media:archive;ext=7z", "7z"),
    # databases
    "sqlite": _t("media:database;ext=sqlite", "sqlite"),
    "sqlite3": _t("media:database;ext=sqlite", "sqlite"),
    "db": _t("media:database;ext=sqlite", "sqlite", strict=False),
}

#: The media URN a content kind makes on its own (DET-7); text and JSON are built per file.
_KIND_MEDIA: Final[dict[str, str]] = {
    "jsonl": "media:fmt=jsonl;list;record",
    "csv": "media:fmt=csv;list;record",
    "tsv": "media:fmt=tsv;list;record",
    "xml": "media:enc=utf-8;ext=xml",
    "html": "media:enc=utf-8;ext=html",
    "pdf": "media:document;ext=pdf",
    "png": "media:ext=png;image",
    "jpeg": "media:ext=jpeg;image",
    "gif": "media:ext=gif;image",
    "webp": "media:ext=webp;image",
    "bmp": "media:ext=bmp;image",
    "tiff": "media:ext=tiff;image",
    "heic": "media:ext=heic;image",
    "wav": "media:audio;ext=wav",
    "mp3": "media:audio;ext=mp3",
    "flac": "media:audio;ext=flac",
    "ogg": "media:audio;ext=ogg",
    "m4a": "media:audio;ext=m4a",
    "avi": "media:ext=avi;video",
    "mp4": "media:ext=mp4;video",
    "mov": "media:ext=mov;video",
    "webm": "media:ext=webm;video",
    "mkv": "media:ext=mkv;video",
    "zip": "media:archive;ext=zip",
    "tar": "media:archive;ext=tar",
    "tgz": "media:archive;ext=tgz",
    "7z": "media:archive;ext=7z",
    "gzip": "media:compressed;ext=gz",
    "bz2": "media:compressed;ext=bz2",
    "xz": "media:compressed;ext=xz",
    "sqlite": "media:database;ext=sqlite",
}

_JSON_MEDIA: Final[dict[str | None, str]] = {
    "record": "media:fmt=json;record",
    "records": "media:fmt=json;list;record",
    "list": "media:fmt=json;list",
    "scalar": "media:fmt=json",
}

#: The top media URN: nothing is known about the bytes.
_TOP: Final = "media:"


def extension_of(name: str) -> str | None:
    """The extension of a file name (DET-2): after the last dot, lower-cased; ``.tar.gz`` is
    ``tgz``; ``None`` for a name with no dot or only a leading one."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem or not ext:
        return None
    ext = ext.lower()
    if ext == "gz" and stem.lower().endswith(".tar"):
        return "tgz"
    return ext


def media_for_kind(sniffed: Sniffed, ext: str | None = None) -> str:
    """The media URN text the content alone makes (DET-7); plain text keeps the file's
    extension as ``ext=`` when it is a valid one."""
    if sniffed.kind == "json":
        return _JSON_MEDIA[sniffed.json_shape]
    if sniffed.kind == "text":
        if ext is not None:
            try:
                return text_media_urn_for_ext(ext)
            except ValueError:
                pass  # not a usable extension word: plain text without one
        return "media:enc=utf-8"
    return _KIND_MEDIA.get(sniffed.kind, _TOP)


def decide(name: str, sniffed: Sniffed) -> tuple[str, Decision]:
    """The media URN text of a file called ``name`` whose head is ``sniffed``, and how it was
    decided (DET-6, DET-7)."""
    ext = extension_of(name)
    claim = EXTENSIONS.get(ext) if ext is not None else None
    kind = sniffed.kind
    if claim is None:
        if kind == "empty":
            return _TOP, Decision.EXTENSION
        return media_for_kind(sniffed, ext), Decision.CONTENT
    if kind == "empty" or not claim.confirmed_by:
        return claim.media, Decision.EXTENSION
    if kind in claim.confirmed_by:
        # A JSON file's top-level value refines the list of records the extension claims.
        media = _JSON_MEDIA[sniffed.json_shape] if ext == "json" else claim.media
        return media, Decision.CONFIRMED if media == claim.media else Decision.CONTENT
    if kind == "binary" or (kind == "text-8bit" and claim.confirmed_by is not _TEXT):
        # No signature where a strict format always has one: the claim is refuted, and what the
        # bytes are is unknown.
        return (_TOP, Decision.CONTENT) if claim.strict else (claim.media, Decision.EXTENSION)
    if kind == "text-8bit":
        return claim.media, Decision.EXTENSION
    return media_for_kind(sniffed), Decision.CONTENT
