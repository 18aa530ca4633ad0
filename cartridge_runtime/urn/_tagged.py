"""The generic tagged-URN layer: grammar, canonical text, and the tag relations.

Theory of operation
-------------------
``parse_tagged(text)`` turns ``prefix:tag;tag;...`` into ``(prefix, tags)``
where ``tags`` maps each lower-cased key to its *stored value* (URN-6): ``*``
(present, any value), ``?`` (no constraint), ``!`` (absent), ``?=v`` (absent or
not v), ``!=v`` (present and not v) or an exact value. The scanner is one
left-to-right state machine so that the *first* failing character decides
the error class, exactly as the reference does (``media:123#`` is an invalid
character, ``media:123;#`` a numeric key).

For the relations each stored value is read as the set of states a key may be
in: a pair ``(unset_ok, mode, value)`` where ``mode`` says which *set to s*
states are allowed (all, all but ``value``, only ``value``, none). Refinement
is set inclusion, "meets" is a non-empty intersection (URN-9); the *closed*
variants read a key the left side omits as ``!`` (absent) — but a left-side
``?`` stays "anything". So each URN keeps two maps: every key (left side), and
every key but ``?`` ones (right side, where ``?`` can never fail a check).
Relations take ``(left_all, right_pattern)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ._errors import (
    DuplicateKeyError,
    EmptyError,
    EmptyPrefixError,
    EmptyTagComponentError,
    InvalidCharacterError,
    InvalidEscapeSequenceError,
    MissingPrefixError,
    NumericKeyError,
    UnterminatedQuoteError,
    WhitespaceInInputError,
)

__all__ = (
    "Constraint",
    "Constraints",
    "parse_tagged",
    "tags_to_text",
    "checked_tag",
    "constraints_of",
    "pattern_constraints_of",
    "score",
    "specificity_of",
    "refines",
    "meets",
    "refines_closed",
    "meets_closed",
)

# --- scanner states ---------------------------------------------------------
_KEY_START: Final = 0  # expecting a key (or a prefix qualifier, or ';')
_AFTER_QUAL: Final = 1  # just read a prefix qualifier ? or !
_IN_KEY: Final = 2
_AFTER_INFIX: Final = 3  # key followed by an infix qualifier ? or !
_VALUE_START: Final = 4  # right after '='
_IN_VALUE: Final = 5  # unquoted value
_IN_QUOTED: Final = 6
_QUOTED_ESCAPE: Final = 7  # after a backslash inside quotes
_AFTER_QUOTE: Final = 8  # after the closing quote: only ';' or end

_KEY_EXTRA: Final = frozenset("_-/:.")
_VALUE_EXTRA: Final = frozenset("_-/:.*?!")
_SIGILS: Final = frozenset(("*", "?", "!"))


def _is_key_char(c: str) -> bool:
    return c.isalnum() or c in _KEY_EXTRA


def _is_value_char(c: str) -> bool:
    return c.isalnum() or c in _VALUE_EXTRA


def _finish(tags: dict[str, str], key: str, qualifier: str, value: str | None) -> None:
    """Store one tag; ``value`` is None when the tag had no ``=value`` part."""
    if value is None:
        stored = qualifier or "*"
    elif qualifier:
        if value in _SIGILS:
            raise InvalidCharacterError(
                f"qualifier {qualifier!r} on key {key!r} cannot combine with sigil value {value!r}"
            )
        stored = f"{qualifier}={value}"
    else:
        if not value:
            raise EmptyTagComponentError(f"empty value for key {key!r}")
        stored = value
    if key in tags:
        raise DuplicateKeyError(f"duplicate tag key: {key!r}")
    if key.isdigit():
        raise NumericKeyError(f"tag key cannot be purely numeric: {key!r}")
    tags[key] = stored


def parse_tagged(text: str) -> tuple[str, dict[str, str]]:
    """Parse ``prefix:tags`` into the lower-cased prefix and the stored tag map.

    :raises TaggedUrnError: the subclass naming the first problem met (URN-1).
    """
    if text != text.strip():
        raise WhitespaceInInputError(f"tagged URN has leading or trailing whitespace: {text!r}")
    if not text:
        raise EmptyError("tagged URN cannot be empty")
    colon = text.find(":")
    if colon == -1:
        raise MissingPrefixError(f"tagged URN must have a prefix followed by ':': {text!r}")
    if colon == 0:
        raise EmptyPrefixError(f"tagged URN prefix cannot be empty: {text!r}")
    prefix = text[:colon].lower()
    body = text[colon + 1 :]
    tags: dict[str, str] = {}
    if not body or body == ";":
        return prefix, tags

    state = _KEY_START
    key_parts: list[str] = []
    val_parts: list[str] = []
    qualifier = ""
    pos = colon  # position of the current char within ``text`` (for messages)
    for c in body:
        pos += 1
        if state == _KEY_START:
            if c == ";":
                continue
            if c == "?" or c == "!":
                qualifier = c
                state = _AFTER_QUAL
            elif _is_key_char(c):
                key_parts.append(c.lower())
                state = _IN_KEY
            else:
                raise InvalidCharacterError(f"invalid character {c!r} at position {pos}")
        elif state == _IN_KEY:
            if c == ";":
                _finish(tags, "".join(key_parts), qualifier, None)
                key_parts.clear()
                qualifier = ""
                state = _KEY_START
            elif c == "=":
                state = _VALUE_START
            elif c == "?" or c == "!":
                if qualifier:
                    raise InvalidCharacterError(
                        f"prefix and infix qualifiers combined at position {pos}"
                    )
                qualifier = c
                state = _AFTER_INFIX
            elif _is_key_char(c):
                key_parts.append(c.lower())
            else:
                raise InvalidCharacterError(f"invalid character {c!r} in key at position {pos}")
        elif state == _IN_VALUE:
            if c == ";":
                _finish(tags, "".join(key_parts), qualifier, "".join(val_parts))
                key_parts.clear()
                val_parts.clear()
                qualifier = ""
                state = _KEY_START
            elif _is_value_char(c):
                val_parts.append(c.lower())
            else:
                raise InvalidCharacterError(
                    f"invalid character {c!r} in unquoted value at position {pos}"
                )
        elif state == _IN_QUOTED:
            if c == '"':
                state = _AFTER_QUOTE
            elif c == "\\":
                state = _QUOTED_ESCAPE
            else:
                val_parts.append(c)
        elif state == _VALUE_START:
            if c == '"':
                state = _IN_QUOTED
            elif c == ";":
                raise EmptyTagComponentError(f"empty value for key {''.join(key_parts)!r}")
            elif _is_value_char(c):
                val_parts.append(c.lower())
                state = _IN_VALUE
            else:
                raise InvalidCharacterError(f"invalid character {c!r} in value at position {pos}")
        elif state == _AFTER_QUAL:
            if _is_key_char(c):
                key_parts.append(c.lower())
                state = _IN_KEY
            else:
                raise InvalidCharacterError(
                    f"expected a key character after {qualifier!r}, got {c!r} at position {pos}"
                )
        elif state == _AFTER_INFIX:
            if c == "=":
                state = _VALUE_START
            elif c == ";":
                _finish(tags, "".join(key_parts), qualifier, None)
                key_parts.clear()
                qualifier = ""
                state = _KEY_START
            else:
                raise InvalidCharacterError(
                    f"expected '=' or ';' after an infix qualifier, got {c!r} at position {pos}"
                )
        elif state == _QUOTED_ESCAPE:
            if c == '"' or c == "\\":
                val_parts.append(c)
                state = _IN_QUOTED
            else:
                raise InvalidEscapeSequenceError(
                    f'invalid escape sequence at position {pos} (only \\" and \\\\ allowed)'
                )
        else:  # _AFTER_QUOTE
            if c == ";":
                _finish(tags, "".join(key_parts), qualifier, "".join(val_parts))
                key_parts.clear()
                val_parts.clear()
                qualifier = ""
                state = _KEY_START
            else:
                raise InvalidCharacterError(
                    f"expected ';' or end after a quoted value, got {c!r} at position {pos}"
                )

    if state in (_IN_VALUE, _AFTER_QUOTE):
        _finish(tags, "".join(key_parts), qualifier, "".join(val_parts))
    elif state in (_IN_KEY, _AFTER_INFIX):
        _finish(tags, "".join(key_parts), qualifier, None)
    elif state in (_IN_QUOTED, _QUOTED_ESCAPE):
        raise UnterminatedQuoteError(f"unterminated quote in {text!r}")
    elif state == _AFTER_QUAL:
        raise EmptyTagComponentError(f"qualifier {qualifier!r} at end of input has no key")
    elif state == _VALUE_START:
        raise EmptyTagComponentError(f"empty value for key {''.join(key_parts)!r}")
    return prefix, tags


# --- canonical text ---------------------------------------------------------
_QUOTE_TRIGGERS: Final = frozenset(';="\\ ')


def _render_value(value: str) -> str:
    """Quote ``value`` iff it holds ``; = " \\``, a space, or an upper-case char."""
    if any(c in _QUOTE_TRIGGERS or c.isupper() for c in value):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value


def _render_tag(key: str, value: str) -> str:
    if value == "*":
        return key
    if value == "?":
        return "?" + key
    if value == "!":
        return "!" + key
    if value.startswith("?="):
        return f"{key}?={_render_value(value[2:])}"
    if value.startswith("!="):
        return f"{key}!={_render_value(value[2:])}"
    return f"{key}={_render_value(value)}"


def tags_to_text(tags: Mapping[str, str]) -> str:
    """The canonical tag body: tags sorted by key (code points), ``;``-joined."""
    return ";".join(_render_tag(k, tags[k]) for k in sorted(tags))


def checked_tag(key: str, value: str) -> tuple[str, str]:
    """``(key lower-cased, value)`` for a tag added by an edit (``with_tag``), after the
    checks the parser would make: a key of key characters, not purely numeric, and a stored
    value that renders to text which parses back to the same stored value.

    :raises TaggedUrnError: the subclass the parser raises for the same tag.
    """
    k = key.lower()
    if not k:
        raise EmptyTagComponentError("empty tag key")
    if not value:
        raise EmptyTagComponentError(f"empty value for key {k!r} (use '*' for a marker)")
    bad = next((c for c in k if not _is_key_char(c)), None)
    if bad is not None:
        raise InvalidCharacterError(f"invalid character {bad!r} in key {k!r}")
    if k.isdigit():
        raise NumericKeyError(f"tag key cannot be purely numeric: {k!r}")
    _, back = parse_tagged(f"x:{_render_tag(k, value)}")
    if back.get(k) != value or len(back) != 1:
        raise InvalidCharacterError(f"value for key {k!r} has no canonical text")
    return k, value


# --- constraints and relations ----------------------------------------------
_ALL: Final = 0  # every "set to s" state
_EXCEPT: Final = 1  # every "set to s" state but s == value
_ONLY: Final = 2  # only "set to value"
_NONE: Final = 3  # no "set" state

#: ``(unset_ok, mode, value)``: the set of states a stored value allows.
Constraint = tuple[bool, int, str]
#: Key -> constraint, for every key whose stored value is not ``?``.
Constraints = Mapping[str, Constraint]

_OPEN: Final[Constraint] = (True, _ALL, "")  # missing key (open reading) or ``?``
_ABSENT: Final[Constraint] = (True, _NONE, "")  # ``!``, and a missing key read closed


def _constraint(value: str) -> Constraint:
    if value == "*":
        return (False, _ALL, "")
    if value == "!":
        return _ABSENT
    if value.startswith("?="):
        return (True, _EXCEPT, value[2:])
    if value.startswith("!="):
        return (False, _EXCEPT, value[2:])
    return (False, _ONLY, value)


def constraints_of(tags: Mapping[str, str]) -> dict[str, Constraint]:
    """The constraint map of a stored tag map, every key included.

    Used on the *left* (instance) side of a relation, where ``?`` and a missing
    key differ under the closed reading (missing reads as absent, ``?`` as anything).
    """
    return {k: (_OPEN if v == "?" else _constraint(v)) for k, v in tags.items()}


def pattern_constraints_of(tags: Mapping[str, str]) -> dict[str, Constraint]:
    """The constraint map with ``?`` tags dropped, for the *right* (pattern) side:
    there a ``?`` allows every state, like a missing key, so it can never fail."""
    return {k: _constraint(v) for k, v in tags.items() if v != "?"}


def score(value: str) -> int:
    """Specificity of one stored value (URN-8): ``?`` 0, ``?=v`` 1, ``*`` 2,
    ``!=v`` 3, exact 4, ``!`` 5."""
    if value == "?":
        return 0
    if value == "*":
        return 2
    if value == "!":
        return 5
    if value.startswith("?="):
        return 1
    if value.startswith("!="):
        return 3
    return 4


def specificity_of(tags: Mapping[str, str]) -> int:
    """Sum of the per-tag scores."""
    return sum(score(v) for v in tags.values())


def _subset(a: Constraint, b: Constraint) -> bool:
    """allowed(a) ⊆ allowed(b), over an unbounded universe of values."""
    if a[0] and not b[0]:
        return False
    ma, mb = a[1], b[1]
    if ma == _NONE or mb == _ALL:
        return True
    if ma == _ALL:
        return False
    if ma == _EXCEPT:
        return mb == _EXCEPT and a[2] == b[2]
    # ma == _ONLY
    if mb == _EXCEPT:
        return a[2] != b[2]
    return mb == _ONLY and a[2] == b[2]


def _intersects(a: Constraint, b: Constraint) -> bool:
    """allowed(a) ∩ allowed(b) ≠ ∅."""
    if a[0] and b[0]:
        return True
    ma, mb = a[1], b[1]
    if ma == _NONE or mb == _NONE:
        return False
    if ma == _ALL or mb == _ALL:
        return True
    if ma == _EXCEPT and mb == _EXCEPT:
        return True
    if ma == _ONLY and mb == _ONLY:
        return a[2] == b[2]
    return a[2] != b[2]  # one EXCEPT, one ONLY


def refines(inst: Constraints, patt: Constraints) -> bool:
    """Every key: allowed(inst) ⊆ allowed(patt) (open reading; ``conforms_to``)."""
    get = inst.get
    return all(_subset(get(k, _OPEN), c) for k, c in patt.items())


def refines_closed(inst: Constraints, patt: Constraints) -> bool:
    """Like :func:`refines`, a key ``inst`` omits read as absent (``satisfies``)."""
    get = inst.get
    return all(_subset(get(k, _ABSENT), c) for k, c in patt.items())


def meets(a: Constraints, b: Constraints) -> bool:
    """Every key: some state both allow (symmetric)."""
    get = a.get
    return all(_intersects(get(k, _OPEN), c) for k, c in b.items())


def meets_closed(a: Constraints, b: Constraints) -> bool:
    """Like :func:`meets`, a key ``a`` omits read as absent (``may_satisfy``)."""
    get = a.get
    return all(_intersects(get(k, _ABSENT), c) for k, c in b.items())
