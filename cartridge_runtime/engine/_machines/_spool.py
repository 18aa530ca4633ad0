"""A streamed input held until it ended, so a cached step can look its key up before calling.

A step whose input streams from a call that is not cached (``cache=false``, a
non-deterministic cap) or from an iterable cannot know its key until that input ended. Rather
than call at once and store after (no lookup, so the step runs again even when the input came
out the same), the run holds the input until its end, looks the key up, and only then calls,
sending the held pieces (early cut-off, MCH-29). A :class:`Spool` holds the pieces in memory
up to :data:`SPOOL_MEMORY` bytes and the rest in a file of the store's ``tmp/``, so a large
input costs a disk write and read, never its size in memory.

The file is a CBOR sequence of the pieces as they came: a bytes piece as a byte string (its
header, then the bytes themselves, not copied into one buffer), an item as ``[value, meta]``,
any other scalar piece as its CBOR value, a :class:`CborValue` piece under a tag of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import IO, Any, Final

import cbor2

from .._events import Item
from .._inputs import CborValue, Verified
from ._cache import CacheError

__all__ = ("SPOOL_MEMORY", "Spool")

#: Bytes a held input keeps in memory before the rest goes to a file.
SPOOL_MEMORY: Final = 4 << 20
#: The CBOR tag of a piece that was a :class:`CborValue` (a value sent as CBOR, even bytes).
_CBOR_VALUE_TAG: Final = 27_001


def _bytes_header(n: int) -> bytes:
    """The CBOR head of a byte string of ``n`` bytes (major type 2)."""
    if n < 24:
        return bytes((0x40 | n,))
    if n < 1 << 8:
        return bytes((0x58, n))
    if n < 1 << 16:
        return b"\x59" + n.to_bytes(2, "big")
    if n < 1 << 32:
        return b"\x5a" + n.to_bytes(4, "big")
    return b"\x5b" + n.to_bytes(8, "big")


def _piece_size(piece: Any) -> int:
    if isinstance(piece, bytes | bytearray):
        return len(piece)
    if isinstance(piece, memoryview):
        return piece.nbytes
    if isinstance(piece, Item):
        return _piece_size(piece.value)
    if isinstance(piece, str):
        return len(piece)
    return 64  # a small value; its exact size does not matter here


class Spool:
    """One input's pieces held until the input ended (see the module docstring).

    :param new_file: makes the file the pieces go to once they outgrow :data:`SPOOL_MEMORY`
        (the store's :meth:`CacheStore.new_temp`: ``cartridge cache gc`` removes it after a
        crash).
    :param sequence: the input is a sequence (its pieces are items).
    """

    def __init__(self, new_file: Callable[[str], tuple[IO[bytes], Path]], sequence: bool) -> None:
        self._new_file = new_file
        self.sequence = sequence
        self.held: list[Any] = []
        self.held_bytes = 0
        self.count = 0
        self.path: Path | None = None
        self._file: IO[bytes] | None = None

    async def fill(self, pieces: AsyncIterator[Any]) -> None:
        """Take every piece of ``pieces``, to their end."""
        async for piece in pieces:
            if type(piece) is Verified:
                piece = piece.data
            self.count += 1
            if self._file is None:
                self.held.append(piece)
                self.held_bytes += _piece_size(piece)
                if self.held_bytes > SPOOL_MEMORY:
                    self._spill()
            else:
                self._write(piece)
        if self._file is not None:
            self._file.close()
            self._file = None

    def _spill(self) -> None:
        try:
            self._file, self.path = self._new_file("spool")
        except OSError as error:
            raise CacheError(
                f"step cache: cannot hold an input: {error.strerror or error}"
            ) from None
        for piece in self.held:
            self._write(piece)
        self.held = []

    def _write(self, piece: Any) -> None:
        assert self._file is not None
        try:
            if self.sequence:
                item = piece if isinstance(piece, Item) else Item(value=piece)
                meta = dict(item.meta) if item.meta else None
                self._file.write(cbor2.dumps([_ready(item.value), meta]))
            elif isinstance(piece, bytes | bytearray | memoryview):
                view = memoryview(piece).cast("B")
                self._file.write(_bytes_header(view.nbytes))
                self._file.write(view)
            elif isinstance(piece, CborValue):
                self._file.write(cbor2.dumps(cbor2.CBORTag(_CBOR_VALUE_TAG, _ready(piece.value))))
            else:
                self._file.write(cbor2.dumps(_ready(piece)))
        except OSError as error:
            raise CacheError(
                f"step cache: cannot hold an input: {error.strerror or error}"
            ) from None

    async def pieces(self) -> AsyncIterator[Any]:
        """The held pieces in their order; the file is removed once they were read (or the
        reading stopped)."""
        try:
            for piece in self.held:
                yield piece
            if self.path is None:
                return
            with self.path.open("rb") as f:
                decoder = cbor2.CBORDecoder(f)
                for _ in range(self.count):
                    value = decoder.decode()
                    if self.sequence:
                        yield Item(value=value[0], meta=value[1])
                    elif isinstance(value, cbor2.CBORTag) and value.tag == _CBOR_VALUE_TAG:
                        yield CborValue(value.value)
                    else:
                        yield value
        finally:
            self.discard()

    def discard(self) -> None:
        """Drop the held pieces and remove the file."""
        self.held = []
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = None


def _ready(value: Any) -> Any:
    return bytes(value) if isinstance(value, bytearray | memoryview) else value
