#!/usr/bin/env python3
"""``archive``: a bundled cartridge that lists and extracts zip and tar archives.

Caps (first alias → what it does):

* ``list`` — one sequence item per entry (its name), with per-item meta
  ``{"size": bytes, "type": "file"|"dir"|"symlink"|"other", "mtime": epoch seconds}``; the
  output stream's meta says ``{"format": "zip"|"tar"}``.
* ``extract NAME`` — the bytes of the entry called ``NAME`` (position 0), streamed out in
  pieces. A name the archive does not hold is the error ``ENTRY_NOT_FOUND``, class ``input``,
  naming the entry, with ``arg_urn`` = :data:`ENTRY_NAME` (the argument that caused it).

The format is detected from the content, not from the media URN: zip by its local-header or
end-of-directory signature, tar (plain, gzip, bzip2 or xz compressed) by ``tarfile``'s own
probing. The caps accept ``media:archive``; a requester may send a more specific URN such as
``media:archive;ext=zip`` — it is not *equivalent* to ``media:archive``, so the handler uses
the fallback lookup of the handler guide (``find_stream`` for the declared URN, else the first
stream that is not a side argument). Anything else is ``NOT_AN_ARCHIVE`` (class ``input``).

Zip timestamps carry no time zone; they are read as UTC. Standard library only.
"""

from __future__ import annotations

import calendar
import io
import tarfile
import zipfile
from collections.abc import Iterator
from typing import IO, Any, Final

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

#: A zip or tar archive (the main input); the format is detected from the bytes.
ARCHIVE: Final = "media:archive"
#: The name of one entry (UTF-8 text), as ``list`` prints it.
ENTRY_NAME: Final = "media:archive-entry-name;enc=utf-8"
#: One item per entry: the entry's name (UTF-8 text).
ENTRY_LIST: Final = "media:archive-entry;enc=utf-8;list"
#: The bytes of one extracted entry.
ENTRY_BYTES: Final = "media:archive-member;binary"

CAP_LIST: Final = 'cap:in=media:archive;op=list;out="media:archive-entry;enc=utf-8;list"'
CAP_EXTRACT: Final = 'cap:in=media:archive;op=extract;out="media:archive-member;binary"'

#: How many bytes of an entry are read and written at a time while extracting.
EXTRACT_PIECE: Final = 256 * 1024

_ZIP_MAGIC: Final = (b"PK\x03\x04", b"PK\x05\x06")


class Entry:
    """One archive entry, format-independent."""

    __slots__ = ("mtime", "name", "size", "type")

    def __init__(self, name: str, size: int, kind: str, mtime: int) -> None:
        self.name = name
        self.size = size
        self.type = kind
        self.mtime = mtime

    def meta(self) -> dict[str, Any]:
        """The per-item meta of ``list``."""
        return {"size": self.size, "type": self.type, "mtime": self.mtime}


class Archive:
    """A zip or tar archive held in memory, opened by content."""

    def __init__(self, data: bytes) -> None:
        self.format: str
        self._zip: zipfile.ZipFile | None = None
        self._tar: tarfile.TarFile | None = None
        if data[:4] in _ZIP_MAGIC:
            try:
                self._zip = zipfile.ZipFile(io.BytesIO(data))
                self.format = "zip"
                return
            except (zipfile.BadZipFile, OSError, ValueError) as exc:
                raise _not_an_archive(f"a damaged zip archive: {exc}") from None
        try:
            # an in-memory archive holds no OS resource; it lives as long as the request
            self._tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")  # noqa: SIM115
            self.format = "tar"
        except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
            raise _not_an_archive(f"neither a zip nor a tar archive ({exc})") from None

    def entries(self) -> Iterator[Entry]:
        """Every entry, in archive order.

        :raises OpError: ``NOT_AN_ARCHIVE`` when the archive breaks while being read.
        """
        try:
            if self._zip is not None:
                for info in self._zip.infolist():
                    kind = "dir" if info.is_dir() else ("symlink" if _zip_symlink(info) else "file")
                    yield Entry(info.filename, info.file_size, kind, _zip_mtime(info))
            else:
                assert self._tar is not None
                for member in self._tar:
                    yield Entry(member.name, member.size, _tar_kind(member), int(member.mtime))
        except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as exc:
            raise _not_an_archive(f"the archive is damaged: {exc}") from None

    def open(self, name: str) -> IO[bytes]:
        """A reader of the regular file ``name``.

        :raises OpError: ``ENTRY_NOT_FOUND`` (no such entry) or ``NOT_A_FILE`` (a directory,
            link or device), class ``input``, ``arg_urn`` = :data:`ENTRY_NAME`.
        """
        known = {entry.name: entry for entry in self.entries()}
        entry = known.get(name) or known.get(name.rstrip("/") + "/")
        if entry is None:
            raise OpError(
                "ENTRY_NOT_FOUND",
                f"the archive has no entry named {name!r}",
                "input",
                ENTRY_NAME,
            )
        if entry.type != "file":
            raise OpError(
                "NOT_A_FILE",
                f"entry {name!r} is a {entry.type}, not a file; only files can be extracted",
                "input",
                ENTRY_NAME,
            )
        if self._zip is not None:
            return self._zip.open(entry.name)
        assert self._tar is not None
        reader = self._tar.extractfile(entry.name)
        assert reader is not None  # a regular file always has a reader
        return reader


def _not_an_archive(detail: str) -> OpError:
    return OpError("NOT_AN_ARCHIVE", f"the input is {detail}", "input", ARCHIVE)


def _zip_mtime(info: zipfile.ZipInfo) -> int:
    return calendar.timegm((*info.date_time, 0, 0, 0))


def _zip_symlink(info: zipfile.ZipInfo) -> bool:
    return (info.external_attr >> 16) & 0o170000 == 0o120000


def _tar_kind(member: tarfile.TarInfo) -> str:
    if member.isfile():
        return "file"
    if member.isdir():
        return "dir"
    if member.issym() or member.islnk():
        return "symlink"
    return "other"


async def read_archive(package: InputPackage) -> Archive:
    """The archive of the request: the stream equivalent to :data:`ARCHIVE`, else the first
    stream that is not the entry name (the fallback lookup)."""
    data = await package.find_stream(ARCHIVE)
    if data is None:
        for urn, candidate in await package.collect_streams():
            if not media_matches_for_stream(ENTRY_NAME, urn):
                data = candidate
                break
    if data is None:
        raise OpError("MISSING_INPUT", "no archive arrived", "input", ARCHIVE)
    return Archive(data)


class ListEntries(Op):
    """The entries of a zip or tar archive, one sequence item each, with size/type/mtime meta."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        archive = await read_archive(req.take_input())
        out = req.output()
        await out.start(is_sequence=True, meta={"format": archive.format})
        count = 0
        for entry in archive.entries():
            await out.emit_text(entry.name, meta=entry.meta())
            count += 1
        req.finish(1.0, f"{count} entr{'y' if count == 1 else 'ies'} ({archive.format})")


class ExtractEntry(Op):
    """The bytes of one archive entry, by name."""

    async def perform(self, dry: DryContext, wet: WetContext) -> None:
        req = wet.request
        package = req.take_input()
        raw_name = await package.require_stream(ENTRY_NAME)
        try:
            name = raw_name.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise OpError(
                "INVALID_NAME", "the entry name is not UTF-8", "input", ENTRY_NAME
            ) from None
        if not name:
            raise OpError("INVALID_NAME", "the entry name is empty", "input", ENTRY_NAME)
        archive = await read_archive(package)
        out = req.output()
        with archive.open(name) as reader:
            while piece := reader.read(EXTRACT_PIECE):
                await out.write(piece)
        await out.close()


MANIFEST: Final = Manifest.build(
    name="archive",
    version="1.0.0",
    description="List and extract the entries of zip and tar archives.",
    caps=[
        CapDef.simple(
            CAP_LIST,
            "List archive entries",
            aliases=("list",),
            description="The entries of a zip or tar(.gz) archive, one sequence item each.",
            input_description="a zip or tar archive (gzip, bzip2 and xz tars too)",
            output_name="entries",
            output_description="one item per entry (its name); meta size, type, mtime",
            output_is_sequence=True,
        ),
        CapDef.simple(
            CAP_EXTRACT,
            "Extract one archive entry",
            aliases=("extract",),
            description="The bytes of the entry with the given name.",
            input_description="a zip or tar archive",
            output_name="content",
            output_description="the entry's bytes",
            extra_args=[
                ArgDef.positional(
                    ENTRY_NAME, 0, name="name", description="the entry's name, as list prints it"
                )
            ],
        ),
    ],
)


def build_runtime() -> CartridgeRuntime:
    """The cartridge: :data:`MANIFEST` with both handlers registered."""
    runtime = CartridgeRuntime(MANIFEST)
    runtime.register_op(CAP_LIST, ListEntries)
    runtime.register_op(CAP_EXTRACT, ExtractEntry)
    return runtime


if __name__ == "__main__":
    build_runtime().run()
