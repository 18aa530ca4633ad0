"""What every parsed URN shares: its value protocol.

A URN value is its canonical text: two URNs of one kind are equal when their texts are, hash
by kind and text, print as the text, and sort by the kind's structural ``ordering_key()``
(which the reference defines per kind, and which differs from the text's order). A URN of
another kind is never equal, and comparing relations across kinds is refused with the kind's
error (:meth:`_Urn._same_kind`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from ._errors import PrefixMismatchError

__all__ = ("_Urn",)


class _Urn:
    """Base of :class:`~cartridge_runtime.urn.MediaUrn` and
    :class:`~cartridge_runtime.urn.CapUrn`: equality, hashing, printing and ordering, once.

    A subclass sets ``text`` on each value, names its kind in :attr:`_kind` (for errors) and
    defines ``ordering_key()``.
    """

    __slots__ = ()

    #: The kind in words, for the error a cross-kind relation raises ("media URN").
    _kind: ClassVar[str] = "URN"
    text: str

    def ordering_key(self) -> Any:
        raise NotImplementedError

    def _same_kind(self, other: object) -> Self:
        """``other`` when it is a URN of this kind.

        :raises PrefixMismatchError: it is not (relations never cross kinds).
        """
        if not isinstance(other, type(self)):
            raise PrefixMismatchError(f"cannot compare a {self._kind} with {type(other).__name__}")
        return other

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.text == other.text

    def __hash__(self) -> int:
        return hash((type(self), self.text))

    def __lt__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return bool(self.ordering_key() < other.ordering_key())

    def __le__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return bool(self.ordering_key() <= other.ordering_key())

    def __gt__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return bool(self.ordering_key() > other.ordering_key())

    def __ge__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return bool(self.ordering_key() >= other.ordering_key())
