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
   again until it changes (DSC-11), together with a stamp of what it ran in: its
   interpreter's file, the folders its packages load from, and the environment variables that
   choose them. A failure whose stamp no longer matches is a miss: a module installed since,
   a new interpreter or a changed ``PYTHONPATH`` gets the cartridge tried again (DSC-13).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import attrs

from .._home import cartridge_home
from .._version import __version__
from ..manifest import Manifest, ManifestError
from ._digests import FileDigests
from ._model import RefusalKind
from ._scan import Candidate

__all__ = ("CacheEntry", "ManifestCache", "default_cache_dir", "cache_key", "environment_stamp")

#: Changes whenever the entry format does: older entries are then misses.
CACHE_FORMAT: Final = 1
#: Files of a version folder listed (name, size, time) into the key, at most: past it the
#: folder's listing is summarised by its count, so a huge folder cannot slow every discovery.
MAX_LISTED_FILES: Final = 4096
#: The environment variables that decide what a cartridge's interpreter loads and finds.
STAMPED_VARIABLES: Final = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "NODE_PATH")


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


def _interpreter(command: tuple[str, ...]) -> str | None:
    """The program that runs the command, as found on ``PATH`` (a link not followed: a
    virtual environment's interpreter is a link to its base one)."""
    if not command:
        return None
    found = shutil.which(command[0]) or command[0]
    return os.path.abspath(found) if os.path.exists(found) else None


def _package_folders(interpreter: str) -> Iterator[str]:
    """The folders an interpreter's packages load from: this process's path for its own
    interpreter, else the usual places under the prefixes of the interpreter and of the file
    it links to."""
    if os.path.realpath(interpreter) == os.path.realpath(sys.executable):
        yield from (entry for entry in sys.path if entry and os.path.isdir(entry))
        return
    for program in (interpreter, os.path.realpath(interpreter)):
        prefix = os.path.dirname(os.path.dirname(program))
        for pattern in ("lib/python*/site-packages", "lib/node_modules", "Lib/site-packages"):
            yield from sorted(glob.glob(os.path.join(prefix, pattern)))


def _stat_text(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return "absent"
    return f"{info.st_size}:{info.st_mtime_ns}"


def environment_stamp(command: tuple[str, ...]) -> str:
    """A digest of what a start-up failure may have depended on outside the cartridge's own
    files: its interpreter (path, size, time), the folders its packages load from (a package
    installed or removed changes their time) and :data:`STAMPED_VARIABLES` (DSC-13)."""
    digest = hashlib.sha256()
    for name in STAMPED_VARIABLES:
        digest.update(f"{name}={os.environ.get(name, '')}\0".encode())
    for name in ("PYTHONPATH", "NODE_PATH"):
        for folder in filter(None, os.environ.get(name, "").split(os.pathsep)):
            digest.update(f"path={folder}:{_stat_text(folder)}\0".encode())
    interpreter = _interpreter(command)
    if interpreter is not None:
        real = os.path.realpath(interpreter)
        digest.update(f"interpreter={interpreter}>{real}:{_stat_text(real)}\0".encode())
        for folder in dict.fromkeys(_package_folders(interpreter)):
            digest.update(f"folder={folder}:{_stat_text(folder)}\0".encode())
    return digest.hexdigest()


@attrs.frozen(kw_only=True)
class CacheEntry:
    """What the cache remembers of one cartridge state: its manifest, or why it did not
    start."""

    manifest: Manifest | None = attrs.field(eq=False)
    refusal: str | None = None
    #: With a refusal: the :func:`environment_stamp` it was refused under.
    stamp: str | None = None


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
            stamp = data.get("stamp")
            return CacheEntry(
                manifest=None, refusal=refusal, stamp=stamp if isinstance(stamp, str) else None
            )
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
            if entry.stamp is not None:
                body["stamp"] = entry.stamp
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
