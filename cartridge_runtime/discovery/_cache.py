"""The manifest cache: one small JSON file per cartridge state, named by a content digest.

Rules (chapter 15 of the protocol spec):

1. The key is a SHA-256 over everything that can change a cartridge's manifest: the entry
   file's bytes (their digest remembered by file stamp, :mod:`._digests`), the
   ``cartridge.json`` bytes, the names, sizes and modification times of the
   other files of a version folder, the command that runs it (interpreter included), and this
   package's version (DSC-9).
2. A file whose key matches is a hit: no process starts. Any other content is a miss, never an
   error; an entry is written atomically (a temporary name, then a rename) (DSC-10).
3. A start-up failure is remembered under the same key, so a broken cartridge is not started
   again until it changes (DSC-11).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Final

import attrs

from .._home import cartridge_home
from .._version import __version__
from ..manifest import Manifest, ManifestError
from ._digests import FileDigests
from ._model import RefusalKind
from ._scan import Candidate

__all__ = ("CacheEntry", "ManifestCache", "default_cache_dir", "cache_key")

#: Changes whenever the entry format does: older entries are then misses.
CACHE_FORMAT: Final = 1
#: Files of a version folder listed (name, size, time) into the key, at most: past it the
#: folder's listing is summarised by its count, so a huge folder cannot slow every discovery.
MAX_LISTED_FILES: Final = 4096


def default_cache_dir() -> Path:
    """``manifests/`` in the package's per-user home: ``$CARTRIDGE_HOME``, else
    ``$XDG_CACHE_HOME/cartridge``, else ``~/.cache/cartridge`` (beside the run records and
    the step cache)."""
    return cartridge_home() / "manifests"


def _listing(version_dir: Path, skip: set[str]) -> list[tuple[str, int, int]]:
    rows: list[tuple[str, int, int]] = []
    for folder, dirs, files in os.walk(version_dir):
        # Bytecode caches appear when a cartridge first runs: they are not a change to it.
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            if path in skip:
                continue
            try:
                info = os.stat(path)
            except OSError:
                continue
            rows.append((os.path.relpath(path, version_dir), info.st_size, info.st_mtime_ns))
            if len(rows) > MAX_LISTED_FILES:
                return rows
    return rows


def cache_key(candidate: Candidate, files: FileDigests) -> str:
    """The digest a candidate's manifest is cached under (DSC-9); ``files`` gives the entry's
    and the record's content digests.

    :raises OSError: the entry or its record cannot be read.
    """
    digest = hashlib.sha256()
    header = {
        "format": CACHE_FORMAT,
        "runtime": __version__,
        "command": list(candidate.command),
        "layout": str(candidate.layout),
    }
    digest.update(json.dumps(header, sort_keys=True).encode())
    digest.update(b"\0entry\0" + files.sha256(candidate.entry).encode())
    if candidate.record_file is not None:
        digest.update(b"\0record\0" + files.sha256(candidate.record_file).encode())
        skip = {str(candidate.entry), str(candidate.record_file)}
        listing = _listing(candidate.where, skip)
        digest.update(b"\0listing\0" + json.dumps(listing).encode())
    return digest.hexdigest()


@attrs.frozen(kw_only=True)
class CacheEntry:
    """What the cache remembers of one cartridge state: its manifest, or why it did not
    start."""

    manifest: Manifest | None = attrs.field(eq=False)
    refusal: str | None = None


class ManifestCache:
    """Cache files under one folder, ``<key[:2]>/<key>.json``.

    :ivar errors: writes that failed, one line each (the cache is an optimisation: discovery
        goes on without it).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.errors: list[str] = []

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def load(self, key: str) -> CacheEntry | None:
        """The entry stored under ``key``, or ``None`` (absent, unreadable, another format or
        key, a manifest that no longer reads: all misses)."""
        try:
            data = json.loads(self._path(key).read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
            return None
        if data.get("key") != key:
            return None
        refusal = data.get("refusal")
        if isinstance(refusal, str):
            return CacheEntry(manifest=None, refusal=refusal)
        try:
            return CacheEntry(manifest=Manifest.from_dict(data.get("manifest")))
        except ManifestError:
            return None

    def store(self, key: str, entry: CacheEntry, *, entry_path: Path) -> None:
        """Write an entry atomically (DSC-10); a failure is recorded in :attr:`errors`."""
        body: dict[str, Any] = {"format": CACHE_FORMAT, "key": key, "entry": str(entry_path)}
        if entry.manifest is not None:
            body["manifest"] = entry.manifest.to_json()
        else:
            body["refusal"] = entry.refusal or str(RefusalKind.HANDSHAKE_FAILED)
        target = self._path(key)
        temp: str | None = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=target.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(body, handle)
            os.replace(temp, target)
            temp = None
        except OSError as exc:
            self.errors.append(f"{target}: {exc.strerror or exc}")
        finally:
            if temp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
