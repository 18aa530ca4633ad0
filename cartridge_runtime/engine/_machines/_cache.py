"""The step cache on disk: content-addressed blobs, one small entry per cached call.

Rules (MCH-22, MCH-23):

1. Every file lands under its final name by a rename from ``tmp/``: a blob is written whole,
   then renamed to ``blobs/ab/<sha256>``; the entry naming the blobs is written last, then
   renamed to ``entries/ab/<key>.json``. A crash at any moment leaves at most files in
   ``tmp/``, never an entry whose blobs are missing or short.
2. An entry is used only when it parses and each of its blobs has the size it records;
   anything else is a miss. Concurrent runs may share a store: equal blobs are equal bytes,
   so a blob already in place is kept rather than renamed over.
3. A stream that repeats the stream its call's input came from, stored in the same run, is
   compared with it instead of written; ending equal, its blob is that one, hard-linked into
   place from the complete temporary file if it is not there yet (:mod:`._cache_follow`).
   The same holds for a run's input file (copied into place by the kernel, never linked) and
   a blob a hit replays (in place already). Writing is :mod:`._cache_write`'s.

Layout::

    DIR/blobs/ab/abcdef...      one output stream's content
    DIR/entries/12/1234....json  {"format", "key", "cap", "step", "created", "outputs": [...]}
    DIR/tmp/                     files being written
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import IO, Final

import attrs
import cbor2

from .._errors import EngineError
from ._cache_key import InputDigest
from ._cache_tmp import TempOwner, sweep
from ._cache_write import EntryWriter, StoredOutput

__all__ = ("CacheStore", "CacheEntry", "StoredOutput", "EntryWriter", "CacheError")

#: The entry format this code writes and reads.
ENTRY_FORMAT: Final = 1


class CacheError(EngineError):
    """A step cache folder cannot be used (not a folder, not writable)."""


@attrs.frozen(kw_only=True)
class CacheEntry:
    """A cached call: its key, what it was, and its output streams in the order they opened."""

    key: str
    cap: str
    step: str
    created: float
    outputs: tuple[StoredOutput, ...]
    path: Path = attrs.field(eq=False, repr=False)

    @property
    def size(self) -> int:
        return sum(o.size for o in self.outputs)


class CacheStore:
    """A step cache folder (see the module docstring); ``lookup=False`` stores without ever
    replaying (a run that records for a later ``--resume``).

    :raises CacheError: the folder cannot be made or written.
    """

    def __init__(self, root: str | os.PathLike[str], *, lookup: bool = True) -> None:
        self.root = Path(root).expanduser()
        self.lookup_enabled = lookup
        self._owner = TempOwner(self.root / "tmp")
        try:
            for sub in ("blobs", "entries", "files", "tmp"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise CacheError(f"step cache {self.root}: {error.strerror or error}") from None

    def __repr__(self) -> str:
        return f"CacheStore({str(self.root)!r})"

    # -- paths ------------------------------------------------------------------------------

    def blob_path(self, sha256: str) -> Path:
        return self.root / "blobs" / sha256[:2] / sha256

    def _entry_path(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / f"{key}.json"

    # -- reading ----------------------------------------------------------------------------

    def lookup(self, key: str) -> CacheEntry | None:
        """The usable entry of ``key``, or None (module rule 2). A hit refreshes the entry's
        time, which ``gc`` keeps the most recent of."""
        if not self.lookup_enabled:
            return None
        path = self._entry_path(key)
        entry = self._read(path)
        if entry is None or entry.key != key:
            return None
        for out in entry.outputs:
            try:
                if self.blob_path(out.blob).stat().st_size != out.size:
                    return None
            except OSError:
                return None
        with contextlib.suppress(OSError):
            os.utime(path)
        return entry

    def _read(self, path: Path) -> CacheEntry | None:
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
            if obj.get("format") != ENTRY_FORMAT:
                return None
            return CacheEntry(
                key=str(obj["key"]),
                cap=str(obj["cap"]),
                step=str(obj.get("step", "")),
                created=float(obj["created"]),
                outputs=tuple(StoredOutput.from_json(o) for o in obj["outputs"]),
                path=path,
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError, cbor2.CBORDecodeError):
            return None

    def entries(self) -> list[CacheEntry]:
        """Every readable entry, the most recently used first."""
        found: list[tuple[float, CacheEntry]] = []
        for path in (self.root / "entries").glob("*/*.json"):
            entry = self._read(path)
            if entry is not None:
                with contextlib.suppress(OSError):
                    found.append((path.stat().st_mtime, entry))
        found.sort(key=lambda pair: pair[0], reverse=True)
        return [entry for _, entry in found]

    def size(self) -> int:
        """Bytes the blobs take."""
        total = 0
        for path in (self.root / "blobs").glob("*/*"):
            with contextlib.suppress(OSError):
                total += path.stat().st_size
        return total

    # -- writing ----------------------------------------------------------------------------

    def writer(self, cap: str, step: str) -> EntryWriter:
        return EntryWriter(self, cap, step)

    def commit(self, key: str, cap: str, step: str, outputs: list[StoredOutput]) -> None:
        """Write the entry of ``key`` (its blobs already in place)."""
        body = {
            "format": ENTRY_FORMAT,
            "key": key,
            "cap": cap,
            "step": step,
            "created": time.time(),
            "outputs": [o.to_json() for o in outputs],
        }
        final = self._entry_path(key)
        final.parent.mkdir(exist_ok=True)
        self._place(json.dumps(body, indent=1).encode("utf-8"), final)

    def _place(self, data: bytes, final: Path) -> None:
        f, temp = self.new_temp("entry")
        try:
            with f:
                f.write(data)
            os.replace(temp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    def new_temp(self, kind: str = "blob") -> tuple[IO[bytes], Path]:
        """A new file in ``tmp/``, owned by this store object (``gc`` leaves it while the
        object lives, and removes it once its process died, MCH-30)."""
        return self._owner.new_file(kind)

    # -- input files -------------------------------------------------------------------------

    @staticmethod
    def _file_key(path: Path) -> str | None:
        try:
            real = os.path.realpath(path)
            st = os.stat(real)
        except OSError:
            return None
        facts = f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_dev}"
        return hashlib.sha256(facts.encode("utf-8", "surrogateescape")).hexdigest()

    def file_digest(self, path: Path) -> InputDigest | None:
        """The digest of an input file hashed before, known by its path, size, modification
        time and inode (a file changed since is hashed again)."""
        key = self._file_key(path)
        if key is None:
            return None
        try:
            obj = json.loads((self.root / "files" / key[:2] / f"{key}.json").read_text())
            return InputDigest.from_json(obj)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def remember_file(self, path: Path, digest: InputDigest) -> None:
        key = self._file_key(path)
        if key is None:
            return
        final = self.root / "files" / key[:2] / f"{key}.json"
        with contextlib.suppress(OSError):
            final.parent.mkdir(exist_ok=True)
            self._place(json.dumps(digest.to_json()).encode("utf-8"), final)

    # -- upkeep -----------------------------------------------------------------------------

    def clear(self) -> None:
        """Remove every entry and blob (files being written by a live run are left)."""
        for sub in ("entries", "blobs", "files"):
            shutil.rmtree(self.root / sub, ignore_errors=True)
            (self.root / sub).mkdir(exist_ok=True)

    def gc(self, max_size: int | None = None, *, temp_age: float = 3600.0) -> tuple[int, int]:
        """Remove the temporary files of writers that are gone (a run killed mid-blob, MCH-30;
        files that name no writer once older than ``temp_age`` seconds), blobs no entry names,
        then the least recently used entries until the blobs take at most ``max_size`` bytes.
        Returns ``(entries removed, bytes freed)``."""
        removed = 0
        freed = sweep(self.root / "tmp", temp_age)
        entries = self.entries()
        if max_size is not None:
            # Keep the most recently used entries whose blobs fit (shared blobs counted once).
            kept: list[CacheEntry] = []
            held: set[str] = set()
            total = 0
            for entry in entries:
                extra = sum(o.size for o in entry.outputs if o.blob not in held)
                if total + extra <= max_size:
                    kept.append(entry)
                    held.update(o.blob for o in entry.outputs)
                    total += extra
                else:
                    with contextlib.suppress(OSError):
                        entry.path.unlink()
                        removed += 1
            entries = kept
        named = {o.blob for entry in entries for o in entry.outputs}
        for path in (self.root / "blobs").glob("*/*"):
            if path.name not in named:
                with contextlib.suppress(OSError):
                    size = path.stat().st_size
                    path.unlink()
                    freed += size
        return removed, freed
