"""Content digests of entry files, remembered by each file's stamp, so a warm discovery does
not read a large unchanged entry again (DSC-9).

A stamp is the file's device, inode, size, modification time and change time (nanoseconds).
Writing a file changes its change time, which no program can set back, so a file whose stamp is
unchanged has unchanged bytes and its SHA-256 is reused; any other file is read and hashed.
The memo is one JSON file in the cache folder, read once per discovery and written once
(atomically) when it changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Final

__all__ = ("FileDigests", "MEMO_FILE")

#: The memo's file name in the cache folder.
MEMO_FILE: Final = "digests.json"
#: Files remembered at most; past it only this discovery's files are kept.
MAX_REMEMBERED: Final = 20_000
_BLOCK: Final = 1 << 20


def _stamp(info: os.stat_result) -> list[int]:
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


class FileDigests:
    """SHA-256 of files, from the memo when a file's stamp is unchanged.

    :param folder: where the memo lives; ``None``: nothing is remembered.
    :ivar hashed: files read and hashed by this object (the others came from the memo).
    """

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.hashed = 0
        self._rows: dict[str, list[object]] = {}
        self._seen: set[str] = set()
        self._changed = False
        if folder is not None:
            try:
                rows = json.loads((folder / MEMO_FILE).read_bytes())
            except (OSError, ValueError):
                rows = {}
            if isinstance(rows, dict):
                self._rows = {k: v for k, v in rows.items() if isinstance(v, list) and len(v) == 2}

    def sha256(self, path: Path) -> str:
        """The SHA-256 of a file's bytes.

        :raises OSError: the file cannot be read.
        """
        key = os.path.abspath(path)
        self._seen.add(key)
        with path.open("rb") as handle:
            stamp = _stamp(os.fstat(handle.fileno()))
            row = self._rows.get(key)
            if row is not None and row[0] == stamp and isinstance(row[1], str):
                return row[1]
            digest = hashlib.sha256()
            while block := handle.read(_BLOCK):
                digest.update(block)
        self.hashed += 1
        self._rows[key] = [stamp, digest.hexdigest()]
        self._changed = True
        return digest.hexdigest()

    def save(self) -> str | None:
        """Write the memo when it changed (atomically); the reason when it could not be."""
        if self.folder is None or not self._changed:
            return None
        rows = self._rows
        if len(rows) > MAX_REMEMBERED:
            rows = {k: v for k, v in rows.items() if k in self._seen}
        temp: str | None = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=".digests.", suffix=".tmp", dir=self.folder)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(rows, handle)
            os.replace(temp, self.folder / MEMO_FILE)
            temp = None
        except OSError as exc:
            return f"{self.folder / MEMO_FILE}: {exc.strerror or exc}"
        finally:
            if temp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
        self._changed = False
        return None
