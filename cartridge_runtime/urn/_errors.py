"""Typed errors of the URN layer.

One root, :class:`UrnError` (a :class:`ValueError`: a URN that does not parse is
bad input, never a crash). Below it, three families mirror the reference's
categories so tests can compare them one to one with the vectors:

* :class:`TaggedUrnError` and its subclasses — the generic grammar of
  ``prefix:tag;tag`` (URN-1 to URN-5). The class *is* the category;
  ``reason`` is the same category in snake case.
* :class:`MediaUrnError` — a well-formed tagged URN that is not a media URN
  (``reason`` is ``wrong_prefix`` or ``void_not_atomic``).
* :class:`CapUrnError` — a cap URN refused at any layer; ``reason`` is one of
  :data:`CAP_REASONS` and ``cause`` holds the underlying tagged/media error when
  there is one (the vectors' ``cause`` field is ``type(cause).__name__``).

URN errors are not wire errors, so they stay outside the package's error tree
(``protocol.CartridgeRuntimeError``); the runtime turns them into the proper ERR
frame itself.
"""

from __future__ import annotations

from typing import ClassVar, Final

from ..errors import DefinitionError

__all__ = (
    "UrnError",
    "TaggedUrnError",
    "EmptyError",
    "MissingPrefixError",
    "EmptyPrefixError",
    "InvalidTagFormatError",
    "EmptyTagComponentError",
    "InvalidCharacterError",
    "DuplicateKeyError",
    "NumericKeyError",
    "UnterminatedQuoteError",
    "InvalidEscapeSequenceError",
    "WhitespaceInInputError",
    "PrefixMismatchError",
    "MediaUrnError",
    "CapUrnError",
    "MEDIA_REASONS",
    "CAP_REASONS",
)


class UrnError(DefinitionError):
    """Root of every URN error: the text is not an acceptable URN, or two URNs
    cannot be compared.

    :ivar reason: a short machine-readable category (snake case).
    """

    #: Category of the class; instances may narrow it (media and cap errors do).
    default_reason: ClassVar[str] = "urn"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason: str = reason if reason is not None else self.default_reason


class TaggedUrnError(UrnError):
    """The text breaks the generic tagged-URN grammar (URN-1)."""

    default_reason = "tagged_urn"


class EmptyError(TaggedUrnError):
    """The input is the empty string."""

    default_reason = "empty"


class MissingPrefixError(TaggedUrnError):
    """The input has no ``:`` at all, hence no prefix."""

    default_reason = "missing_prefix"


class EmptyPrefixError(TaggedUrnError):
    """The input starts with ``:``."""

    default_reason = "empty_prefix"


class InvalidTagFormatError(TaggedUrnError):
    """Kept for parity with the reference's class list; the parser never raises it."""

    default_reason = "invalid_tag_format"


class EmptyTagComponentError(TaggedUrnError):
    """A tag has an empty value (``k=``, ``k=""``) or a qualifier without a key."""

    default_reason = "empty_tag_component"


class InvalidCharacterError(TaggedUrnError):
    """A character is not allowed where it stands (URN-2)."""

    default_reason = "invalid_character"


class DuplicateKeyError(TaggedUrnError):
    """The same key (after lower-casing) appears twice."""

    default_reason = "duplicate_key"


class NumericKeyError(TaggedUrnError):
    """A key made entirely of digits."""

    default_reason = "numeric_key"


class UnterminatedQuoteError(TaggedUrnError):
    """The input ends inside a quoted value."""

    default_reason = "unterminated_quote"


class InvalidEscapeSequenceError(TaggedUrnError):
    """A backslash in a quoted value followed by something other than ``"`` or ``\\``."""

    default_reason = "invalid_escape_sequence"


class WhitespaceInInputError(TaggedUrnError):
    """Leading or trailing whitespace (anything ``str.strip`` removes)."""

    default_reason = "whitespace_in_input"


class PrefixMismatchError(TaggedUrnError):
    """Two URNs of different prefixes were compared."""

    default_reason = "prefix_mismatch"


#: The reasons a :class:`MediaUrnError` can carry.
MEDIA_REASONS: Final = frozenset(
    {
        "wrong_prefix",
        "void_not_atomic",
        "invalid_extension",  # a builder for a file extension got no usable extension
    }
)


class MediaUrnError(UrnError):
    """A tagged URN that is not an admissible media URN (URN-11, URN-12)."""

    default_reason = "wrong_prefix"


#: The reasons a :class:`CapUrnError` can carry (the vectors' ``reason`` field).
CAP_REASONS: Final = frozenset(
    {
        "syntax",  # tag-layer error in the cap text itself; ``cause`` is it
        "wrong_prefix",  # prefix is not ``cap``
        "bare_top",  # in/out top, no tag, effect declared
        "unsupported_effect",  # effect value other than declared/none/patch/?/*
        "empty_effect",  # unreachable from text (empty values fail earlier); kept for parity
        "empty_direction",  # unreachable from text; kept for parity
        "invalid_in_spec",  # in= is not a media URN; ``cause`` is the media-layer error
        "invalid_out_spec",  # out= likewise
        "effect_none_inadmissible",  # effect=none but in does not conform to out
        "effect_patch_inadmissible",  # cannot happen in this version; kept for parity
        "structural_key",  # an edit named in/out/effect as if it were a y tag
        # Output typing (REQ-23), not parsing:
        "runtime_input_mismatch",  # runtime input does not satisfy the declared in
        "runtime_output_mismatch",  # inferred output does not satisfy the declared out
    }
)


class CapUrnError(UrnError):
    """A cap URN refused at any layer (URN-13, URN-14).

    :ivar reason: one of :data:`CAP_REASONS`.
    :ivar cause: the tagged-URN or media-URN error underneath, if any (also
        chained as ``__cause__``).
    """

    default_reason = "syntax"

    def __init__(
        self, message: str, *, reason: str | None = None, cause: UrnError | None = None
    ) -> None:
        super().__init__(message, reason=reason)
        self.cause: UrnError | None = cause
        if cause is not None:
            self.__cause__ = cause
