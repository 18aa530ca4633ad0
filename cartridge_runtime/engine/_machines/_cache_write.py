"""A cached call's outputs on their way into the step cache (see :mod:`._cache` for the store).

Each output stream goes to a temporary file of the store as it comes, hashed on the way, and
a :class:`EntryWriter` commits them: blobs renamed into place, the entry written last. A
``bytes`` stream that repeats its call's input (a stream stored in the same run, a run's input
file, a replayed blob) writes nothing while it does (:mod:`._cache_follow`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Final, Protocol

import attrs
import cbor2

from ._cache_follow import Follower, Leader, copy_file
from ._cache_key import InputDigest, PieceHasher, item_bytes

__all__ = ("EntryWriter", "StoredOutput", "WRITE_AHEAD")

#: Pieces a call may run ahead of its writer thread before it waits for it.
WRITE_AHEAD: Final = 8
#: Held while a blob is copied in from a file outside the store (one copy per blob).
_PLACING: Final = threading.Lock()


class _Store(Protocol):
    """What a writer needs of its store (a ``CacheStore``)."""

    def blob_path(self, sha256: str) -> Path: ...

    def new_temp(self, kind: str = "blob") -> tuple[IO[bytes], Path]: ...

    def commit(self, key: str, cap: str, step: str, outputs: list[StoredOutput]) -> None: ...


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
        store: _Store,
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
        #: Still following without having waited: handled in the call's thread (no queue).
        self.inline = self.follower is not None
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
                if is_bytes and self.kind == "bytes" and self._followed(value, wait=True):
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

    def follow_now(self, value: Any) -> bool:
        """Take a piece that repeats the leader's bytes, written already, without waiting;
        False (nothing changed) when it does not, or may not yet: :meth:`write` then takes it."""
        if self.follower is None or self.kind == "values":
            return False
        if not isinstance(value, bytes | bytearray | memoryview):
            return False
        if not self._followed(value, wait=False):
            return False
        self.kind = "bytes"
        return True

    def _followed(self, value: Any, *, wait: bool) -> bool:
        follower = self.follower
        assert follower is not None
        if not follower.match(value, wait=wait):
            return False
        n = _length(value)
        self.size += n
        if self.lead.path is None:
            self.lead.at(follower.leader.path, follower.leader.external)  # type: ignore[arg-type]
        self.lead.advanced(n)
        return True

    def end_now(self) -> bool:
        """End a stream that repeated its leader to the end, without waiting; False when it
        did not (or may not have): :meth:`end` then settles it."""
        if self.follower is None:
            return False
        same = self.follower.same_at_end()
        if same is None:
            return False
        self.ended = True
        self.same = same
        self.lead.end(same)
        return True

    def _diverge(self) -> None:
        """Stop following: write (and hash) the prefix that was skipped."""
        follower = self.follower
        assert follower is not None
        self.follower = None
        self.lead.stop()  # the bytes this stream repeated are not in its own file
        try:
            if not follower.unchanged():
                raise OSError("an input file changed while the run read it")
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

    def finish(self, store: _Store) -> StoredOutput:
        self.end()
        digest = self.digest()  # cheap: hashlib copies its state
        kind = self.kind or "bytes"
        blob = self.content.hexdigest() if kind == "values" else digest.sha256
        final = store.blob_path(blob)
        final.parent.mkdir(exist_ok=True)
        linked = False
        if self.same is not None and self.follower is not None:
            if self.follower.leader.external is not None:
                with _PLACING:  # one copy: another stream repeating the file finds it in place
                    if not _stored(final, self.size):
                        self._copy_source()
                        self.file.close()
                        os.replace(self.temp, final)
                        return self._stored(kind, blob, digest)
            linked = self._link(final)
            if not linked:
                self._diverge()  # the leader's file is gone before it was stored: copy it here
        self.file.close()
        if linked or _stored(final, self.size):
            # Equal names hold equal bytes: keep the blob in place (a rename over it would
            # make the file system flush this copy first) and drop this one.
            os.unlink(self.temp)
        else:
            os.replace(self.temp, final)
        return self._stored(kind, blob, digest)

    def _stored(self, kind: str, blob: str, digest: InputDigest) -> StoredOutput:
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

    def _copy_source(self) -> None:
        """Copy the file outside the store this stream repeated into its own temporary file
        (in the kernel: see :func:`copy_file`); never a link, the file may change in place.

        :raises OSError: it cannot be read, or it changed since it was hashed.
        """
        follower = self.follower
        assert follower is not None
        lead = follower.leader
        assert lead.path is not None and lead.external is not None
        self.file.flush()
        if not copy_file(lead.path, lead.external, self.file.fileno()):
            raise OSError(f"{lead.path} changed while the run read it")
        follower.close()
        self.follower = None

    def _link(self, final: Path) -> bool:
        """Put the leader's bytes in place as ``final`` without copying them (a hard link to
        its file); False when they are not there to link."""
        follower = self.follower
        assert follower is not None
        if follower.leader.external is not None:  # in place already (checked by the caller)
            follower.close()
            self.follower = None
            return True
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
    bounded. A stream that repeats its leader is compared in the call's own thread while the
    leader's bytes are written already (a read from the page cache and a ``memcmp``: less
    than the hop to a thread); at the first piece it would wait for, or that differs, it goes
    to the worker thread like any other.
    """

    def __init__(self, store: _Store, cap: str, step: str) -> None:
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
                    found = self._open.get(job[1])
                    if found is None:
                        pass
                    elif job[0] == "end":
                        found.end()
                    else:
                        found.write(*job[2:])
            except BaseException as error:  # kept for commit, which then stores nothing
                self._fail(error)
            finally:
                self._jobs.task_done()

    def _fail(self, error: BaseException) -> None:
        self._failure = error
        for lead in self._leads.values():
            lead.stop()  # nobody follows a writer that failed

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
        try:  # opened here, so the entry lists the streams in the order they opened
            opened = _OpenOutput(self.store, output, media_urn, is_sequence, meta, lead, follow)
        except OSError as error:  # commit then stores nothing
            self._fail(error)
            return
        self._open[stream_id] = opened
        self._order.append(opened)

    def piece(self, stream_id: str, piece: Any, value: Any, meta: Any = None) -> None:
        opened = self._open.get(stream_id)
        if opened is None or self._failure is not None:
            return
        if isinstance(value, bytes | bytearray | memoryview):
            opened.lead.handed += _length(value)  # before it can be written: counted once
        if opened.inline:
            if opened.follow_now(value):
                return
            opened.inline = False  # the worker thread takes this stream from here on
        self._submit(("piece", stream_id, piece, value, meta))

    def lead(self, stream_id: str) -> Leader | None:
        """How far a stream of this call got, for a call its output feeds."""
        return self._leads.get(stream_id)

    def digest(self, stream_id: str) -> InputDigest | None:
        """The digest of a stream that ended (what a step it feeds sees as its input)."""
        opened = self._open.get(stream_id)
        if opened is None or self._failure is not None:
            return None
        if opened.inline and opened.end_now():
            return opened.digest()
        opened.inline = False
        self._submit(("end", stream_id))
        self._jobs.join()  # the worker caught up (a few pieces at most)
        return opened.digest() if self._failure is None else None

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
