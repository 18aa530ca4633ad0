"""The step cache inside a run: which calls it takes, who serves them, hits replayed, misses
recorded.

A :class:`StepCache` lives for one run. For a step it may cache (the step's policy allows it
and its cap is not marked non-deterministic, MCH-24) it names the serving cartridge by an
identity (MCH-20) and turns the call's input digests into a key. A hit becomes a response read
from disk (:func:`replay`), with the same events a call yields; a miss wraps the real response
(:class:`Recording`) so each output stream goes to the store as it passes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
import cbor2

from ...machine import Step
from ...manifest import CapDef
from .._events import CallEvent, Item, OutputData, OutputEnded, OutputItem, OutputStarted
from ._cache import CacheEntry, CacheStore, EntryWriter, StoredOutput
from ._cache_key import InputDigest, PieceHasher, step_key

if TYPE_CHECKING:
    from ._step_call import CallInputs

__all__ = (
    "DETERMINISTIC_KEY",
    "StepCache",
    "Recording",
    "cartridge_identity",
    "is_deterministic",
    "replay",
    "open_call",
    "store_call",
)

#: The cap metadata key a manifest sets to ``"false"`` for a cap whose outputs may differ
#: between two calls with the same inputs: such a cap is never cached.
DETERMINISTIC_KEY: Final = "deterministic"
#: Bytes per piece when a hit streams a stored scalar from disk. Each piece is a fresh buffer
#: the run's readers may hold; at 512 KiB the pieces in flight stay within the core's cache
#: (a 256 MiB replay took 15-20% less CPU than at 1 MiB, and 2 MiB took 50% more).
REPLAY_PIECE: Final = 512 * 1024
#: Seconds a read may take in the event loop before a replay reads in a worker thread.
SLOW_READ: Final = 0.002
#: Items blobs up to this size are read in one go; larger ones item by item.
SMALL_ITEMS: Final = 4 << 20
#: Where ``capdag`` installs cartridges: ``{slug}/{channel}/{name}/{version}/``.
CAPDAG_ROOT: Final = Path.home() / ".capdag" / "cartridges"


def is_deterministic(definition: CapDef) -> bool:
    """Whether a cap may be cached: its metadata does not set ``deterministic`` to false."""
    word = str(definition.metadata.get(DETERMINISTIC_KEY, "true")).strip().lower()
    return word not in ("false", "no", "0")


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb", buffering=0) as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _installed(path: Path) -> str | None:
    """``slug/channel/name/version`` of a program capdag installed (not a dev install,
    whose one version folder is overwritten in place)."""
    try:
        parts = path.resolve().relative_to(CAPDAG_ROOT.resolve()).parts
    except (OSError, ValueError):
        return None
    if len(parts) < 5 or parts[0] == "dev":
        return None
    return "/".join(parts[:4])


def cartridge_identity(command: Sequence[str], manifest_json: bytes) -> str:
    """A cartridge's identity (MCH-20): its manifest's digest, then per word of its command the
    installed version (a capdag install), the interpreter's version (this Python), the
    content digest of a file, or the word itself. Reads files: run it in a worker thread."""
    words: list[list[str]] = []
    for index, word in enumerate(command):
        if word == "<in-process>":
            words.append(["in-process"])  # the code is not a file the engine knows
            break
        path = Path(word)
        installed = _installed(path) if path.is_file() else None
        if installed is not None:
            words.append(["installed", installed])
        elif index == 0 and len(command) > 1 and _is_this_python(path):
            words.append(["python", platform.python_implementation(), platform.python_version()])
        elif path.is_file():
            words.append(["file", _file_sha256(path)])
        else:
            words.append(["word", word])
    text = json.dumps(
        {"manifest": hashlib.sha256(manifest_json).hexdigest(), "command": words},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _is_this_python(path: Path) -> bool:
    try:
        return os.path.realpath(path) == os.path.realpath(sys.executable)
    except OSError:
        return False


#: Identities computed before, by command and manifest, with the stat of each file word when
#: it was computed (a changed file is hashed again). Bounded: the oldest is dropped first.
_IDENTITIES: dict[tuple[tuple[str, ...], bytes], tuple[tuple[Any, ...], str]] = {}
_IDENTITIES_MAX: Final = 64


def _stamps(command: Sequence[str]) -> tuple[Any, ...]:
    """What says a command's files are unchanged: each word's size, times and inode (a stat,
    cheap enough for the event loop), ``None`` for a word that is not a file."""
    stamps: list[Any] = []
    for word in command:
        try:
            info = os.stat(word)
        except (OSError, ValueError):
            stamps.append(None)
            continue
        stamps.append((info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino))
    return tuple(stamps)


async def _known_identity(command: tuple[str, ...], manifest_json: bytes) -> str:
    """:func:`cartridge_identity`, hashed in a worker thread only the first time (or when a
    file of the command changed): a warm run does not wait for a thread per cartridge."""
    stamps = _stamps(command)
    known = _IDENTITIES.get((command, manifest_json))
    if known is not None and known[0] == stamps:
        return known[1]
    identity = await anyio.to_thread.run_sync(cartridge_identity, command, manifest_json)
    if len(_IDENTITIES) >= _IDENTITIES_MAX:
        del _IDENTITIES[next(iter(_IDENTITIES))]
    _IDENTITIES[(command, manifest_json)] = (stamps, identity)
    return identity


class StepCache:
    """One run's use of a :class:`CacheStore`.

    :param engine: the engine the run calls; its public ``route``, ``manifest`` and
        ``status`` name the cartridge that serves a cap.
    """

    def __init__(self, store: CacheStore, engine: Any) -> None:
        self.store = store
        self._engine = engine
        self._identities: dict[str, str | None] = {}

    def applies(self, definition: CapDef, policy_cache: bool) -> bool:
        return policy_cache and is_deterministic(definition)

    async def identity(self, cap: str) -> str | None:
        """The identity of the cartridge a call to ``cap`` goes to (None: not known, so the
        call is not cached)."""
        route = getattr(self._engine, "route", None)
        name = route(cap) if route is not None else None
        if name is None:
            return None
        if name not in self._identities:
            manifest = self._engine.manifest(name)
            status = next((s for s in self._engine.status() if s.name == name), None)
            if manifest is None or status is None:
                return None
            self._identities[name] = await _known_identity(
                tuple(status.command), manifest.to_json_bytes()
            )
        return self._identities[name]

    @staticmethod
    def key(cap: str, identity: str, policy: str, inputs: Sequence[tuple[str, InputDigest]]) -> str:
        return step_key(cap, identity, policy, inputs)

    async def lookup(self, key: str) -> CacheEntry | None:
        # A lookup reads one small entry and stats its blobs: from the page cache that takes
        # less than a hop to a worker thread, which on a busy host costs milliseconds.
        return self.store.lookup(key)

    async def commit(self, writer: EntryWriter, key: str) -> bool:
        return await anyio.to_thread.run_sync(writer.commit, key)


def pending_key(
    cap: str, identity: str, policy: str, inputs: Sequence[tuple[str, InputDigest | PieceHasher]]
) -> str | None:
    """The key once every streamed input ended, or None when one was not read to its end (the
    cartridge stopped reading it: its digest is not known)."""
    known: list[tuple[str, InputDigest]] = []
    for urn, digest in inputs:
        if isinstance(digest, PieceHasher):
            if not digest.complete:
                return None
            digest = digest.digest()
        known.append((urn, digest))
    return step_key(cap, identity, policy, known)


# -- hits --------------------------------------------------------------------------------------


class _Replay:
    def __init__(self, events: AsyncIterator[CallEvent]) -> None:
        self._events = events

    def __aiter__(self) -> AsyncIterator[CallEvent]:
        return self._events


def replay(
    store: CacheStore, entry: CacheEntry, wanted: Callable[[str], bool]
) -> AbstractAsyncContextManager[_Replay]:
    """A stored call as a response: each output stream opened, its pieces read from disk as
    they are taken, then ended. ``wanted(stream_id)`` false stops reading a stream nobody
    reads any more (the step after it was a hit too)."""

    @asynccontextmanager
    async def context() -> AsyncIterator[_Replay]:
        yield _Replay(_replay_events(store, entry, wanted))

    return context()


def stream_id_of(index: int) -> str:
    return f"cached-{index}"


async def _replay_events(
    store: CacheStore, entry: CacheEntry, wanted: Callable[[str], bool]
) -> AsyncIterator[CallEvent]:
    for index, out in enumerate(entry.outputs):
        sid = stream_id_of(index)
        yield OutputStarted(
            output=out.output,
            stream_id=sid,
            media_urn=out.media_urn,
            is_sequence=out.is_sequence,
            meta=out.meta,
        )
        async for event in _pieces(store, out, sid, wanted):
            yield event
        yield OutputEnded(output=out.output, stream_id=sid, chunk_count=None)


#: ``os.RWF_NOWAIT`` where the system has it: a read that fails rather than wait for the disk.
_NOWAIT: Final = getattr(os, "RWF_NOWAIT", None)


def _cached(fd: int, offset: int, size: int) -> bool:
    """Whether the last byte of the next piece is in the page cache (so, read ahead, the piece
    is); True where that cannot be asked (the read is then timed instead)."""
    if _NOWAIT is None:
        return True
    last = min(offset + REPLAY_PIECE, size) - 1
    if last < offset:
        return True
    try:
        return os.preadv(fd, [bytearray(1)], last, _NOWAIT) == 1
    except BlockingIOError:
        return False
    except OSError:
        return True  # the file system does not take the flag: read and time it


async def _pieces(
    store: CacheStore, out: StoredOutput, sid: str, wanted: Callable[[str], bool]
) -> AsyncIterator[CallEvent]:
    path = store.blob_path(out.blob)
    if out.kind == "bytes":
        with path.open("rb", buffering=0) as f:
            fd = f.fileno()
            offset = 0
            slow = False
            while wanted(sid):
                # From the page cache a read takes less than a thread hop: read here what is
                # cached, and in a worker thread what must come from the disk.
                if slow or not _cached(fd, offset, out.size):
                    began = time.perf_counter()
                    block = await anyio.to_thread.run_sync(f.read, REPLAY_PIECE)
                    slow = time.perf_counter() - began > SLOW_READ
                else:
                    began = time.perf_counter()
                    block = f.read(REPLAY_PIECE)
                    slow = _NOWAIT is None and time.perf_counter() - began > SLOW_READ
                if not block:
                    break
                offset += len(block)
                yield OutputData(output=out.output, stream_id=sid, value=block)
        return
    with path.open("rb") as f:
        source: Any = f
        if out.size <= SMALL_ITEMS:
            source = io.BytesIO(await anyio.to_thread.run_sync(f.read))
        decoder = cbor2.CBORDecoder(source)
        done = 0
        while done < out.size and wanted(sid):
            if source is f:
                value = await anyio.to_thread.run_sync(decoder.decode)
            else:
                value = decoder.decode()
            done = source.tell()
            if out.kind == "items":
                item, meta = value
                yield OutputItem(output=out.output, stream_id=sid, value=item, meta=meta)
            else:
                yield OutputData(output=out.output, stream_id=sid, value=value)


# -- misses ------------------------------------------------------------------------------------


class Recording:
    """A real response passed through, each output stream written to ``writer`` on the way.
    ``finished`` is set when the response's events ended (not when it was left early)."""

    def __init__(self, response: Any, writer: EntryWriter) -> None:
        self._response = response
        self._writer = writer
        self.finished = False

    def __aiter__(self) -> AsyncIterator[CallEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[CallEvent]:
        writer = self._writer
        async for ev in self._response:
            kind = type(ev)
            if kind is OutputData:
                writer.piece(ev.stream_id, ev.value, ev.value)
            elif kind is OutputItem:
                writer.piece(ev.stream_id, Item(value=ev.value, meta=ev.meta), ev.value, ev.meta)
            elif kind is OutputStarted:
                writer.started(ev.stream_id, ev.output, ev.media_urn, ev.is_sequence, ev.meta)
            yield ev
        self.finished = True


def recording(
    call: AbstractAsyncContextManager[Any], writer: EntryWriter, into: list[Recording]
) -> AbstractAsyncContextManager[Recording]:
    """``call``'s response recorded; the :class:`Recording` is appended to ``into``."""

    @asynccontextmanager
    async def context() -> AsyncIterator[Recording]:
        async with call as response:
            rec = Recording(response, writer)
            into.append(rec)
            yield rec

    return context()


def output_digests(entry: CacheEntry) -> Mapping[str, InputDigest]:
    """Each replayed stream's digest, by its replay stream id."""
    return {stream_id_of(i): out.digest for i, out in enumerate(entry.outputs)}


# -- one call ------------------------------------------------------------------------------------


async def open_call(
    engine: Any,
    cache: StepCache | None,
    step: Step,
    inputs: list[tuple[str, Any]],
    call: CallInputs,
) -> AbstractAsyncContextManager[Any]:
    """A step call's response: the engine's, replayed from the step cache (a hit), or the
    engine's recorded into it (a miss)."""
    if cache is None or not call.active:
        return engine.call(step.cap.text, inputs)  # type: ignore[no-any-return]
    call.set_urns(inputs)
    identity = await cache.identity(step.cap.text)
    if identity is None:
        return engine.call(step.cap.text, inputs)  # type: ignore[no-any-return]
    call.identity = identity
    key = call.key(step)
    if key is None and cache.store.lookup_enabled and call.can_hold:
        # Early cut-off (MCH-29): an input streaming from a call that is not cached may come
        # out as it did before; hold it to its end so the key can be looked up first.
        await call.hold(inputs, cache.store.new_temp)
        key = call.key(step, after=True)
    if key is not None:
        entry = await cache.lookup(key)
        if entry is not None:
            call.tally.cache = "hit"
            call.entry = entry
            call.release()
            for reader in call.readers:
                reader.close()  # a hit reads none of its inputs
            return replay(cache.store, entry, call.wanted)
    call.tally.cache = "miss"
    call.writer = cache.store.writer(step.cap.text, step.label or step.alias)
    call.writer.follows = list(call.leaders)
    return recording(engine.call(step.cap.text, inputs), call.writer, call.recordings)


async def store_call(cache: StepCache | None, step: Step, call: CallInputs) -> None:
    """A miss that ran to its end goes into the store under its key (computed now when a
    streamed input's digest was not known before the call)."""
    writer = call.writer
    if writer is None or cache is None:
        return
    key = call.key(step, after=True)
    if key is None or not all(r.finished for r in call.recordings):
        writer.discard()
        return
    await cache.commit(writer, key)
