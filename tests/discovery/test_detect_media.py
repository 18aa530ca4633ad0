"""Media detection of one file: each signature, extension against content, empty and huge
files, a declared URN, and the typed errors (DET-1 to DET-7, DET-9)."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cartridge_runtime.planner import _detect
from cartridge_runtime.planner._detect import (
    SNIFF_BYTES,
    Decision,
    InputError,
    InputNotFound,
    InputUnreadable,
    InvalidDeclaredMedia,
    detect_bytes,
    detect_file,
    detect_media,
)
from cartridge_runtime.planner._detect_sniff import KINDS, sniff
from cartridge_runtime.protocol import AttributionClass, CartridgeRuntimeError, ErrorCode
from cartridge_runtime.urn import MediaUrn


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "hello")
    return buffer.getvalue()


def _tar(compress: bool) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if compress else "w") as archive:
        data = b"hello"
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


ZEROS = b"\x00" * 64
#: (file name, content, media URN, how it was decided): each signature with its own extension.
SIGNATURES = [
    ("a.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", "media:document;ext=pdf", "confirmed"),
    ("a.png", b"\x89PNG\r\n\x1a\n" + ZEROS, "media:ext=png;image", "confirmed"),
    ("a.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + ZEROS, "media:ext=jpeg;image", "confirmed"),
    ("a.gif", b"GIF89a" + ZEROS, "media:ext=gif;image", "confirmed"),
    ("a.webp", b"RIFF\x24\x00\x00\x00WEBPVP8 " + ZEROS, "media:ext=webp;image", "confirmed"),
    (
        "a.bmp",
        b"BM\x3a\x00\x00\x00\x00\x00\x00\x00\x36" + ZEROS,
        "media:ext=bmp;image",
        "confirmed",
    ),
    ("a.tiff", b"II*\x00\x08\x00\x00\x00" + ZEROS, "media:ext=tiff;image", "confirmed"),
    ("a.wav", b"RIFF\x24\x00\x00\x00WAVEfmt " + ZEROS, "media:audio;ext=wav", "confirmed"),
    ("a.mp3", b"ID3\x04\x00\x00\x00\x00\x00\x00" + ZEROS, "media:audio;ext=mp3", "confirmed"),
    ("b.mp3", b"\xff\xfb\x90\x64" + ZEROS, "media:audio;ext=mp3", "confirmed"),
    ("a.flac", b"fLaC\x00\x00\x00\x22" + ZEROS, "media:audio;ext=flac", "confirmed"),
    ("a.ogg", b"OggS\x00\x02" + ZEROS, "media:audio;ext=ogg", "confirmed"),
    ("a.mp4", b"\x00\x00\x00\x18ftypisom" + ZEROS, "media:ext=mp4;video", "confirmed"),
    ("a.webm", b"\x1a\x45\xdf\xa3\x42\x82\x84webm" + ZEROS, "media:ext=webm;video", "confirmed"),
    ("a.zip", _zip(), "media:archive;ext=zip", "confirmed"),
    ("a.docx", _zip(), "media:document;ext=docx", "confirmed"),
    ("a.tar", _tar(False), "media:archive;ext=tar", "confirmed"),
    ("a.tar.gz", _tar(True), "media:archive;ext=tgz", "confirmed"),
    ("a.gz", gzip.compress(b"just text"), "media:compressed;ext=gz", "confirmed"),
    ("a.sqlite", b"SQLite format 3\x00" + ZEROS, "media:database;ext=sqlite", "confirmed"),
    ("a.txt", b"plain words\n", "media:enc=utf-8;ext=txt;plain-text", "confirmed"),
    ("a.md", b"# Title\n\nSome *text*.\n", "media:enc=utf-8;ext=md;markdown", "confirmed"),
    ("a.csv", b"a,b\n1,2\n3,4\n", "media:fmt=csv;list;record", "confirmed"),
    ("a.json", b'[{"a": 1}, {"a": 2}]', "media:fmt=json;list;record", "confirmed"),
]


@pytest.mark.parametrize(("name", "content", "media", "decided"), SIGNATURES, ids=lambda v: "")
def test_each_signature_confirms_its_extension(
    tmp_path: Path, name: str, content: bytes, media: str, decided: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    found = detect_file(path)
    assert str(found.media) == str(MediaUrn.parse(media))
    assert found.decided_by == Decision(decided)
    assert found.size == len(content)


@pytest.mark.parametrize(("name", "content", "media", "decided"), SIGNATURES, ids=lambda v: "")
def test_each_signature_is_found_without_an_extension(
    tmp_path: Path, name: str, content: bytes, media: str, decided: str
) -> None:
    path = tmp_path / "noext"
    path.write_bytes(content)
    found = detect_file(path)
    if name in ("a.txt", "a.md"):
        assert str(found.media) == "media:enc=utf-8"  # the content says text, not which kind
    elif name == "a.docx":
        assert str(found.media) == "media:archive;ext=zip"  # a zip, inside unknown
    elif name == "a.gz":
        assert str(found.media) == "media:compressed;ext=gz"
    else:
        assert found.media == MediaUrn.parse(media)
    assert found.decided_by is Decision.CONTENT


@pytest.mark.parametrize(
    ("name", "content", "media", "decided"),
    [
        # a PNG saved as .txt: the content corrects the extension
        ("photo.txt", b"\x89PNG\r\n\x1a\n" + ZEROS, "media:ext=png;image", "content"),
        # a zip called .pdf
        ("report.pdf", _zip(), "media:archive;ext=zip", "content"),
        # text called .png: the signature every PNG starts with is missing
        ("image.png", b"not an image at all\n", "media:enc=utf-8", "content"),
        # random bytes called .png: refuted, and nothing else is known
        ("image.png", b"\x01\x02\x03\x00\x04" * 20, "media:", "content"),
        # random bytes called .mp3: MP3 frames may start late, so the extension stands
        ("song.mp3", b"\x01\x02\x03\x00\x04" * 20, "media:audio;ext=mp3", "extension"),
        # binary called .txt
        ("notes.txt", b"\x00\x01\x02\x03" * 10, "media:", "content"),
        # text in an 8-bit encoding called .txt: left to the extension
        (
            "latin.txt",
            "caf\u00e9 cr\u00e8me\n".encode("latin-1"),
            "media:enc=utf-8;ext=txt;plain-text",
            "extension",
        ),
        # a .json that is not JSON
        ("data.json", b"hello, this is prose\n", "media:enc=utf-8", "content"),
        # JSON's top-level value refines what the extension claims
        ("one.json", b'{"a": 1}', "media:fmt=json;record", "content"),
        ("nums.json", b"[1, 2, 3]", "media:fmt=json;list", "content"),
        ("flag.json", b"true", "media:fmt=json", "content"),
        # an extension nobody signs: what it claims stands
        ("voice.aac", b"\xff\xf1\x50\x80" + ZEROS, "media:audio;ext=aac", "extension"),
        # an unknown extension: the content decides, text keeps its extension
        ("tool.py", b"print('hi')\n", "media:enc=utf-8;ext=py", "content"),
        ("blob.bin", b"\x00\x01\x02\x03" * 10, "media:", "content"),
        ("table.dat", b"name,age\nann,3\nbob,4\n", "media:fmt=csv;list;record", "content"),
        ("table.dat", b"name\tage\nann\t3\nbob\t4\n", "media:fmt=tsv;list;record", "content"),
        ("wide.dat", b"a,b,c\n1,2,3\n", "media:fmt=csv;list;record", "content"),
        # prose with a comma on each line is not a table
        (
            "letter",
            b"Dear Ann, I hope this finds you well\nSee you soon, Bob\n",
            "media:enc=utf-8",
            "content",
        ),
        ("short", b"a,b\n1,2\n", "media:enc=utf-8", "content"),  # two rows of two: too little
        ("rows", b'{"a": 1, "b": 2}\n{"a": 3, "b": 4}\n', "media:fmt=jsonl;list;record", "content"),
        ("page", b"<!DOCTYPE html><html></html>", "media:enc=utf-8;ext=html", "content"),
        # text that mentions %PDF- is not a PDF
        (
            "about.txt",
            b"A PDF file starts with %PDF-1.7\n",
            "media:enc=utf-8;ext=txt;plain-text",
            "confirmed",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and "." in v else "",
)
def test_content_confirms_or_corrects_the_extension(
    tmp_path: Path, name: str, content: bytes, media: str, decided: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    found = detect_file(path)
    assert (str(found.media), found.decided_by) == (str(MediaUrn.parse(media)), Decision(decided))


def test_an_empty_file_is_its_extension_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty.pdf").write_bytes(b"")
    (tmp_path / "empty").write_bytes(b"")
    pdf = detect_file(tmp_path / "empty.pdf")
    assert (str(pdf.media), pdf.decided_by, pdf.size) == (
        "media:document;ext=pdf",
        Decision.EXTENSION,
        0,
    )
    bare = detect_file(tmp_path / "empty")
    assert (str(bare.media), bare.decided_by) == ("media:", Decision.EXTENSION)


def test_extension_rules(tmp_path: Path) -> None:
    for name, media in [
        ("B.PDF", "media:document;ext=pdf"),  # lower-cased
        ("n.pdf.txt", "media:enc=utf-8;ext=txt;plain-text"),  # the last dot
        (".hidden", "media:enc=utf-8"),  # a leading dot is no extension
    ]:
        content = b"%PDF-1.4\n" if name == "B.PDF" else b"some text\n"
        (tmp_path / name).write_bytes(content)
        assert str(detect_media(tmp_path / name)) == media, name


class _ReadSpy:
    """Counts the bytes ``os.read`` hands back while installed."""

    def __init__(self) -> None:
        self.calls = 0
        self.total = 0
        self.real = os.read

    def __call__(self, fd: int, n: int) -> bytes:
        self.calls += 1
        data = self.real(fd, n)
        self.total += len(data)
        return data


def test_a_huge_sparse_file_is_read_only_at_its_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "huge.png"
    with path.open("wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n")
        handle.truncate(8 << 30)  # 8 GiB, sparse
    spy = _ReadSpy()
    monkeypatch.setattr(os, "read", spy)
    found = detect_file(path)
    monkeypatch.undo()
    assert found.media == MediaUrn.parse("media:ext=png;image")
    assert found.decided_by is Decision.CONFIRMED
    assert found.size == 8 << 30
    assert 0 < spy.total <= SNIFF_BYTES


def test_a_large_json_array_is_judged_by_its_first_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "rows.json"
    path.write_bytes(b"[" + b",".join(b'{"n": %d}' % i for i in range(5000)) + b"]")
    spy = _ReadSpy()
    monkeypatch.setattr(os, "read", spy)
    found = detect_file(path)
    monkeypatch.undo()
    assert str(found.media) == "media:fmt=json;list;record"
    assert spy.total == SNIFF_BYTES < path.stat().st_size


def test_a_declared_media_urn_wins_and_nothing_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "photo.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + ZEROS)
    spy = _ReadSpy()
    monkeypatch.setattr(os, "read", spy)
    found = detect_file(path, declared="media:enc=utf-8;x=1")
    monkeypatch.undo()
    assert found.media == MediaUrn.parse("media:enc=utf-8;x=1")
    assert found.decided_by is Decision.DECLARED
    assert spy.calls == 0
    urn = MediaUrn.parse("media:audio;ext=wav")
    assert detect_media(path, declared=urn) is urn


def test_a_declared_urn_that_does_not_parse_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("x")
    with pytest.raises(InvalidDeclaredMedia) as caught:
        detect_file(path, declared="cap:op=x")
    assert "cap:op=x" in str(caught.value)
    assert caught.value.__cause__ is not None


def test_errors_join_the_package_tree_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputNotFound) as caught:
        detect_media(tmp_path / "missing.pdf")
    error = caught.value
    assert isinstance(error, InputError) and isinstance(error, CartridgeRuntimeError)
    assert error.code is ErrorCode.INVALID_INPUT
    assert error.attribution_class is AttributionClass.INPUT
    assert str(error) == f"no such file or folder: {tmp_path / 'missing.pdf'}"
    assert "\n" not in str(error)
    with pytest.raises(InputNotFound):
        detect_media(tmp_path / "missing.pdf", declared="media:enc=utf-8")


def test_a_folder_or_a_fifo_is_unreadable_and_never_blocks(tmp_path: Path) -> None:
    with pytest.raises(InputUnreadable, match="folder"):
        detect_media(tmp_path)
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    with pytest.raises(InputUnreadable, match="not a regular file"):
        detect_media(fifo)


@given(st.binary(max_size=600), st.booleans(), st.sampled_from(["a.json", "x", "p.png", "t.txt"]))
def test_any_bytes_make_a_media_urn(head: bytes, whole: bool, name: str) -> None:
    assert sniff(head, whole=whole).kind in KINDS
    media, decision = detect_bytes(name, head, whole=whole)
    assert isinstance(media, MediaUrn) and decision in Decision


def test_the_module_is_the_read_bound_users_see() -> None:
    assert _detect.SNIFF_BYTES == SNIFF_BYTES == 8192
