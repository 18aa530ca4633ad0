"""Cap URNs: a capability as four coordinates — in, out, effect and y tags (URN-13 to URN-17).

Parsing follows the reference's order of checks so that the *first* failing
check names the error: tag grammar, prefix, ``in``, ``out``, effect, the
re-parse of the canonical in/out/y texts (a value the serializer leaves bare
but the parser refuses makes the cap unusable), then admissibility (bare top,
``effect=none`` requiring in ⊑ out).

Relations take a candidate ``c`` and a request ``r``; the candidate's y tags
are read *complete* (closed reading) in ``is_dispatchable`` / ``accepts``, and
a request input with no constraint (``media:`` or only ``?`` tags) says
nothing, so every candidate input passes.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

import attrs

from . import _tagged
from ._base import _Urn
from ._errors import CapUrnError, MediaUrnError, TaggedUrnError
from ._media import MEDIA_TOP, MediaUrn

__all__ = (
    "CapEffect",
    "CapKind",
    "CapUrn",
)

_PREFIX: Final = "cap"
_STRUCTURAL: Final = frozenset(("in", "out", "effect"))
_PARSE_CACHE_SIZE: Final = 4096  # distinct cap texts; parse is on the per-request path
_WEIGHT_OUT: Final = 10_000  # out dominates in, which dominates y (URN-16)
_WEIGHT_IN: Final = 100
_EFFECT_RANK: Final = {  # the reference's order of effects; the request form last
    "declared": 0,
    "none": 1,
    "patch": 2,
    "?": 3,
}


class CapEffect(enum.StrEnum):
    """What a cap does to its input's type (URN-13)."""

    DECLARED = "declared"  #: output is the declared ``out=`` (default)
    NONE = "none"  #: output is the input itself (in must conform to out)
    PATCH = "patch"  #: output is the input with the in→out tag edits applied
    ANY = "?"  #: request form: any effect (``?effect``, ``effect=*``)


class CapKind(enum.StrEnum):
    """Descriptive category of a cap, read from its in, out and effect; never used for matching."""

    IDENTITY = "identity"
    SOURCE = "source"
    SINK = "sink"
    EFFECT = "effect"
    TRANSFORM = "transform"


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CapUrn(_Urn):
    """A parsed, admissible, canonical cap URN. Build it with :meth:`parse`.

    :ivar text: canonical text (also ``str(cap)``).
    :ivar in_spec: input media URN (``media:`` when omitted).
    :ivar out_spec: output media URN (``media:`` when omitted).
    :ivar effect: the effect coordinate.
    """

    _kind = "cap URN"
    text: str
    in_spec: MediaUrn
    out_spec: MediaUrn
    effect: CapEffect
    _tags: Mapping[str, str]
    _y_left: Mapping[str, _tagged.Constraint]  # y tags, every key (instance side)
    _y_right: Mapping[str, _tagged.Constraint]  # y tags without ``?`` (pattern side)
    _specificity: int

    @classmethod
    def parse(cls, text: str) -> CapUrn:
        """Parse ``text`` as a cap URN (cached on the text).

        :raises CapUrnError: with ``reason`` one of :data:`CAP_REASONS` and
            ``cause`` the underlying tagged/media error when there is one.
        """
        return _parse_cached(text)

    # --- accessors -------------------------------------------------------------
    @property
    def tags(self) -> Mapping[str, str]:
        """The y tags (never ``in``/``out``/``effect``): key -> stored value, key order."""
        return self._tags

    @property
    def specificity(self) -> int:
        """``10000·spec(out) + 100·spec(in) + spec(y)`` (URN-16)."""
        return self._specificity

    @property
    def kind(self) -> CapKind:
        """Descriptive kind (:class:`CapKind`)."""
        in_void = self.in_spec.is_void()
        out_void = self.out_spec.is_void()
        if (
            self.effect is CapEffect.NONE
            and self.in_spec.is_top()
            and self.out_spec.is_top()
            and not self._tags
        ):
            return CapKind.IDENTITY
        if in_void and out_void:
            return CapKind.EFFECT
        if in_void:
            return CapKind.SOURCE
        if out_void:
            return CapKind.SINK
        return CapKind.TRANSFORM

    def get_tag(self, key: str) -> str | None:
        """A y tag's stored value, or the canonical text of ``in``/``out``, or the effect."""
        k = key.lower()
        if k == "in":
            return self.in_spec.text
        if k == "out":
            return self.out_spec.text
        if k == "effect":
            return self.effect.value
        return self._tags.get(k)

    # --- relations (URN-17) ----------------------------------------------------
    def is_dispatchable(self, request: CapUrn) -> bool:
        """Routing: this candidate *serves* ``request`` — takes at least what it
        sends, gives at least what it needs, has its effect (unless ``?effect``)
        and its tags (this cap's tags read as complete)."""
        r = self._same_kind(request)
        return (
            (r.in_spec.is_open() or r.in_spec.conforms_to(self.in_spec))
            and self.out_spec.conforms_to(r.out_spec)
            and (r.effect is CapEffect.ANY or self.effect is r.effect)
            and _tagged.refines_closed(self._y_left, r._y_right)
        )

    def may_dispatch(self, request: CapUrn) -> bool:
        """This candidate *could* serve ``request`` (meets instead of refines).
        For exploration, never for routing."""
        r = self._same_kind(request)
        return (
            (r.in_spec.is_open() or r.in_spec.meets(self.in_spec))
            and self.out_spec.meets(r.out_spec)
            and (r.effect is CapEffect.ANY or self.effect is r.effect)
            and _tagged.meets_closed(self._y_left, r._y_right)
        )

    def accepts(self, cap: CapUrn) -> bool:
        """This cap read as a *pattern* fits ``cap``: cap's input within the
        pattern's, its output covering the pattern's (an open pattern output asks
        nothing), effect equal unless the pattern says ``?effect``, cap's tags
        (complete) satisfying the pattern's."""
        c = self._same_kind(cap)
        return (
            c.in_spec.conforms_to(self.in_spec)
            and (self.out_spec.is_open() or self.out_spec.conforms_to(c.out_spec))
            and (self.effect is CapEffect.ANY or c.effect is self.effect)
            and _tagged.refines_closed(c._y_left, self._y_right)
        )

    def conforms_to(self, pattern: CapUrn) -> bool:
        """``pattern.accepts(self)``."""
        return self._same_kind(pattern).accepts(self)

    def _stands_for(self, q: CapUrn) -> bool:
        """K(self, q) of URN-17: both read as descriptions, nothing unknown."""
        return (
            q.in_spec.conforms_to(self.in_spec)
            and self.out_spec.conforms_to(q.out_spec)
            and (self.effect is CapEffect.ANY or self.effect is q.effect)
            and _tagged.refines(q._y_left, self._y_right)
        )

    def is_equivalent(self, other: CapUrn) -> bool:
        """The same cap: K both ways."""
        o = self._same_kind(other)
        return self._stands_for(o) and o._stands_for(self)

    def is_comparable(self, other: CapUrn) -> bool:
        """On one chain: K one way or the other."""
        o = self._same_kind(other)
        return self._stands_for(o) or o._stands_for(self)

    def flows_into(self, next_cap: CapUrn) -> bool:
        """What this cap gives, ``next_cap`` takes: ``self.out ⊑ next.in``."""
        return self.out_spec.conforms_to(self._same_kind(next_cap).in_spec)

    # --- edits (new values; this one is unchanged) -----------------------------
    def with_tag(self, key: str, value: str) -> CapUrn:
        """This cap with y tag ``key`` (lower-cased) set to the stored ``value``.

        :raises CapUrnError: ``key`` is ``in``/``out``/``effect``
            (``reason="structural_key"``: use :meth:`with_in_spec`, :meth:`with_out_spec`,
            :meth:`with_effect`), the tag cannot be written (``reason="syntax"``, ``cause``
            the tagged-URN error), or the result is not an admissible cap.
        """
        k = key.lower()
        if k in _STRUCTURAL:
            raise CapUrnError(
                f"{k!r} is a coordinate, not a tag: change it with with_{k}"
                + ("_spec" if k != "effect" else ""),
                reason="structural_key",
            )
        try:
            k, v = _tagged.checked_tag(k, value)
        except TaggedUrnError as e:
            raise CapUrnError(f"invalid cap URN: {e}", reason="syntax", cause=e) from e
        return _assemble(self.in_spec, self.out_spec, self.effect, {**self._tags, k: v})

    def without_tag(self, key: str) -> CapUrn:
        """This cap without y tag ``key`` (absent: unchanged).

        :raises CapUrnError: ``key`` is structural (``reason="structural_key"``), or the
            result is not admissible (``reason="bare_top"`` when nothing is left).
        """
        k = key.lower()
        if k in _STRUCTURAL:
            raise CapUrnError(
                f"{k!r} is a coordinate and cannot be removed", reason="structural_key"
            )
        if k not in self._tags:
            return self
        tags = {t: v for t, v in self._tags.items() if t != k}
        return _assemble(self.in_spec, self.out_spec, self.effect, tags)

    def with_in_spec(self, in_spec: str | MediaUrn) -> CapUrn:
        """This cap taking ``in_spec`` (text or value; ``""`` is ``media:``).

        :raises CapUrnError: not a media URN (``reason="invalid_in_spec"``), or the
            result is not admissible.
        """
        return _assemble(_coordinate(in_spec, "in"), self.out_spec, self.effect, self._tags)

    def with_out_spec(self, out_spec: str | MediaUrn) -> CapUrn:
        """This cap giving ``out_spec`` (text or value; ``""`` is ``media:``).

        :raises CapUrnError: not a media URN (``reason="invalid_out_spec"``), or the
            result is not admissible.
        """
        return _assemble(self.in_spec, _coordinate(out_spec, "out"), self.effect, self._tags)

    def with_effect(self, effect: CapEffect) -> CapUrn:
        """This cap with another effect.

        :raises CapUrnError: the result is not admissible.
        """
        return _assemble(self.in_spec, self.out_spec, CapEffect(effect), self._tags)

    def subset(self, keys: Iterable[str]) -> CapUrn:
        """This cap keeping only the y tags named in ``keys`` (coordinates kept;
        structural names in ``keys`` ignored).

        :raises CapUrnError: the result is not admissible.
        """
        wanted = {k.lower() for k in keys}
        tags = {t: v for t, v in self._tags.items() if t in wanted}
        return _assemble(self.in_spec, self.out_spec, self.effect, tags)

    def merge(self, other: CapUrn) -> CapUrn:
        """``other``'s coordinates, this cap's y tags updated with ``other``'s
        (``other`` wins a key both have).

        :raises CapUrnError: the result is not admissible.
        :raises PrefixMismatchError: ``other`` is not a :class:`CapUrn`.
        """
        o = self._same_kind(other)
        return _assemble(o.in_spec, o.out_spec, o.effect, {**self._tags, **o._tags})

    # --- order -------------------------------------------------------------------
    def ordering_key(
        self,
    ) -> tuple[
        tuple[str, tuple[tuple[str, str], ...]],
        tuple[str, tuple[tuple[str, str], ...]],
        int,
        tuple[tuple[str, str], ...],
    ]:
        """The reference's structural order: ``in=``, ``out=`` (each by
        :meth:`MediaUrn.ordering_key`), the effect (declared, none, patch, ``?``), then
        the y tags as ``(key, stored value)`` pairs in key order. A total order on caps."""
        return (
            self.in_spec.ordering_key(),
            self.out_spec.ordering_key(),
            _EFFECT_RANK[self.effect.value],
            tuple(self._tags.items()),
        )


# --- parsing -----------------------------------------------------------------------
_EFFECTS: Final[Mapping[str, CapEffect]] = {
    "declared": CapEffect.DECLARED,
    "none": CapEffect.NONE,
    "patch": CapEffect.PATCH,
    "?": CapEffect.ANY,
    "*": CapEffect.ANY,
}


def _direction(stored: str | None, which: str) -> MediaUrn:
    """The in/out coordinate from its stored value: missing or ``*`` is top."""
    if stored is None or stored == "*" or stored == MEDIA_TOP:
        return MediaUrn.parse(MEDIA_TOP)
    try:
        return MediaUrn.parse(stored)
    except (TaggedUrnError, MediaUrnError) as e:
        raise CapUrnError(
            f"invalid media URN for {which} spec {stored!r}: {e}",
            reason=f"invalid_{which}_spec",
            cause=e,
        ) from e


def _reparse(media: MediaUrn, which: str) -> None:
    """The canonical media text must parse again (the reference re-reads it)."""
    try:
        MediaUrn.parse(media.text)
    except (TaggedUrnError, MediaUrnError) as e:
        raise CapUrnError(
            f"invalid media URN for {which} spec {media.text!r}: {e}",
            reason=f"invalid_{which}_spec",
            cause=e,
        ) from e


@functools.lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _parse_cached(text: str) -> CapUrn:
    try:
        prefix, raw = _tagged.parse_tagged(text)
    except TaggedUrnError as e:
        raise CapUrnError(f"invalid cap URN: {e}", reason="syntax", cause=e) from e
    if prefix != _PREFIX:
        raise CapUrnError("cap identifier must start with 'cap:'", reason="wrong_prefix")
    in_spec = _direction(raw.get("in"), "in")
    out_spec = _direction(raw.get("out"), "out")
    raw_effect = raw.get("effect")
    effect = CapEffect.DECLARED if raw_effect is None else _EFFECTS.get(raw_effect)
    if effect is None:
        raise CapUrnError(
            f"unsupported effect {raw_effect!r}: use declared, none, patch, or ?effect",
            reason="unsupported_effect",
        )
    _reparse(in_spec, "in")
    _reparse(out_spec, "out")
    y = {k: raw[k] for k in sorted(raw) if k not in _STRUCTURAL}
    y_text = _tagged.tags_to_text(y)
    try:  # the y tags' canonical text must parse again, as in the reference
        _tagged.parse_tagged(f"{_PREFIX}:{y_text}")
    except TaggedUrnError as e:
        raise CapUrnError(f"invalid cap URN: {e}", reason="syntax", cause=e) from e

    if in_spec.is_top() and out_spec.is_top() and not y and effect is CapEffect.DECLARED:
        raise CapUrnError(
            "illegal bare top cap; use cap:effect=none for identity, or declare a "
            "non-vacuous input/output/effect/tag",
            reason="bare_top",
        )
    if effect is CapEffect.NONE and not in_spec.conforms_to(out_spec):
        raise CapUrnError(
            f"effect=none requires declared input {in_spec.text!r} to conform to "
            f"declared output {out_spec.text!r}",
            reason="effect_none_inadmissible",
        )
    # effect=patch: the witness (in with the in->out edits applied) is out itself,
    # so it always conforms; the reference's check cannot fail in this version.

    full = dict(y)
    if not in_spec.is_top():
        full["in"] = in_spec.text
    if not out_spec.is_top():
        full["out"] = out_spec.text
    if effect is not CapEffect.DECLARED:
        full["effect"] = effect.value
    return CapUrn(
        text=f"{_PREFIX}:{_tagged.tags_to_text(full)}",
        in_spec=in_spec,
        out_spec=out_spec,
        effect=effect,
        tags=MappingProxyType(y),
        y_left=MappingProxyType(_tagged.constraints_of(y)),
        y_right=MappingProxyType(_tagged.pattern_constraints_of(y)),
        specificity=_WEIGHT_OUT * out_spec.specificity
        + _WEIGHT_IN * in_spec.specificity
        + _tagged.specificity_of(y),
    )


def _coordinate(spec: str | MediaUrn, which: str) -> MediaUrn:
    """An in/out coordinate given as text or value."""
    if isinstance(spec, MediaUrn):
        return spec
    return _direction(spec if spec else None, which)


def _assemble(
    in_spec: MediaUrn, out_spec: MediaUrn, effect: CapEffect, tags: Mapping[str, str]
) -> CapUrn:
    """The cap of these coordinates and y tags, through the parser (so every check holds)."""
    full = dict(tags)
    full["in"] = in_spec.text
    full["out"] = out_spec.text
    if effect is not CapEffect.DECLARED:
        full["effect"] = effect.value
    return _parse_cached(f"{_PREFIX}:{_tagged.tags_to_text(full)}")


def parse_cap_or_none(text: str) -> CapUrn | None:
    """:meth:`CapUrn.parse`, or None when ``text`` is not a cap URN."""
    try:
        return _parse_cached(text)
    except CapUrnError:
        return None
