"""RFC 8785 JSON Canonicalization Scheme (JCS).

The canonical form is what gets signed, so two parties that hold the same JSON value must
produce the same bytes: UTF-8, no insignificant whitespace, object members sorted by the
UTF-16 code units of their names, strings with only the mandatory escapes, and numbers
written the way ECMAScript's ``Number.prototype.toString`` writes an IEEE 754 double.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal

from certificates.errors import CanonicalizationError

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer every JSON parser reads back exactly (I-JSON, RFC 7493 §2.2)."""

MAX_DEPTH = 256
"""Deepest nesting of arrays and objects accepted."""

_MANDATORY_ESCAPE = re.compile(r'["\\\x00-\x1f]')
_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def canonicalize(value: object) -> bytes:
    """Return the RFC 8785 canonical JSON encoding of ``value`` as UTF-8 bytes.

    Accepts ``None``, ``bool``, ``int`` (within ±(2**53 - 1)), finite ``float``, ``str``,
    mappings with ``str`` keys and sequences (``list``/``tuple``). Anything else — NaN,
    infinities, non-string keys, bytes, sets, lone surrogates, nesting deeper than
    :data:`MAX_DEPTH` — raises :class:`CanonicalizationError`.
    """
    parts: list[str] = []
    _write(value, parts, 0)
    text = "".join(parts)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalizationError("string contains a lone surrogate (not UTF-8)") from exc


def _write(value: object, parts: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise CanonicalizationError(f"nesting deeper than {MAX_DEPTH}")
    if value is None:
        parts.append("null")
    elif isinstance(value, bool):
        parts.append("true" if value else "false")
    elif isinstance(value, int):
        parts.append(_integer(value))
    elif isinstance(value, float):
        parts.append(format_number(value))
    elif isinstance(value, str):
        parts.append(_string(value))
    elif isinstance(value, Mapping):
        _write_object(value, parts, depth)
    elif isinstance(value, list | tuple):
        _write_array(value, parts, depth)
    else:
        raise CanonicalizationError(f"type {type(value).__name__} has no JSON form")


def _write_object(value: Mapping[object, object], parts: list[str], depth: int) -> None:
    keys: list[str] = []
    for key in value:
        if not isinstance(key, str):
            raise CanonicalizationError(f"object key {key!r} is not a string")
        keys.append(key)
    parts.append("{")
    for index, key in enumerate(sorted(keys, key=_utf16_order)):
        if index:
            parts.append(",")
        parts.append(_string(key))
        parts.append(":")
        _write(value[key], parts, depth + 1)
    parts.append("}")


def _write_array(value: Sequence[object], parts: list[str], depth: int) -> None:
    parts.append("[")
    for index, item in enumerate(value):
        if index:
            parts.append(",")
        _write(item, parts, depth + 1)
    parts.append("]")


def _utf16_order(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like the sequence of UTF-16 code units, which
    # is the order RFC 8785 §3.2.3 prescribes (it differs from code point order above the
    # BMP). Lone surrogates pass here and are rejected by the final UTF-8 encode.
    return key.encode("utf-16-be", "surrogatepass")


def _string(text: str) -> str:
    return '"' + _MANDATORY_ESCAPE.sub(_escape, text) + '"'


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT_ESCAPES.get(char) or f"\\u{ord(char):04x}"


def _integer(value: int) -> str:
    # Security: a larger integer reads back rounded in JavaScript and many other parsers,
    # so the signer and a verifier would disagree about what was signed.
    number = int(value)
    if abs(number) > MAX_SAFE_INTEGER:
        raise CanonicalizationError(f"integer {number} is outside ±(2**53 - 1)")
    return str(number)


def format_number(value: float) -> str:
    """Write a finite float as ECMAScript ``Number.prototype.toString`` does (ES2019 7.1.12.1).

    Raises :class:`CanonicalizationError` for NaN and infinities.
    """
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        raise CanonicalizationError(f"{number} has no JSON form")
    if number == 0:
        return "0"  # also -0.0: ECMAScript prints negative zero as "0"
    if number < 0:
        return "-" + format_number(-number)
    digits, point = _shortest_digits(number)
    return _place_point(digits, point)


def _shortest_digits(number: float) -> tuple[str, int]:
    """Return (digits, n) with number == 0.digits * 10**n and the fewest digits that round-trip.

    Python's ``repr`` already yields the shortest correctly rounded round-trip string,
    which is the digit string ECMAScript requires.
    """
    _, digit_tuple, exponent = Decimal(repr(number)).as_tuple()
    if not isinstance(exponent, int):  # only NaN/Infinity have a non-integer exponent
        raise CanonicalizationError(f"{number} has no JSON form")
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    return digits, len(digit_tuple) + exponent


def _place_point(digits: str, point: int) -> str:
    count = len(digits)
    if count <= point <= 21:
        return digits + "0" * (point - count)
    if 0 < point <= 21:
        return digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return "0." + "0" * -point + digits
    exponent = point - 1
    sign = "+" if exponent >= 0 else "-"
    mantissa = digits if count == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{sign}{abs(exponent)}"
