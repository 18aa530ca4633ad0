#!/usr/bin/env python3
"""``text``: a bundled cartridge that reads plain text and Markdown.

Caps (first alias → what it does):

* ``metadata`` / ``markdown-metadata`` — lines, words, characters, bytes and the detected
  encoding of a text, as one JSON object.
* ``outline`` — the headings of a Markdown document, one sequence item per heading (the
  heading text), with per-item meta ``{"level": 1..6, "line": n, "anchor": slug}``.
* ``pages`` / ``markdown-pages`` — the text split into pages of N characters (``--size N``,
  default :data:`DEFAULT_PAGE_SIZE`), one sequence item per page with meta
  ``{"page": i, "start": offset, "chars": n}``, reporting progress as pages go out.

**One handler, several media URNs, and the fallback lookup.** ``metadata`` and ``pages`` are
declared twice, once for plain text (``in=media:ext=txt;plain-text``) and once for Markdown
(``in=media:ext=md;markdown``), and the same :class:`Op` class is registered under both cap
URNs. The engine dispatches a request to whichever registration fits best; the handler does not
care which one it was, because it looks its input up like this (see :func:`read_main_text`):

1. ``find_stream`` for each accepted media URN in turn (:data:`TEXT_MEDIA`), matching by URN
   *equivalence* — the stream a requester sends under the cap's own ``in=`` URN is found at once;
2. failing that, the **first stream** that is not one of the cap's side arguments (here the
   page size) — so a requester that sends a refined URN (``media:ext=txt;plain-text;lang=en``,
   not equivalent to the declared one) or a generic one is still served.

The bytes are decoded by :func:`detect_encoding` (UTF-8, with or without BOM; UTF-16 with a
BOM; otherwise latin-1, which never fails), using the standard library only.

Run ``python cartridges/text.py manifest`` for the manifest, ``python cartridges/text.py
metadata < cartridges/samples/sample.txt`` as a command-line tool, or with no arguments as a
cartridge under an engine.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, Final

from cartridge_runtime.manifest import ArgDef, CapDef, Manifest
from cartridge_runtime.runtime import (
    CartridgeRuntime,
    DryContext,
    InputPackage,
    Op,
    OpError,
    WetContext,
)
from cartridge_runtime.urn import media_matches_for_stream

# -- media and caps ---------------------------------------------------------------------------

#: Plain text (any encoding :func:`detect_encoding` recognizes).
PLAIN_TEXT: Final = "media:ext=txt;plain-text"
#: A Markdown document.
MARKDOWN: Final = "media:ext=md;markdown"
#: Every text media URN the handlers look for, in lookup order.
TEXT_MEDIA: Final = (PLAIN_TEXT, MARKDOWN)

#: The metadata JSON object.
METADATA_JSON: Final = "media:fmt=json;record;text-metadata"
#: One Markdown heading per sequence item (UTF-8 text).
HEADING_LIST: Final = "media:enc=utf-8;list;markdown-heading"
#: One page of text per sequence item (UTF-8 text).
PAGE_LIST: Final = "media:enc=utf-8;list;text-page"
#: The page size: the decimal text of a positive integer (characters per page).
PAGE_SIZE: Final = "media:integer;numeric;page-size"

#: Characters per page when ``--size`` is not given.
DEFAULT_PAGE_SIZE: Final = 2000
#: The largest page size accepted (a bigger page is not a page any more).
MAX_PAGE_SIZE: Final = 16 * 1024 * 1024
#: Progress is reported at most this many times per request (so a huge text does not flood).
MAX_PROGRESS_REPORTS: Final = 100

CAP_METADATA: Final = (
    'cap:in="media:ext=txt;plain-text";op=metadata;out="media:fmt=json;record;text-metadata"'
)
CAP_MARKDOWN_METADATA: Final = (
    'cap:in="media:ext=md;markdown";op=metadata;out="media:fmt=json;record;text-metadata"'
)
CAP_OUTLINE: Final = (
    'cap:in="media:ext=md;markdown";op=outline;out="media:enc=utf-8;list;markdown-heading"'
)
CAP_PAGES: Final = 'cap:in="media:ext=txt;plain-text";op=pages;out="media:enc=utf-8;list;text-page"'
CAP_MARKDOWN_PAGES: Final = (
    'cap:in="media:ext=md;markdown";op=pages;out="media:enc=utf-8;list;text-page"'
)


# -- encoding detection -----------------------------------------------------------------------

_BOMS: Final = (
    (codecs.BOM_UTF8, "utf-8", "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "utf-16"),
)


def detect_encoding(data: bytes) -> tuple[str, bool]:
    """The encoding of ``data`` and whether it starts with a byte-order mark.

    A UTF-8 or UTF-16 BOM decides; without one, bytes that decode as UTF-8 are UTF-8, and
    anything else is latin-1 (every byte sequence is valid latin-1, so detection never fails).
    """
    for bom, name, _ in _BOMS:
        if data.startswith(bom):
            return name, True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "latin-1", False
    return "utf-8", False


def decode_text(data: bytes, arg_urn: str) -> tuple[str, str, bool]:
    """``(text, encoding, had_bom)`` of ``data``; the BOM is not part of the text.

    :raises OpError: ``INVALID_TEXT`` (class ``input``) for a UTF-16 text with a BOM whose body
        is not valid UTF-16 (an odd length or a broken surrogate pair).
    """
    for mark, encoding, codec in _BOMS:
        if data.startswith(mark):
            try:
                return data.decode(codec), encoding, True
            except UnicodeDecodeError as exc:
                raise OpError(
                    "INVALID_TEXT",
                    f"the text has a {encoding} byte-order mark but is not valid {encoding}: "
                    f"{exc.reason}",
                    "input",
                    arg_urn,
                ) from None
    try:  # one decoding pass: detection and decoding at once
        return data.decode("utf-8"), "utf-8", False
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1", False


# -- the input lookup (the pattern this module documents) -------------------------------------


async def read_main_text(
    package: InputPackage, accepted: Sequence[str], side_args: Sequence[str] = ()
) -> tuple[bytes, str]:
    """The bytes of the main text input and the media URN they were found under.

    Tries each URN of ``accepted`` with ``find_stream`` (URN equivalence), then falls back to
    the first stream whose URN is not one of ``side_args``.

    :raises OpError: ``MISSING_INPUT`` (class ``input``) when no text stream arrived at all.
    """
    for urn in accepted:
        data = await package.find_stream(urn)
        if data is not None:
            return data, urn
    for urn, data in await package.collect_streams():
        if not any(media_matches_for_stream(side, urn) for side in side_args):
            return data, urn
    raise OpError(
        "MISSING_INPUT",
        f"no text input arrived (looked for {', '.join(accepted)} or any other stream)",
        "input",
        accepted[0],
    )


# -- metadata ---------------------------------------------------------------------------------


def text_metadata(data: bytes, arg_urn: str = PLAIN_TEXT) -> dict[str, Any]:
    """The metadata object of a text: ``encoding``, ``bom``, ``bytes``, ``characters``,
    ``words`` (whitespace-separated), ``lines`` (as ``str.splitlines`` counts them: a last
    line without a newline counts, an empty text has none) and ``line_ending`` (``lf``,
    ``crlf``, ``cr``, ``mixed`` or ``none``)."""
    text, encoding, bom = decode_text(data, arg_urn)
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr = text.count("\r") - crlf
    kinds = [name for name, count in (("lf", lf), ("crlf", crlf), ("cr", cr)) if count]
    return {
        "encoding": encoding,
        "bom": bom,
        "bytes": len(data),
        "characters": len(text),
        "words": len(text.split()),
        "lines": len(text.splitlines()),
        "line_ending": kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "none"),
    }


class TextMetadata(Op):
    """Lines, words, characters and encoding of a text, as JSON."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        data, urn = await read_main_text(req.take_input(), TEXT_MEDIA)
        meta = text_metadata(data, urn)
        await req.output().write(json.dumps(meta).encode("utf-8"))


# -- outline ----------------------------------------------------------------------------------

_ATX: Final = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT: Final = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SLUG_DROP: Final = re.compile(r"[^\w\- ]", re.UNICODE)


def slugify(heading: str) -> str:
    """A GitHub-style anchor: lower case, punctuation dropped, spaces to hyphens."""
    return _SLUG_DROP.sub("", heading.strip().lower()).replace(" ", "-")


def markdown_headings(text: str) -> Iterator[tuple[str, int, int]]:
    """``(heading text, level, 1-based line)`` for each ATX (``# Title``) and setext
    (``Title`` underlined by ``===`` or ``---``) heading, skipping fenced code blocks."""
    fence: str | None = None
    previous: tuple[str, int] | None = None  # a paragraph line that a setext rule may underline
    for number, line in enumerate(text.splitlines(), start=1):
        fence_match = _FENCE.match(line)
        if fence is not None:
            if (
                fence_match
                and fence_match.group(1)[0] == fence[0]
                and len(fence_match.group(1)) >= len(fence)
            ):
                fence = None
            continue
        if fence_match:
            fence, previous = fence_match.group(1), None
            continue
        atx = _ATX.match(line)
        if atx:
            yield (atx.group(2) or "").strip(), len(atx.group(1)), number
            previous = None
            continue
        setext = _SETEXT.match(line)
        if setext and previous is not None:
            yield previous[0], 1 if setext.group(1)[0] == "=" else 2, previous[1]
            previous = None
            continue
        stripped = line.strip()
        is_paragraph = bool(stripped) and not line.startswith(("    ", "\t", ">"))
        previous = (stripped, number) if is_paragraph else None


class MarkdownOutline(Op):
    """The headings of a Markdown document, as sequence items with level and line meta."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        data, urn = await read_main_text(req.take_input(), (MARKDOWN, PLAIN_TEXT))
        text, _, _ = decode_text(data, urn)
        out = req.output()
        await out.start(is_sequence=True)
        count = 0
        for heading, level, line in markdown_headings(text):
            meta = {"level": level, "line": line, "anchor": slugify(heading)}
            await out.emit_text(heading, meta=meta)
            count += 1
        req.finish(1.0, f"{count} heading(s)")


# -- pages ------------------------------------------------------------------------------------


def parse_page_size(raw: bytes | None) -> int:
    """The page size given as decimal text (``None`` → :data:`DEFAULT_PAGE_SIZE`).

    :raises OpError: ``INVALID_PAGE_SIZE`` (class ``input``, ``arg_urn`` = :data:`PAGE_SIZE`)
        for anything but an integer in ``1..MAX_PAGE_SIZE``.
    """
    if raw is None or not raw.strip():
        return DEFAULT_PAGE_SIZE
    text = raw.decode("utf-8", "replace").strip()
    try:
        size = int(text)
    except ValueError:
        size = 0
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise OpError(
            "INVALID_PAGE_SIZE",
            f"page size must be an integer from 1 to {MAX_PAGE_SIZE}, not {text[:40]!r}",
            "input",
            PAGE_SIZE,
        )
    return size


class TextPages(Op):
    """The text split into pages of N characters, as sequence items, with progress."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        package = req.take_input()
        size = parse_page_size(await package.find_stream(PAGE_SIZE))
        data, urn = await read_main_text(package, TEXT_MEDIA, side_args=(PAGE_SIZE,))
        text, _, _ = decode_text(data, urn)
        out = req.output()
        await out.start(is_sequence=True, meta={"page_size": size})
        total = max(1, -(-len(text) // size))
        every = max(1, total // MAX_PROGRESS_REPORTS)
        pages = 0
        for index, start in enumerate(range(0, len(text), size)):
            page = text[start : start + size]
            await out.emit_text(page, meta={"page": index + 1, "start": start, "chars": len(page)})
            pages += 1
            if pages % every == 0 or pages == total:
                await out.progress(pages / total, f"page {pages} of {total}")
        req.finish(1.0, f"{pages} page(s) of up to {size} characters")


# -- manifest and runtime ---------------------------------------------------------------------

_SIZE_ARG: Final = ArgDef.flag(
    PAGE_SIZE,
    "--size",
    name="size",
    description=f"characters per page (default {DEFAULT_PAGE_SIZE})",
    default_value=DEFAULT_PAGE_SIZE,
)


def _metadata_cap(urn: str, aliases: tuple[str, ...], what: str) -> CapDef:
    return CapDef.simple(
        urn,
        f"Metadata of {what}",
        aliases=aliases,
        description=f"Lines, words, characters, bytes and detected encoding of {what}, as JSON.",
        input_description=what,
        output_name="metadata",
        output_description=(
            "JSON object: encoding, bom, bytes, characters, words, lines, line_ending"
        ),
    )


def _pages_cap(urn: str, aliases: tuple[str, ...], what: str) -> CapDef:
    return CapDef.simple(
        urn,
        f"Pages of {what}",
        aliases=aliases,
        description=f"{what} split into pages of N characters (one sequence item per page).",
        input_description=what,
        output_name="pages",
        output_description="one item per page; meta page, start, chars",
        output_is_sequence=True,
        extra_args=[_SIZE_ARG],
    )


MANIFEST: Final = Manifest.build(
    name="text",
    version="1.0.0",
    description="Metadata, Markdown outline and pages of plain text and Markdown documents.",
    caps=[
        _metadata_cap(CAP_METADATA, ("metadata", "text-metadata"), "a plain text"),
        _metadata_cap(CAP_MARKDOWN_METADATA, ("markdown-metadata",), "a Markdown document"),
        CapDef.simple(
            CAP_OUTLINE,
            "Outline of a Markdown document",
            aliases=("outline",),
            description="The headings of a Markdown document, one sequence item per heading.",
            input_description="a Markdown document",
            output_name="headings",
            output_description="one item per heading (its text); meta level, line, anchor",
            output_is_sequence=True,
        ),
        _pages_cap(CAP_PAGES, ("pages",), "a plain text"),
        _pages_cap(CAP_MARKDOWN_PAGES, ("markdown-pages",), "a Markdown document"),
    ],
)

#: Which :class:`Op` serves each cap; ``metadata`` and ``pages`` serve two cap URNs each.
HANDLERS: Final[dict[str, type[Op]]] = {
    CAP_METADATA: TextMetadata,
    CAP_MARKDOWN_METADATA: TextMetadata,
    CAP_OUTLINE: MarkdownOutline,
    CAP_PAGES: TextPages,
    CAP_MARKDOWN_PAGES: TextPages,
}


def build_runtime() -> CartridgeRuntime:
    """The cartridge: :data:`MANIFEST` with every handler of :data:`HANDLERS` registered."""
    runtime = CartridgeRuntime(MANIFEST)
    for urn, op in HANDLERS.items():
        runtime.register_op(urn, op)
    return runtime


if __name__ == "__main__":
    build_runtime().run()
