"""The bundled ``text`` cartridge: encoding detection, metadata, outline and pages, in-process,
through the engine, and as a command-line tool."""

from __future__ import annotations

import codecs
import json

import pytest
from _bundled import CARTRIDGES, assert_conformant, load_cartridge, run_cli, sample

from cartridge_runtime.manifest import validate_manifest
from cartridge_runtime.testing import CallResult, CartridgeHarness
from cartridge_runtime.urn import CapUrn

text = load_cartridge("text")


# -- manifest -------------------------------------------------------------------------------------


def test_manifest_is_valid_and_urns_are_canonical() -> None:
    validate_manifest(text.MANIFEST)
    for cap in text.MANIFEST.all_caps():
        assert str(CapUrn.parse(cap.urn)) == cap.urn
    for urn in text.HANDLERS:
        assert str(CapUrn.parse(urn)) == urn
        assert text.MANIFEST.find_cap(urn) is not None


def test_metadata_and_pages_are_registered_for_plain_text_and_markdown() -> None:
    ins = {
        str(CapUrn.parse(urn).in_spec)
        for urn, op in text.HANDLERS.items()
        if op is text.TextMetadata
    }
    assert ins == {text.PLAIN_TEXT, text.MARKDOWN}
    assert {text.HANDLERS[text.CAP_PAGES], text.HANDLERS[text.CAP_MARKDOWN_PAGES]} == {
        text.TextPages
    }


# -- pure functions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"plain ascii", ("utf-8", False)),
        ("caf\u00e9".encode(), ("utf-8", False)),
        (codecs.BOM_UTF8 + b"x", ("utf-8", True)),
        ("h\u00e9".encode("utf-16-le"), ("latin-1", False)),  # no BOM: not guessed
        (codecs.BOM_UTF16_LE + "h\u00e9".encode("utf-16-le"), ("utf-16-le", True)),
        (codecs.BOM_UTF16_BE + "h\u00e9".encode("utf-16-be"), ("utf-16-be", True)),
        (b"caf\xe9", ("latin-1", False)),
        (b"", ("utf-8", False)),
    ],
)
def test_detect_encoding(data: bytes, expected: tuple[str, bool]) -> None:
    assert text.detect_encoding(data) == expected


def test_metadata_counts() -> None:
    meta = text.text_metadata(b"one two\nthree\r\nfour")
    assert meta == {
        "encoding": "utf-8",
        "bom": False,
        "bytes": 19,
        "characters": 19,
        "words": 4,
        "lines": 3,
        "line_ending": "mixed",
    }
    assert text.text_metadata(b"")["lines"] == 0
    assert text.text_metadata(b"")["line_ending"] == "none"
    utf16 = text.text_metadata(codecs.BOM_UTF16_LE + "a b\r\n".encode("utf-16-le"))
    assert utf16["encoding"] == "utf-16-le"
    assert utf16["characters"] == 5  # the BOM is not a character of the text
    assert utf16["line_ending"] == "crlf"


def test_markdown_headings() -> None:
    doc = "# One #\ntext\n\nSetext\n======\n```\n# code\n```\n  ### Three\nSub\n---\n#nope\n"
    assert list(text.markdown_headings(doc)) == [
        ("One", 1, 1),
        ("Setext", 1, 4),
        ("Three", 3, 9),
        ("Sub", 2, 10),
    ]
    assert text.slugify("Writing a handler!") == "writing-a-handler"


def test_page_size_parsing() -> None:
    assert text.parse_page_size(None) == text.DEFAULT_PAGE_SIZE
    assert text.parse_page_size(b" 12 ") == 12
    for bad in (b"0", b"-3", b"x", b"1.5", str(text.MAX_PAGE_SIZE + 1).encode()):
        with pytest.raises(text.OpError) as info:
            text.parse_page_size(bad)
        assert info.value.code == "INVALID_PAGE_SIZE"
        assert info.value.attribution_class == "input"
        assert info.value.arg_urn == text.PAGE_SIZE


# -- in-process (the harness) ---------------------------------------------------------------------


async def _call(cap: str, inputs: list[tuple[str, bytes]]) -> CallResult:
    async with CartridgeHarness(text.build_runtime()) as harness:
        return await harness.call(cap, inputs)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("cap", "media"),
    [
        ("CAP_METADATA", "PLAIN_TEXT"),
        ("CAP_MARKDOWN_METADATA", "MARKDOWN"),
        # a refined URN is not *equivalent* to the declared one: the fallback finds it
        ("CAP_METADATA", "media:ext=txt;lang=en;plain-text"),
        ("CAP_METADATA", "media:"),
    ],
)
async def test_metadata_in_process(cap: str, media: str) -> None:
    media_urn = getattr(text, media, media)
    result = await _call(getattr(text, cap), [(media_urn, sample("sample.txt"))])
    result.raise_for_error()
    meta = json.loads(result.main_bytes)
    assert meta["lines"] == 5
    assert meta["words"] == 30
    assert meta["encoding"] == "utf-8"
    assert result.main is not None and result.main.media_urn == text.METADATA_JSON


@pytest.mark.asyncio
async def test_metadata_latin1_and_utf16() -> None:
    latin = await _call(
        text.CAP_METADATA, [(text.PLAIN_TEXT, "caf\u00e9 au lait".encode("latin-1"))]
    )
    assert json.loads(latin.raise_for_error().main_bytes)["encoding"] == "latin-1"
    body = codecs.BOM_UTF16_BE + "two words".encode("utf-16-be")
    utf16 = await _call(text.CAP_METADATA, [(text.PLAIN_TEXT, body)])
    meta = json.loads(utf16.raise_for_error().main_bytes)
    assert (meta["encoding"], meta["bom"], meta["words"]) == ("utf-16-be", True, 2)


@pytest.mark.asyncio
async def test_metadata_errors() -> None:
    broken = await _call(text.CAP_METADATA, [(text.PLAIN_TEXT, codecs.BOM_UTF16_LE + b"abc")])
    assert broken.error is not None
    assert (broken.error.code, broken.error.attribution_class) == ("INVALID_TEXT", "input")
    assert broken.error.arg_urn == text.PLAIN_TEXT
    missing = await _call(text.CAP_METADATA, [])
    assert missing.error is not None
    assert (missing.error.code, missing.error.attribution_class) == ("MISSING_INPUT", "input")


@pytest.mark.asyncio
@pytest.mark.parametrize("cap", sorted(text.HANDLERS))
async def test_every_cap_refuses_a_missing_text(cap: str) -> None:
    # pages: a lone side argument must not be mistaken for the text
    inputs = [(text.PAGE_SIZE, b"10")] if text.HANDLERS[cap] is text.TextPages else []
    result = await _call(cap, inputs)
    assert result.error is not None
    assert (result.error.code, result.error.attribution_class) == ("MISSING_INPUT", "input")
    assert result.error.arg_urn in text.TEXT_MEDIA


@pytest.mark.asyncio
@pytest.mark.parametrize("cap", sorted(text.HANDLERS))
async def test_every_cap_refuses_broken_utf16(cap: str) -> None:
    media = str(CapUrn.parse(cap).in_spec)
    result = await _call(cap, [(media, codecs.BOM_UTF16_LE + b"\x00\xd8")])  # lone surrogate
    assert result.error is not None
    assert (result.error.code, result.error.attribution_class) == ("INVALID_TEXT", "input")
    assert result.error.arg_urn == media


@pytest.mark.asyncio
async def test_outline_in_process() -> None:
    result = (
        await _call(text.CAP_OUTLINE, [(text.MARKDOWN, sample("sample.md"))])
    ).raise_for_error()
    main = result.main
    assert main is not None and main.is_sequence
    assert main.media_urn == text.HEADING_LIST
    assert main.items == [
        (b"Cartridge guide", {"level": 1, "line": 1, "anchor": "cartridge-guide"}),
        (b"Writing a handler", {"level": 2, "line": 5, "anchor": "writing-a-handler"}),
        (b"Fallback lookup", {"level": 3, "line": 13, "anchor": "fallback-lookup"}),
        (b"Testing", {"level": 2, "line": 17, "anchor": "testing"}),
        (b"Running it", {"level": 2, "line": 22, "anchor": "running-it"}),
    ]
    assert result.end is not None


@pytest.mark.asyncio
async def test_outline_without_headings_is_an_empty_sequence() -> None:
    result = (await _call(text.CAP_OUTLINE, [(text.MARKDOWN, b"just text\n")])).raise_for_error()
    assert result.main is not None and result.main.items == []


@pytest.mark.asyncio
async def test_pages_default_size_with_progress() -> None:
    body = ("x" * (text.DEFAULT_PAGE_SIZE * 2 + 5)).encode()
    result = (await _call(text.CAP_PAGES, [(text.PLAIN_TEXT, body)])).raise_for_error()
    main = result.main
    assert main is not None and main.is_sequence
    assert main.meta == {"page_size": text.DEFAULT_PAGE_SIZE}
    assert [len(value) for value, _ in main.items] == [2000, 2000, 5]
    assert [meta["page"] for _, meta in main.items] == [1, 2, 3]
    assert [meta["start"] for _, meta in main.items] == [0, 2000, 4000]
    assert [round(p, 3) for p, _ in result.progress] == [0.333, 0.667, 1.0]


@pytest.mark.asyncio
async def test_markdown_pages_with_size_before_text() -> None:
    # the size stream arrives first: the fallback must not mistake it for the text
    result = await _call(
        text.CAP_MARKDOWN_PAGES,
        [(text.PAGE_SIZE, b"5"), ("media:ext=md;markdown;x", b"# Title\nbody")],
    )
    main = result.raise_for_error().main
    assert main is not None
    assert [value for value, _ in main.items] == [b"# Tit", b"le\nbo", b"dy"]


@pytest.mark.asyncio
async def test_pages_bad_size_names_the_argument() -> None:
    result = await _call(text.CAP_PAGES, [(text.PLAIN_TEXT, b"abc"), (text.PAGE_SIZE, b"many")])
    assert result.error is not None
    assert result.error.code == "INVALID_PAGE_SIZE"
    assert result.error.attribution_class == "input"
    assert result.error.arg_urn == text.PAGE_SIZE
    assert not result.streams  # failed before any output


# -- through the engine (subprocess) --------------------------------------------------------------


@pytest.mark.asyncio
async def test_engine_metadata_outline_and_pages() -> None:
    from cartridge_runtime.engine import CallError, Engine

    async with Engine() as engine:
        engine.add_cartridge(str(text.__file__))
        result = await engine.call_bytes(
            text.CAP_METADATA, [(text.PLAIN_TEXT, sample("sample.txt"))]
        )
        assert json.loads(result.data)["lines"] == 5
        outline = await engine.call_bytes(text.CAP_OUTLINE, [(text.MARKDOWN, sample("sample.md"))])
        assert outline.items[0] == b"Cartridge guide"
        pages = await engine.call_bytes(
            text.CAP_MARKDOWN_PAGES, [(text.MARKDOWN, b"abcdefgh"), (text.PAGE_SIZE, b"3")]
        )
        assert pages.items == [b"abc", b"def", b"gh"]
        assert [p.progress for p in pages.progress][-1] == 1.0
        with pytest.raises(CallError) as info:
            await engine.call_bytes(
                text.CAP_PAGES, [(text.PLAIN_TEXT, b"abc"), (text.PAGE_SIZE, b"0")]
            )
        assert (info.value.code, info.value.attribution_class, info.value.arg_urn) == (
            "INVALID_PAGE_SIZE",
            "input",
            text.PAGE_SIZE,
        )


# -- command-line mode ----------------------------------------------------------------------------


def test_cli_manifest() -> None:
    done = run_cli("text", "manifest")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == text.MANIFEST.to_json()


def test_cli_help_lists_every_alias() -> None:
    done = run_cli("text", "--help")
    assert done.returncode == 0
    for alias in ("metadata", "markdown-metadata", "outline", "pages", "markdown-pages"):
        assert alias.encode() in done.stderr + done.stdout


def test_cli_metadata_and_outline() -> None:
    done = run_cli("text", "metadata", stdin=sample("sample.txt"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["words"] == 30
    done = run_cli("text", "outline", stdin=sample("sample.md"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == [
        "Cartridge guide",
        "Writing a handler",
        "Fallback lookup",
        "Testing",
        "Running it",
    ]


def test_cli_pages_with_size_and_bad_size() -> None:
    done = run_cli("text", "pages", "--size", "4", stdin=b"abcdefghij")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == ["abcd", "efgh", "ij"]
    assert b"PROGRESS" in done.stderr
    done = run_cli("text", "pages", "--size", "nope", stdin=b"abc")
    assert done.returncode == 1
    assert b"INVALID_PAGE_SIZE" in done.stderr


# -- conformance kit ------------------------------------------------------------------------------


@pytest.mark.slow
def test_passes_the_conformance_kit() -> None:
    assert_conformant(CARTRIDGES / "text.py")
