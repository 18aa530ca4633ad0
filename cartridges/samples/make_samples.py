#!/usr/bin/env python3
"""Write the sample archives ``sample.zip`` and ``sample.tar.gz`` next to this script.

The archives hold the same tiny tree (``hello.txt``, ``docs/``, ``docs/guide.md``,
``data/sample.json`` — the last two copied from the text samples here) with fixed
timestamps and no compression-time metadata, so running the script again gives
byte-identical files. The outputs are committed; run this only to change them.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent
#: Every entry's modification time: 2024-01-02 03:04:04 UTC (even: zip stores 2-second steps).
MTIME: Final = 1704164644
DATE_TIME: Final = (2024, 1, 2, 3, 4, 4)


def entries() -> list[tuple[str, bytes | None]]:
    """``(name, content)`` in archive order; ``None`` content is a directory."""
    return [
        ("hello.txt", b"Hello from the archive cartridge!\n"),
        ("docs/", None),
        ("docs/guide.md", (HERE / "sample.md").read_bytes()),
        ("data/sample.json", (HERE / "sample.json").read_bytes()),
    ]


def make_zip() -> bytes:
    """The zip archive (deflated files, one directory entry)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries():
            info = zipfile.ZipInfo(name, DATE_TIME)
            if content is None:
                info.external_attr = (0o40755 << 16) | 0x10
                archive.writestr(info, b"")
            else:
                info.external_attr = 0o100644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, content)
    return buffer.getvalue()


def make_tar_gz() -> bytes:
    """The gzip-compressed tar archive (gzip header mtime 0)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, content in entries():
            info = tarfile.TarInfo(name.rstrip("/"))
            info.mtime = MTIME
            info.uname = info.gname = "cartridge"
            if content is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                archive.addfile(info)
            else:
                info.size = len(content)
                info.mode = 0o644
                archive.addfile(info, io.BytesIO(content))
    return gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0)


def main() -> None:
    """Write both archives."""
    (HERE / "sample.zip").write_bytes(make_zip())
    (HERE / "sample.tar.gz").write_bytes(make_tar_gz())


if __name__ == "__main__":
    main()
