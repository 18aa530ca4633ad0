"""Constants of machine notation: JSON values read from text and written back.

A constant is ``None``, ``bool``, ``str``, ``int``, ``float``, ``list`` or ``dict``. Whole
numbers and floats stay apart (``1`` and ``1.0`` are two constants), as they do in the
reference's JSON value: a number written without fraction or exponent is an ``int`` while it
fits 64 bits (signed or unsigned), any other number a finite ``float``; ``-0`` is the float
``-0.0``. :func:`constant_text` writes the one text every implementation writes for a value,
which is what makes canonical notation byte-identical across implementations (MCH-7).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ("constant_text", "constants_equal", "decode_constant", "checked_constant")

#: The range of whole numbers a constant holds as a whole number (i64 and u64 together).
WHOLE_MIN: Final = -(2**63)
WHOLE_MAX: Final = 2**64 - 1
#: Digits before the point that are still written without an exponent.
_PLAIN_DIGITS: Final = 16
#: Zeros after the point (before the first digit) still written without an exponent.
_PLAIN_ZEROS: Final = 4


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large for a number")
    return value


def _whole(text: str) -> int | float:
    value = int(text)
    if value == 0 and text.startswith("-"):
        return -0.0
    if WHOLE_MIN <= value <= WHOLE_MAX:
        return value
    return _finite(text)


def _refuse(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON value")


def _no_half_characters(value: Any) -> None:
    if isinstance(value, str):
        for char in value:
            if 0xD800 <= ord(char) <= 0xDFFF:
                raise ValueError(f"the escape \\u{ord(char):04x} is half of a character")
    elif isinstance(value, list):
        for item in value:
            _no_half_characters(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_half_characters(key)
            _no_half_characters(item)


def decode_constant(text: str) -> Any:
    """The JSON value ``text`` writes.

    :raises ValueError: the text is not one JSON value, a number is not finite, or a string
        holds half of a surrogate pair.
    """
    value = json.loads(text, parse_int=_whole, parse_float=_finite, parse_constant=_refuse)
    _no_half_characters(value)
    return value


def checked_constant(value: Any) -> Any:
    """``value`` as a constant (tuples become lists), or :class:`ValueError` naming what is not
    a JSON value (a builder's constant is checked like a parsed one)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not WHOLE_MIN <= value <= WHOLE_MAX:
            raise ValueError("a whole number outside 64 bits is not a constant")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("a number that is not finite is not a constant")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"an object key is a string, not {type(key).__name__}")
            out[key] = checked_constant(item)
        return out
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [checked_constant(item) for item in value]
    raise ValueError(f"{type(value).__name__} is not a JSON value")


def _kind(value: Any) -> int:
    # bool before int: a bool is an int to Python, never to JSON.
    if value is None:
        return 0
    if isinstance(value, bool):
        return 1
    if isinstance(value, int):
        return 2
    if isinstance(value, float):
        return 3
    if isinstance(value, str):
        return 4
    if isinstance(value, list):
        return 5
    return 6


def constants_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: a whole number never equals a float, nor a bool a number;
    object keys carry no order."""
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == 5:
        return len(a) == len(b) and all(constants_equal(x, y) for x, y in zip(a, b, strict=True))
    if kind == 6:
        return a.keys() == b.keys() and all(constants_equal(a[k], b[k]) for k in a)
    return bool(a == b)


_ESCAPED: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _string_text(text: str) -> str:
    parts = ['"']
    for char in text:
        if char in _ESCAPED:
            parts.append(_ESCAPED[char])
        elif char < " ":
            parts.append(f"\\u{ord(char):04x}")
        else:
            parts.append(char)
    parts.append('"')
    return "".join(parts)


def float_text(value: float) -> str:
    """The shortest decimal that reads back as ``value``, laid out as the reference writes it:
    plain while it has at most 16 digits before the point and at most 4 zeros after it, with
    an exponent (``1e+16``, ``1.5e-7``) otherwise; a whole float keeps ``.0``."""
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest round-tripping digits; take them apart into digits and exponent.
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # ``point``: where the decimal point sits relative to the first significant digit.
    point = len(whole) + (int(exp_text) if exp_text else 0)
    if whole == "0":
        point -= len(fraction) - len(fraction.lstrip("0")) + 1
    digits = digits.rstrip("0") or "0"
    count = len(digits)
    if count <= point <= _PLAIN_DIGITS:
        return f"{sign}{digits}{'0' * (point - count)}.0"
    if 0 < point <= _PLAIN_DIGITS:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if -_PLAIN_ZEROS <= point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    power = point - 1
    shown = digits if count == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{sign}{shown}e{'+' if power > 0 else '-'}{abs(power)}"


def constant_text(value: Any) -> str:
    """The canonical text of a constant: compact JSON, object keys sorted, strings with only
    the quote, the backslash and control characters escaped (MCH-7)."""
    kind = _kind(value)
    if kind == 0:
        return "null"
    if kind == 1:
        return "true" if value else "false"
    if kind == 2:
        return str(value)
    if kind == 3:
        return float_text(value)
    if kind == 4:
        return _string_text(value)
    if kind == 5:
        return "[" + ",".join(constant_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(f"{_string_text(k)}:{constant_text(value[k])}" for k in sorted(value))
            + "}"
        )
    raise TypeError(f"{type(value).__name__} is not a constant")
