"""A machine run's inputs: checked before anything starts (MCH-17), then fed into the run.

:func:`check_inputs` holds the values given by node name against the machine and refuses,
naming the node, whatever would fail later; :func:`feed_input` puts a checked value into its
node's flow, in pieces, so that a large input is streamed like any other value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, Final

import anyio
import anyio.to_thread

from ...machine import Machine
from ...urn import MediaUrn
from .._arguments import media_problem, shape_problem
from .._events import Item
from .._file_blocks import file_blocks
from ._cache import CacheStore
from ._cache_follow import Leader, file_stamp
from ._cache_key import InputDigest, PieceHasher, digest_of
from ._events import MachineInputError
from ._node_stream import NodeStream

__all__ = ("check_inputs", "feed_input")

#: Bytes per piece when a run reads an input it was given whole or from a file.
PIECE: Final = 256 * 1024

_PLAIN = (bytes, bytearray, memoryview, str, os.PathLike)


def _typed(label: str, node_media: MediaUrn, value: Any) -> tuple[str | None, Any]:
    """``(media, value)`` for a value that states its type, ``(None, value)`` otherwise."""
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)):
        return None, value
    media, value = value
    problem = media_problem(media, node_media)
    if problem is not None:
        raise MachineInputError(label, problem)
    return media, value


def check_inputs(machine: Machine, given: Mapping[str, Any]) -> dict[str, tuple[str | None, Any]]:
    """Each input node's value, by canonical node name, with the media URN it stated.

    :raises MachineInputError: a value for no input node, an input node given nothing, a
        stated media URN that does not conform, a list where an arg takes one value, a path
        that names no file, a value of no input form.
    """
    by_label = {node.label or node.name: node for node in machine.inputs}
    for name in given:
        if name not in by_label:
            known = ", ".join(sorted(by_label)) or "none"
            raise MachineInputError(name, f"the machine has no such input (its inputs: {known})")
    checked: dict[str, tuple[str | None, Any]] = {}
    for label, node in by_label.items():
        if label not in given:
            raise MachineInputError(label, f"not given (it takes {node.media})")
        media, value = _typed(label, node.media, given[label])
        if isinstance(value, list | tuple):
            for step in machine.steps:
                for binding in step.bindings:
                    arg = step.definition.arg_named(binding.arg)
                    if binding.node != node.name or arg is None:
                        continue
                    problem = shape_problem(arg, value, f" of step '{step.label or step.alias}'")
                    if problem is not None:
                        raise MachineInputError(label, problem)
        elif isinstance(value, os.PathLike) and not Path(value).is_file():
            raise MachineInputError(label, f"no file at {os.fspath(value)}")
        elif not isinstance(value, _PLAIN) and not hasattr(value, "__aiter__"):
            raise MachineInputError(label, f"a {type(value).__name__} is not an input value")
        checked[node.name] = (media, value)
    return checked


async def feed_input(flow: NodeStream, value: Any, store: CacheStore | None = None) -> None:
    """Put a checked input value into its flow: bytes and files in pieces, text whole, a list
    item by item, an async iterable as it yields. In a run with a step cache (``store``), the
    flow first gets the value's digest when it can be known before the pieces go (not for an
    async iterable); a file hashed before is known by its path, size and times. A file's
    flow also names the file as the source of its bytes, so a step that repeats them stores
    no copy of its own through its pieces (:mod:`._cache_follow`)."""
    if store is not None:
        flow.digest = await _digest(value, store)
        if isinstance(value, os.PathLike) and flow.digest is not None:
            flow.stored_by = _file_source(Path(value), flow.digest)
    flow.start()
    try:
        if isinstance(value, str):  # text travels as UTF-8 in byte strings (REQ-38)
            value = value.encode("utf-8")
        if isinstance(value, bytes | bytearray | memoryview):
            view = memoryview(value).cast("B")
            for pos in range(0, max(len(view), 1), PIECE):
                if not flow.wanted:
                    break  # every consumer stopped reading (a step cache hit, a skip)
                await flow.put(view[pos : pos + PIECE])
        elif isinstance(value, os.PathLike):
            if flow.wanted:
                await _feed_file(flow, Path(value))
        elif isinstance(value, list | tuple):
            for item in value:
                await flow.put(item if isinstance(item, Item) else Item(value=item))
        else:
            async for piece in value:
                await flow.put(piece.encode("utf-8") if isinstance(piece, str) else piece)
    finally:
        flow.close()


def _open_file(path: Path) -> BinaryIO:
    """A checked input file (a regular one, MCH-17), opened in the event loop: opening a local
    file costs less than the hop to a worker thread, and a run may open many."""
    return path.open("rb", buffering=0)


async def _feed_file(flow: NodeStream, path: Path) -> None:
    """A file's bytes into ``flow``: read in large blocks (in the loop while the page cache
    holds them, see :func:`file_blocks`) and put in pieces that share each block's buffer."""
    with _open_file(path) as f:
        async for block in file_blocks(f.fileno()):
            for pos in range(0, len(block), PIECE):
                if not flow.wanted:
                    return
                await flow.put(block[pos : pos + PIECE])


async def _digest(value: Any, store: CacheStore) -> InputDigest | None:
    if isinstance(value, str):
        return digest_of([value.encode("utf-8")], False)
    if isinstance(value, bytes | bytearray | memoryview):
        return digest_of([value], False)
    if isinstance(value, list | tuple):
        return digest_of(value, True)
    if isinstance(value, os.PathLike):
        known = store.file_digest(Path(value))  # a stat and a small read: no thread needed
        if known is not None:
            return known
        return await anyio.to_thread.run_sync(_file_digest, Path(value), store)
    return None


def _file_source(path: Path, digest: InputDigest) -> Leader | None:
    """The input file as a complete source of ``digest``'s bytes (None: it is not that file
    any more, or not a plain scalar of bytes)."""
    if digest.kind != "bytes":
        return None
    try:
        stamp = file_stamp(Path(os.path.realpath(path)))
    except OSError:
        return None
    if stamp[0] != digest.size:
        return None
    return Leader.complete(Path(os.path.realpath(path)), digest.size, digest, stamp)


def _file_digest(path: Path, store: CacheStore) -> InputDigest:
    known = store.file_digest(path)
    if known is not None:
        return known
    hasher = PieceHasher(False)
    with path.open("rb", buffering=0) as f:
        while block := f.read(1 << 20):
            hasher.add(block)
    digest = hasher.digest()
    store.remember_file(path, digest)
    return digest
