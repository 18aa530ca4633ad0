"""Media URNs: tagged URNs with prefix ``media`` describing a data type (spec §4).

A :class:`MediaUrn` is an immutable value. Two media URNs are ``==`` when their
canonical texts are equal (the same stored tags); the *semantic* equality is
:meth:`MediaUrn.is_equivalent`, which also ignores ``?`` tags.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import attrs

from . import _tagged
from ._errors import MediaUrnError, PrefixMismatchError, TaggedUrnError

__all__ = (
    "MediaUrn",
    "MEDIA_TOP",
    "MEDIA_VOID",
)

#: The top type: every media URN conforms to it.
MEDIA_TOP: Final = "media:"
#: The unit type ("no data").
MEDIA_VOID: Final = "media:void"

_PREFIX: Final = "media"
_PARSE_CACHE_SIZE: Final = 4096  # distinct URN texts a busy runtime sees; parse is per request


@attrs.frozen(kw_only=True, eq=False, repr=False)
class MediaUrn:
    """A parsed, canonical media URN. Build it with :meth:`parse`.

    :ivar text: the canonical text (also ``str(urn)``).
    """

    text: str
    _tags: Mapping[str, str]
    _left: Mapping[str, _tagged.Constraint]  # every key: the instance side
    _right: Mapping[str, _tagged.Constraint]  # ``?`` keys dropped: the pattern side
    _specificity: int

    # --- construction -------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> MediaUrn:
        """Parse ``text`` as a media URN (cached on the text: safe, values are immutable).

        :raises TaggedUrnError: the text breaks the tagged-URN grammar.
        :raises MediaUrnError: the prefix is not ``media`` (``reason="wrong_prefix"``),
            or ``void`` is combined with another tag (``reason="void_not_atomic"``).
        """
        return _parse_cached(text)

    # --- accessors -----------------------------------------------------------
    @property
    def tags(self) -> Mapping[str, str]:
        """Read-only map key -> stored value, in key order."""
        return self._tags

    @property
    def specificity(self) -> int:
        """Sum of the per-tag scores (spec §2.3)."""
        return self._specificity

    def get_tag(self, key: str) -> str | None:
        """The stored value of ``key`` (looked up lower-cased), or None when missing."""
        return self._tags.get(key.lower())

    def is_top(self) -> bool:
        """Literally no tags (``media:``). ``media:?x`` is equivalent to top but not top."""
        return not self._tags

    def is_open(self) -> bool:
        """Only ``?`` tags or none: says nothing, so ``media:`` refines it."""
        return not self._right

    def is_void(self) -> bool:
        """Key ``void`` present in any form (the unit type, "no data")."""
        return "void" in self._tags

    # --- relations (spec §3) -------------------------------------------------
    @staticmethod
    def _other(other: MediaUrn) -> MediaUrn:
        if not isinstance(other, MediaUrn):
            raise PrefixMismatchError(f"cannot compare a media URN with {type(other).__name__}")
        return other

    def conforms_to(self, pattern: MediaUrn) -> bool:
        """Everything this URN allows, ``pattern`` allows (``pattern.accepts(self)``)."""
        return _tagged.refines(self._left, self._other(pattern)._right)

    def accepts(self, instance: MediaUrn) -> bool:
        """``instance.conforms_to(self)``."""
        return _tagged.refines(self._other(instance)._left, self._right)

    def is_equivalent(self, other: MediaUrn) -> bool:
        """Each conforms to the other: same stored tags, ``?`` tags ignored."""
        o = self._other(other)
        return _tagged.refines(self._left, o._right) and _tagged.refines(o._left, self._right)

    def is_comparable(self, other: MediaUrn) -> bool:
        """One of the two conforms to the other."""
        o = self._other(other)
        return _tagged.refines(self._left, o._right) or _tagged.refines(o._left, self._right)

    def meets(self, other: MediaUrn) -> bool:
        """Some thing is described by both (symmetric)."""
        return _tagged.meets(self._left, self._other(other)._right)

    def satisfies(self, pattern: MediaUrn) -> bool:
        """Conforms with this URN read as complete (a key it omits is absent)."""
        return _tagged.refines_closed(self._left, self._other(pattern)._right)

    def may_satisfy(self, pattern: MediaUrn) -> bool:
        """Meets with this URN read as complete."""
        return _tagged.meets_closed(self._left, self._other(pattern)._right)

    # --- value protocol --------------------------------------------------------
    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"MediaUrn({self.text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MediaUrn):
            return NotImplemented
        return self.text == other.text

    def __hash__(self) -> int:
        return hash((MediaUrn, self.text))


def from_stored_tags(tags: Mapping[str, str]) -> MediaUrn:
    """Build a media URN from a stored tag map taken from other parsed URNs
    (keys lower-case, values in stored form; not re-validated).

    :raises MediaUrnError: ``void`` combined with another tag.
    """
    return _build(dict(tags))


def _build(tags: dict[str, str]) -> MediaUrn:
    """Check the media rules on an already parsed tag map and build the value."""
    if "void" in tags and len(tags) > 1:
        extras = ", ".join(sorted(k for k in tags if k != "void"))
        raise MediaUrnError(
            f"media:void is atomic and cannot be refined; got extra tag(s): {extras}",
            reason="void_not_atomic",
        )
    ordered = {k: tags[k] for k in sorted(tags)}
    return MediaUrn(
        text=f"{_PREFIX}:{_tagged.tags_to_text(ordered)}",
        tags=MappingProxyType(ordered),
        left=MappingProxyType(_tagged.constraints_of(ordered)),
        right=MappingProxyType(_tagged.pattern_constraints_of(ordered)),
        specificity=_tagged.specificity_of(ordered),
    )


@functools.lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _parse_cached(text: str) -> MediaUrn:
    prefix, tags = _tagged.parse_tagged(text)
    if prefix != _PREFIX:
        raise MediaUrnError(
            f"invalid prefix: expected 'media', got {prefix!r}", reason="wrong_prefix"
        )
    return _build(tags)


def parse_media_or_none(text: str) -> MediaUrn | None:
    """:meth:`MediaUrn.parse`, or None when ``text`` is not a media URN."""
    try:
        return _parse_cached(text)
    except (TaggedUrnError, MediaUrnError):
        return None
