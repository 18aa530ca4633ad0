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
import queue
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Final

import attrs
import cbor2

from .._errors import EngineError
from ._cache_follow import Follower, Leader
from ._cache_key import InputDigest, PieceHasher, item_bytes
from ._cache_tmp import TempOwner, sweep

__all__ = ("CacheStore", "CacheEntry", "StoredOutput", "EntryWriter", "CacheError")

#: The entry format this code writes and reads.
ENTRY_FORMAT: Final = 1
#: Pieces a call may run ahead of its writer thread before it waits for it.
WRITE_AHEAD: Final = 8


class CacheError(EngineError):
    """A step cache folder cannot be used (not a folder, not writable)."""


@attrs.frozen(kw_only=True)
class StoredOutput:
    """One output stream of a cached call.

    :ivar output: the stream's output key as the call's events named it (None: the main one).
    :ivar kind: ``bytes`` (the blob is the bytes), ``values`` (a CBOR sequence of the scalar's
        pieces) or ``items`` (a CBOR sequence of ``[value, meta]``).
    :ivar digest: the stream's value as a later step's input digest sees it.
    """

    output: str | None
    media_urn: str
    is_sequence: bool
    meta: Mapping[str, Any] | None
    kind: str
    blob: str
    size: int
    digest: InputDigest

    def to_json(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "media_urn": self.media_urn,
            "is_sequence": self.is_sequence,
            "meta_cbor": cbor2.dumps(dict(self.meta), canonical=True).hex() if self.meta else None,
            "kind": self.kind,
            "blob": self.blob,
            "size": self.size,
            "digest": self.digest.to_json(),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> StoredOutput:
        meta = obj.get("meta_cbor")
        return cls(
            output=obj["output"],
            media_urn=str(obj["media_urn"]),
            is_sequence=bool(obj["is_sequence"]),
            meta=cbor2.loads(bytes.fromhex(meta)) if meta else None,
            kind=str(obj["kind"]),
            blob=str(obj["blob"]),
            size=int(obj["size"]),
            digest=InputDigest.from_json(obj["digest"]),
        )


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


def _stored(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False


class _OpenOutput:
    """One output stream being written to a temporary file; a ``bytes`` stream may follow the
    stream its call's input came from and write nothing while it repeats it (see
    :mod:`._cache_follow`)."""

    def __init__(
        self,
        store: CacheStore,
        output: str | None,
        media_urn: str,
        is_sequence: bool,
        meta: Any,
        lead: Leader,
        follow: Leader | None,
    ) -> None:
        self.output = output
        self.media_urn = media_urn
        self.is_sequence = is_sequence
        self.meta = dict(meta) if meta else None
        self.file, self.temp = store.new_temp()
        self.hasher = PieceHasher(is_sequence)
        self.kind = "items" if is_sequence else ""  # a scalar's kind: set by its first piece
        self.content = hashlib.sha256()  # a values blob's own name (other kinds reuse the digest)
        self.size = 0
        self.unstorable = False
        self.lead = lead  #: how far this stream got, for the streams that may repeat it
        self.follower = Follower(follow) if follow is not None and not is_sequence else None
        self.same: InputDigest | None = None  #: the leader's digest, when this ended equal to it
        self.ended = False
        if self.follower is None:
            lead.at(self.temp)
        if is_sequence:
            lead.stop()

    def write(self, piece: Any, value: Any, meta: Any) -> None:
        if not self.is_sequence:
            is_bytes = isinstance(value, bytes | bytearray | memoryview)
            if not self.kind:
                self.kind = "bytes" if is_bytes else "values"
                if not is_bytes:
                    self.lead.stop()
            if self.follower is not None:
                if is_bytes and self.kind == "bytes" and self.follower.match(value):
                    self.size += _length(value)
                    if self.lead.path is None:
                        self.lead.at(self.follower.source)  # type: ignore[arg-type]
                    self.lead.advanced(_length(value))
                    return
                self._diverge()
        self.hasher.add(piece)
        if self.is_sequence:
            data = item_bytes(value, meta)
        else:
            if self.kind == "bytes":
                if not is_bytes:
                    # Bytes then another value: kept out of the cache rather than rewritten.
                    self.unstorable = True
                    self.lead.stop()
                    return
                data = value
            else:
                data = cbor2.dumps(bytes(value) if isinstance(value, bytearray | memoryview)
                                   else value, canonical=True)  # fmt: skip
                self.content.update(data)
        self.file.write(data)
        n = _length(data)
        self.size += n
        if self.kind == "bytes":
            self.file.flush()  # a follower reads these bytes back from the file
            self.lead.advanced(n)

    def _diverge(self) -> None:
        """Stop following: write (and hash) the prefix that was skipped."""
        follower = self.follower
        assert follower is not None
        self.follower = None
        self.lead.stop()  # the bytes this stream repeated are not in its own file
        try:
            for block in follower.prefix():
                self.hasher.add(block)
                self.file.write(block)
        finally:
            follower.close()

    def end(self) -> None:
        """The stream ended (all its pieces written): settle whether it repeated its leader."""
        if self.ended:
            return
        self.ended = True
        if self.follower is not None:
            self.same = self.follower.same_at_end()
            if self.same is None:
                self._diverge()
        self.lead.end(self.digest())

    def digest(self) -> InputDigest:
        return self.same if self.same is not None else self.hasher.digest()

    def finish(self, store: CacheStore) -> StoredOutput:
        self.end()
        digest = self.digest()  # cheap: hashlib copies its state
        kind = self.kind or "bytes"
        blob = self.content.hexdigest() if kind == "values" else digest.sha256
        final = store.blob_path(blob)
        final.parent.mkdir(exist_ok=True)
        linked = self.same is not None and self._link(final)
        if self.same is not None and not linked:
            self._diverge()  # the leader's file is gone before it was stored: copy it here
        self.file.close()
        if linked or _stored(final, self.size):
            # Equal names hold equal bytes: keep the blob in place (a rename over it would
            # make the file system flush this copy first) and drop this one.
            os.unlink(self.temp)
        else:
            os.replace(self.temp, final)
        return StoredOutput(
            output=self.output,
            media_urn=self.media_urn,
            is_sequence=self.is_sequence,
            meta=self.meta,
            kind=kind,
            blob=blob,
            size=self.size,
            digest=digest,
        )

    def _link(self, final: Path) -> bool:
        """Put the leader's bytes in place as ``final`` without copying them (a hard link to
        its file); False when they are not there to link."""
        follower = self.follower
        assert follower is not None
        for _ in range(2):
            if _stored(final, self.size):
                break
            source = follower.source
            try:
                if source is None:
                    return False
                os.link(source, final)
                break
            except FileExistsError:
                continue  # placed meanwhile: check its size
            except OSError:
                if not _stored(final, self.size):
                    return False
                break
        else:
            return False
        follower.close()
        self.follower = None
        return True

    def discard(self) -> None:
        self.lead.stop()
        if self.follower is not None:
            self.follower.close()
        with contextlib.suppress(OSError):
            self.file.close()
        with contextlib.suppress(OSError):
            self.temp.unlink()


def _length(data: Any) -> int:
    return data.nbytes if isinstance(data, memoryview) else len(data)


class EntryWriter:
    """The outputs of one call on their way into the store: each stream to a temporary file
    as it comes, then :meth:`commit` (blobs renamed, the entry written last) or
    :meth:`discard`.

    The hashing and writing run in a worker thread of the writer's own, fed through a short
    queue, so they overlap the call's own work instead of holding up the event loop (hashlib
    and file writes release the GIL); a full queue makes the call wait, so memory stays
    bounded.
    """

    def __init__(self, store: CacheStore, cap: str, step: str) -> None:
        self.store = store
        self.cap = cap
        self.step = step
        self._open: dict[str, _OpenOutput] = {}
        self._order: list[_OpenOutput] = []
        self.unstorable = False
        self._jobs: queue.Queue[tuple[Any, ...] | None] = queue.Queue(maxsize=WRITE_AHEAD)
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        #: Per stream, how far it got (made here, in the call's thread, when it opens).
        self._leads: dict[str, Leader] = {}
        #: The streams this call's inputs come from while they are stored too: its first
        #: ``bytes`` output may repeat the first of them (see :mod:`._cache_follow`).
        self.follows: list[Leader] = []

    def _submit(self, job: tuple[Any, ...]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="step-cache", daemon=True)
            self._thread.start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if self._failure is None:
                    if job[0] == "start":
                        opened = _OpenOutput(self.store, *job[2:])
                        self._open[job[1]] = opened
                        self._order.append(opened)
                    else:
                        found = self._open.get(job[1])
                        if found is None:
                            pass
                        elif job[0] == "end":
                            found.end()
                        else:
                            found.write(*job[2:])
            except BaseException as error:  # kept for commit, which then stores nothing
                self._failure = error
                for lead in self._leads.values():
                    lead.stop()  # nobody follows a writer that failed
            finally:
                self._jobs.task_done()

    def _stop(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None

    def started(
        self, stream_id: str, output: str | None, media_urn: str, is_sequence: bool, meta: Any
    ) -> None:
        lead = self._leads[stream_id] = Leader()
        follow = None
        if not is_sequence and self.follows:
            follow = self.follows.pop(0)
        self._submit(("start", stream_id, output, media_urn, is_sequence, meta, lead, follow))

    def piece(self, stream_id: str, piece: Any, value: Any, meta: Any = None) -> None:
        self._submit(("piece", stream_id, piece, value, meta))
        if isinstance(value, bytes | bytearray | memoryview):
            lead = self._leads.get(stream_id)
            if lead is not None:
                lead.handed += _length(value)  # counted once in the queue

    def lead(self, stream_id: str) -> Leader | None:
        """How far a stream of this call got, for a call its output feeds."""
        return self._leads.get(stream_id)

    def digest(self, stream_id: str) -> InputDigest | None:
        """The digest of a stream that ended (what a step it feeds sees as its input)."""
        self._submit(("end", stream_id))
        self._jobs.join()  # the worker caught up (a few pieces at most)
        opened = self._open.get(stream_id)
        return opened.digest() if opened is not None else None

    def commit(self, key: str) -> bool:
        """Store the entry under ``key``; False (nothing stored) when a stream could not be."""
        self._stop()
        if self._failure is not None or self.unstorable or any(o.unstorable for o in self._order):
            self.discard()
            return False
        try:
            stored = [o.finish(self.store) for o in self._order]
            self.store.commit(key, self.cap, self.step, stored)
        except OSError:
            self.discard()
            return False
        return True

    def discard(self) -> None:
        self._stop()
        for lead in self._leads.values():
            lead.stop()
        for opened in self._order:
            opened.discard()
