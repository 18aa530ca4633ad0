"""Media URNs: tagged URNs with prefix ``media`` describing a data type (URN-11, URN-12).

A :class:`MediaUrn` is an immutable value. Two media URNs are ``==`` when their
canonical texts are equal (the same stored tags); the *semantic* equality is
:meth:`MediaUrn.is_equivalent`, which also ignores ``?`` tags.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

import attrs

from . import _tagged
from ._base import _Urn
from ._errors import MediaUrnError, PrefixMismatchError, TaggedUrnError

__all__ = (
    "MediaUrn",
    "MEDIA_TOP",
    "MEDIA_VOID",
    "file_media_urn_for_ext",
    "text_media_urn_for_ext",
    "image_media_urn_for_ext",
    "audio_media_urn_for_ext",
)

#: The top type: every media URN conforms to it.
MEDIA_TOP: Final = "media:"
#: The unit type ("no data").
MEDIA_VOID: Final = "media:void"

_PREFIX: Final = "media"
_PARSE_CACHE_SIZE: Final = 4096  # distinct URN texts a busy runtime sees; parse is per request


@attrs.frozen(kw_only=True, eq=False, repr=False)
class MediaUrn(_Urn):
    """A parsed, canonical media URN. Build it with :meth:`parse`.

    :ivar text: the canonical text (also ``str(urn)``).
    """

    _kind = "media URN"
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
        """Sum of the per-tag scores (URN-8)."""
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

    # --- predicates (the reference's names) ------------------------------------
    def has_marker_tag(self, key: str) -> bool:
        """``key`` is a marker (stored value ``*``, written as the bare key)."""
        return self._tags.get(key.lower()) == "*"

    def is_list(self) -> bool:
        """The ``list`` marker: a list as a data format (not a stream's cardinality)."""
        return self._tags.get("list") == "*"

    def is_scalar(self) -> bool:
        """Not :meth:`is_list`."""
        return self._tags.get("list") != "*"

    def is_record(self) -> bool:
        """The ``record`` marker: key-value structure inside."""
        return self._tags.get("record") == "*"

    def is_opaque(self) -> bool:
        """Not :meth:`is_record`: no structure the type promises."""
        return self._tags.get("record") != "*"

    def is_json(self) -> bool:
        """``fmt=json``."""
        return self._tags.get("fmt") == "json"

    def is_yaml(self) -> bool:
        """``fmt=yaml``."""
        return self._tags.get("fmt") == "yaml"

    def is_csv(self) -> bool:
        """``fmt=csv``."""
        return self._tags.get("fmt") == "csv"

    def is_image(self) -> bool:
        """Key ``image`` present in any form."""
        return "image" in self._tags

    def is_audio(self) -> bool:
        """Key ``audio`` present in any form."""
        return "audio" in self._tags

    def is_video(self) -> bool:
        """Key ``video`` present in any form."""
        return "video" in self._tags

    def is_numeric(self) -> bool:
        """Key ``numeric`` present in any form."""
        return "numeric" in self._tags

    def is_bool(self) -> bool:
        """Key ``bool`` present in any form."""
        return "bool" in self._tags

    def is_file_path(self) -> bool:
        """The ``file-path`` marker (how many files is the argument's ``is_sequence``)."""
        return self._tags.get("file-path") == "*"

    def extension(self) -> str | None:
        """The stored value of ``ext``, or None."""
        return self._tags.get("ext")

    # --- edits (new values; this one is unchanged) -----------------------------
    def with_tag(self, key: str, value: str) -> MediaUrn:
        """This URN with tag ``key`` (lower-cased) set to the stored ``value``
        (``*`` for a marker, ``?``, ``!``, ``?=v``, ``!=v`` or an exact value).

        :raises TaggedUrnError: the key or value could not be written as a tag.
        :raises MediaUrnError: the result would refine ``media:void``.
        """
        k, v = _tagged.checked_tag(key, value)
        tags = dict(self._tags)
        tags[k] = v
        return _build(tags)

    def without_tag(self, key: str) -> MediaUrn:
        """This URN without tag ``key`` (looked up lower-cased; absent: unchanged)."""
        k = key.lower()
        if k not in self._tags:
            return self
        return _build({t: v for t, v in self._tags.items() if t != k})

    @staticmethod
    def least_upper_bound(urns: Iterable[MediaUrn]) -> MediaUrn:
        """The tags every URN of ``urns`` stores with the same value; ``media:`` for none.

        :raises PrefixMismatchError: an element is not a :class:`MediaUrn`.
        """
        items = list(urns)
        for u in items:
            if not isinstance(u, MediaUrn):
                raise PrefixMismatchError(f"cannot compare a media URN with {type(u).__name__}")
        if not items:
            return _parse_cached(MEDIA_TOP)
        first, rest = items[0], items[1:]
        if not rest:
            return first
        common = {k: v for k, v in first._tags.items() if all(u._tags.get(k) == v for u in rest)}
        return _build(common)

    # --- order -------------------------------------------------------------------
    def ordering_key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The reference's structural order: the prefix, then ``(key, stored value)``
        pairs in key order (not the canonical text's order, which differs wherever one
        key begins another: ``file`` and ``file-path``). A total order on media URNs."""
        return (_PREFIX, tuple(self._tags.items()))

    # --- relations (URN-9) --------------------------------------------------
    def conforms_to(self, pattern: MediaUrn) -> bool:
        """Everything this URN allows, ``pattern`` allows (``pattern.accepts(self)``)."""
        return _tagged.refines(self._left, self._same_kind(pattern)._right)

    def accepts(self, instance: MediaUrn) -> bool:
        """``instance.conforms_to(self)``."""
        return _tagged.refines(self._same_kind(instance)._left, self._right)

    def is_equivalent(self, other: MediaUrn) -> bool:
        """Each conforms to the other: same stored tags, ``?`` tags ignored."""
        o = self._same_kind(other)
        return _tagged.refines(self._left, o._right) and _tagged.refines(o._left, self._right)

    def is_comparable(self, other: MediaUrn) -> bool:
        """One of the two conforms to the other."""
        o = self._same_kind(other)
        return _tagged.refines(self._left, o._right) or _tagged.refines(o._left, self._right)

    def meets(self, other: MediaUrn) -> bool:
        """Some thing is described by both (symmetric)."""
        return _tagged.meets(self._left, self._same_kind(other)._right)

    def satisfies(self, pattern: MediaUrn) -> bool:
        """Conforms with this URN read as complete (a key it omits is absent)."""
        return _tagged.refines_closed(self._left, self._same_kind(pattern)._right)

    def may_satisfy(self, pattern: MediaUrn) -> bool:
        """Meets with this URN read as complete."""
        return _tagged.meets_closed(self._left, self._same_kind(pattern)._right)


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


# --- builders for a file extension (the reference's names; canonical text) ----------
def _ext_text(ext: str, *tags: str) -> str:
    """``media:`` with ``ext=<ext>`` (lower-cased) and the given markers, canonical.

    :raises MediaUrnError: ``ext`` is empty or holds a character other than letters,
        digits, ``_``, ``-`` and ``.`` (``reason="invalid_extension"``).
    """
    if not isinstance(ext, str) or not ext or not all(c.isalnum() or c in "_-." for c in ext):
        raise MediaUrnError(
            "a file extension is letters, digits, '_', '-' or '.' (no leading dot needed)",
            reason="invalid_extension",
        )
    stored = {"ext": ext.lower()}
    stored.update(dict.fromkeys(tags, "*"))
    return _build(stored).text


def file_media_urn_for_ext(ext: str) -> str:
    """A file of type ``ext`` with no format or encoding claim: ``media:ext=pdf``.

    :raises MediaUrnError: see :func:`_ext_text`.
    """
    return _ext_text(ext)


def text_media_urn_for_ext(ext: str) -> str:
    """A UTF-8 text file of type ``ext``: ``media:enc=utf-8;ext=md``.

    :raises MediaUrnError: see :func:`_ext_text`.
    """
    text = _ext_text(ext)
    return _build({**_parse_cached(text)._tags, "enc": "utf-8"}).text


def image_media_urn_for_ext(ext: str) -> str:
    """An image file of type ``ext``: ``media:ext=png;image``.

    :raises MediaUrnError: see :func:`_ext_text`.
    """
    return _ext_text(ext, "image")


def audio_media_urn_for_ext(ext: str) -> str:
    """An audio file of type ``ext``: ``media:audio;ext=wav``.

    :raises MediaUrnError: see :func:`_ext_text`.
    """
    return _ext_text(ext, "audio")
