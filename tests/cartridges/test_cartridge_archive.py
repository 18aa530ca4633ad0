"""The bundled ``archive`` cartridge: listing and extracting zip and tar archives (detected by
content), its errors, the engine and the command-line mode."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile

import pytest
from _bundled import CARTRIDGES, SAMPLES, assert_conformant, load_cartridge, run_cli, sample

from cartridge_runtime.manifest import validate_manifest
from cartridge_runtime.testing import CallResult, CartridgeHarness
from cartridge_runtime.urn import CapUrn

archive = load_cartridge("archive")
MTIME = 1704164644  # what samples/make_samples.py stamps on every entry


def _tar(mode: str = "w", *, link: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        info = tarfile.TarInfo("a.txt")
        info.size, info.mtime = 3, 100
        tar.addfile(info, io.BytesIO(b"abc"))
        if link:
            sym = tarfile.TarInfo("link")
            sym.type, sym.linkname = tarfile.SYMTYPE, "a.txt"
            tar.addfile(sym)
    return buffer.getvalue()


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buffer.getvalue()


async def _call(cap: str, inputs: list[tuple[str, bytes]]) -> CallResult:
    async with CartridgeHarness(archive.build_runtime()) as harness:
        return await harness.call(cap, inputs)


def test_manifest_is_valid_and_urns_are_canonical() -> None:
    validate_manifest(archive.MANIFEST)
    for urn in (archive.CAP_LIST, archive.CAP_EXTRACT):
        assert str(CapUrn.parse(urn)) == urn
        assert archive.MANIFEST.find_cap(urn) is not None


def test_samples_are_reproducible() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_make_samples", SAMPLES / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.make_zip() == sample("sample.zip")
    assert module.make_tar_gz() == sample("sample.tar.gz")


# -- in-process (the harness) ---------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("name", "fmt", "entries"),
    [
        ("sample.zip", "zip", ["hello.txt", "docs/", "docs/guide.md", "data/sample.json"]),
        ("sample.tar.gz", "tar", ["hello.txt", "docs", "docs/guide.md", "data/sample.json"]),
    ],
)
async def test_list_samples(name: str, fmt: str, entries: list[str]) -> None:
    result = (await _call(archive.CAP_LIST, [(archive.ARCHIVE, sample(name))])).raise_for_error()
    main = result.main
    assert main is not None and main.is_sequence and main.media_urn == archive.ENTRY_LIST
    assert main.meta == {"format": fmt}
    assert [value for value, _ in main.items] == [e.encode() for e in entries]
    metas = [meta for _, meta in main.items]
    assert metas[0] == {"size": 34, "type": "file", "mtime": MTIME}
    assert metas[1]["type"] == "dir"
    assert metas[2]["size"] == len(sample("sample.md"))
    assert result.end is not None


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["w", "w:gz", "w:bz2", "w:xz"])
async def test_list_detects_tar_compression_by_content(mode: str) -> None:
    # sent under a more specific URN than the cap declares: the fallback lookup finds it
    result = await _call(archive.CAP_LIST, [("media:archive;ext=tar", _tar(mode, link=True))])
    main = result.raise_for_error().main
    assert main is not None
    assert main.items == [
        (b"a.txt", {"size": 3, "type": "file", "mtime": 100}),
        (b"link", {"size": 0, "type": "symlink", "mtime": 0}),
    ]


@pytest.mark.asyncio
async def test_list_empty_zip() -> None:
    result = (await _call(archive.CAP_LIST, [(archive.ARCHIVE, _zip({}))])).raise_for_error()
    assert result.main is not None and result.main.items == []


@pytest.mark.asyncio
@pytest.mark.parametrize("data", [b"", b"plain text, not an archive", b"PK\x03\x04broken"])
async def test_list_refuses_what_is_not_an_archive(data: bytes) -> None:
    result = await _call(archive.CAP_LIST, [(archive.ARCHIVE, data)])
    assert result.error is not None
    assert (result.error.code, result.error.attribution_class) == ("NOT_AN_ARCHIVE", "input")
    assert result.error.arg_urn == archive.ARCHIVE


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["sample.zip", "sample.tar.gz"])
async def test_extract_samples(name: str) -> None:
    result = await _call(
        archive.CAP_EXTRACT,
        [(archive.ARCHIVE, sample(name)), (archive.ENTRY_NAME, b"docs/guide.md")],
    )
    assert result.raise_for_error().main_bytes == sample("sample.md")
    assert result.main is not None and result.main.media_urn == archive.ENTRY_BYTES


@pytest.mark.asyncio
async def test_extract_large_entry_streams_in_pieces() -> None:
    big = bytes(range(256)) * (3 * archive.EXTRACT_PIECE // 256 + 7)
    result = await _call(
        archive.CAP_EXTRACT,
        [(archive.ENTRY_NAME, b"big.bin"), (archive.ARCHIVE, _zip({"big.bin": big}))],
    )
    assert result.raise_for_error().main_bytes == big


@pytest.mark.asyncio
async def test_extract_missing_entry_is_an_input_error_naming_it() -> None:
    result = await _call(
        archive.CAP_EXTRACT,
        [(archive.ARCHIVE, sample("sample.zip")), (archive.ENTRY_NAME, b"nope.txt")],
    )
    assert result.error is not None
    assert result.error.code == "ENTRY_NOT_FOUND"
    assert result.error.attribution_class == "input"
    assert result.error.arg_urn == archive.ENTRY_NAME
    assert "nope.txt" in result.error.message
    assert not result.streams


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("data", "name", "code"),
    [
        ("sample.tar.gz", b"docs", "NOT_A_FILE"),
        ("sample.zip", b"docs", "NOT_A_FILE"),
        ("sample.zip", b"", "INVALID_NAME"),
        ("sample.zip", b"\xff", "INVALID_NAME"),
    ],
)
async def test_extract_bad_names(data: str, name: bytes, code: str) -> None:
    result = await _call(
        archive.CAP_EXTRACT, [(archive.ARCHIVE, sample(data)), (archive.ENTRY_NAME, name)]
    )
    assert result.error is not None
    assert (result.error.code, result.error.attribution_class) == (code, "input")
    assert result.error.arg_urn == archive.ENTRY_NAME


@pytest.mark.asyncio
async def test_extract_symlink_is_not_a_file() -> None:
    result = await _call(
        archive.CAP_EXTRACT, [(archive.ARCHIVE, _tar(link=True)), (archive.ENTRY_NAME, b"link")]
    )
    assert result.error is not None and result.error.code == "NOT_A_FILE"


# -- through the engine (subprocess) --------------------------------------------------------------


@pytest.mark.asyncio
async def test_engine_list_and_extract() -> None:
    from cartridge_runtime.engine import CallError, Engine

    async with Engine() as engine:
        engine.add_cartridge(str(archive.__file__))
        listing = await engine.call_bytes(
            archive.CAP_LIST, [("media:archive;ext=zip", sample("sample.zip"))]
        )
        assert listing.items == [b"hello.txt", b"docs/", b"docs/guide.md", b"data/sample.json"]
        assert listing.main is not None and listing.main.items[0].meta == {
            "size": 34,
            "type": "file",
            "mtime": MTIME,
        }
        content = await engine.call_bytes(
            archive.CAP_EXTRACT,
            [(archive.ARCHIVE, sample("sample.tar.gz")), (archive.ENTRY_NAME, b"data/sample.json")],
        )
        assert json.loads(content.data) == json.loads(sample("sample.json"))
        with pytest.raises(CallError) as info:
            await engine.call_bytes(
                archive.CAP_EXTRACT,
                [(archive.ARCHIVE, sample("sample.zip")), (archive.ENTRY_NAME, b"missing")],
            )
        assert (info.value.code, info.value.attribution_class, info.value.arg_urn) == (
            "ENTRY_NOT_FOUND",
            "input",
            archive.ENTRY_NAME,
        )


# -- command-line mode ----------------------------------------------------------------------------


def test_cli_manifest_list_and_extract() -> None:
    done = run_cli("archive", "manifest")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == archive.MANIFEST.to_json()
    done = run_cli("archive", "list", stdin=sample("sample.tar.gz"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == [
        "hello.txt",
        "docs",
        "docs/guide.md",
        "data/sample.json",
    ]
    done = run_cli("archive", "extract", "hello.txt", stdin=sample("sample.zip"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"Hello from the archive cartridge!\n"


def test_cli_missing_entry_exits_1() -> None:
    done = run_cli("archive", "extract", "nope", stdin=sample("sample.zip"))
    assert done.returncode == 1
    assert b"ENTRY_NOT_FOUND" in done.stderr


# -- conformance kit ------------------------------------------------------------------------------


@pytest.mark.slow
def test_passes_the_conformance_kit() -> None:
    assert_conformant(CARTRIDGES / "archive.py")
