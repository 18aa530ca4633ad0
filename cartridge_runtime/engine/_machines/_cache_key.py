"""What a cached step call is known by: digests of its inputs and the key made of them.

Rules (MCH-19, MCH-21):

1. A call's key is a SHA-256 over its cap URN, the serving cartridge's identity, its step
   policy and, for every input in the order sent, the input's media URN and its digest.
2. A value's digest does not depend on how it was cut into pieces: a scalar of bytes is the
   SHA-256 of its bytes joined (so a stored blob's name is the digest of what it holds); a
   scalar with any piece that is not bytes is ``values``, a sequence is ``items`` (each item's
   value and meta as canonical CBOR).

Nothing here does IO: a :class:`PieceHasher` is fed pieces and says what it saw.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs
import cbor2

from .._events import Item
from .._inputs import CborValue, Verified

__all__ = (
    "KEY_FORMAT",
    "InputDigest",
    "PieceHasher",
    "digest_of",
    "hashing",
    "step_key",
    "item_bytes",
)

#: Bumped when the key's recipe changes, so old entries miss instead of lying.
KEY_FORMAT: Final = 1


@attrs.frozen(kw_only=True)
class InputDigest:
    """One input of a call as the key sees it.

    :ivar kind: ``bytes`` (a scalar of bytes), ``values`` (a scalar with other pieces) or
        ``items`` (a sequence).
    :ivar sha256: the hex digest (see the module's rule 2).
    :ivar size: bytes of the value's pieces (an item's value, text as UTF-8).
    """

    kind: str
    sha256: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "sha256": self.sha256, "size": self.size}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> InputDigest:
        return cls(kind=str(obj["kind"]), sha256=str(obj["sha256"]), size=int(obj["size"]))


def item_bytes(value: Any, meta: Mapping[str, Any] | None) -> bytes:
    """One item as the digest and the store write it: ``[value, meta]`` in canonical CBOR."""
    return cbor2.dumps([value, dict(meta) if meta else None], canonical=True)


def _plain(piece: Any) -> Any:
    if type(piece) is Verified:
        return piece.data
    if isinstance(piece, CborValue):
        return piece.value
    return piece


class PieceHasher:
    """Feeds a value's pieces into its digest (module rule 2).

    A scalar hashes its bytes as they come; at the first piece that is not bytes it keeps what
    it had as a prefix (its digest and length) and goes on over each piece in canonical CBOR,
    so no two different values of kind ``values`` share a digest.
    """

    def __init__(self, sequence: bool) -> None:
        self.sequence = sequence
        self.size = 0
        self.complete = False  #: set by :func:`hashing` once the source ended
        self._raw = hashlib.sha256()
        self._raw_size = 0
        self._typed: Any = None

    def add(self, piece: Any) -> None:
        piece = _plain(piece)
        if self.sequence:
            if isinstance(piece, Item):
                value, meta = piece.value, piece.meta
            else:
                value, meta = piece, None
            self._raw.update(item_bytes(value, meta))
            self.size += _size(value)
            return
        if self._typed is None and isinstance(piece, bytes | bytearray | memoryview):
            self._raw.update(piece)
            n = piece.nbytes if isinstance(piece, memoryview) else len(piece)
            self._raw_size += n
            self.size += n
            return
        if self._typed is None:
            self._typed = hashlib.sha256()
        self._typed.update(cbor2.dumps(_cbor_ready(piece), canonical=True))
        self.size += _size(piece)

    def digest(self) -> InputDigest:
        if self.sequence:
            return InputDigest(kind="items", sha256=self._raw.hexdigest(), size=self.size)
        if self._typed is None:
            return InputDigest(kind="bytes", sha256=self._raw.hexdigest(), size=self.size)
        joined = f"{self._raw.hexdigest()}:{self._raw_size}:{self._typed.hexdigest()}"
        return InputDigest(
            kind="values", sha256=hashlib.sha256(joined.encode()).hexdigest(), size=self.size
        )


def _cbor_ready(piece: Any) -> Any:
    return bytes(piece) if isinstance(piece, bytearray | memoryview) else piece


def _size(value: Any) -> int:
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, memoryview):
        return value.nbytes
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    return 0


def digest_of(pieces: Iterable[Any], sequence: bool) -> InputDigest:
    """The digest of a value held whole."""
    hasher = PieceHasher(sequence)
    for piece in pieces:
        hasher.add(piece)
    return hasher.digest()


async def hashing(source: AsyncIterator[Any], hasher: PieceHasher) -> AsyncIterator[Any]:
    """``source`` passed through, each piece fed to ``hasher`` (complete once it ended)."""
    async for piece in source:
        hasher.add(piece)
        yield piece
    hasher.complete = True


def step_key(
    cap: str, cartridge: str, policy: str, inputs: Sequence[tuple[str, InputDigest]]
) -> str:
    """The key of one call (module rule 1): hex SHA-256 of a canonical JSON text."""
    recipe = {
        "format": KEY_FORMAT,
        "cap": cap,
        "cartridge": cartridge,
        "policy": policy,
        "args": [[urn, d.kind, d.sha256, d.size] for urn, d in inputs],
    }
    text = json.dumps(recipe, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
