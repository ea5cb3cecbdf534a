"""RFC 8785 canonical JSON: numbers, strings, key order, refusals."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from certificates import CanonicalizationError, canonicalize


def _double(bits: str) -> float:
    return float(struct.unpack(">d", bytes.fromhex(bits))[0])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # The values of the RFC 8785 §3.2.2 example, as parsed from its JSON text.
        (333333333.33333329, "333333333.3333333"),
        (1e30, "1e+30"),
        (4.50, "4.5"),
        (2e-3, "0.002"),
        (0.000000000000000000000000001, "1e-27"),
        (-0.0, "0"),
        (0.0, "0"),
        # Where ECMAScript switches between plain and exponent form.
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (123.0, "123"),
        (-1.5, "-1.5"),
        (0.1 + 0.2, "0.30000000000000004"),
        (9007199254740992.0, "9007199254740992"),
        # IEEE 754 edge values given by bit pattern.
        (_double("0000000000000001"), "5e-324"),
        (_double("8000000000000001"), "-5e-324"),
        (_double("7fefffffffffffff"), "1.7976931348623157e+308"),
        (_double("ffefffffffffffff"), "-1.7976931348623157e+308"),
        (_double("4340000000000000"), "9007199254740992"),
        (_double("44b52d02c7e14af5"), "9.999999999999997e+22"),
        (_double("44b52d02c7e14af6"), "1e+23"),
        (_double("44b52d02c7e14af7"), "1.0000000000000001e+23"),
        (_double("41b3de4355555553"), "333333333.3333332"),
        (_double("41b3de4355555554"), "333333333.33333325"),
        (_double("3eb0c6f7a0b5ed8d"), "0.000001"),
        (_double("3eb0c6f7a0b5ed8c"), "9.999999999999997e-7"),
    ],
)
def test_numbers_follow_ecmascript(value: float, expected: str) -> None:
    assert canonicalize(value) == expected.encode()


@pytest.mark.parametrize("value", [0, 1, -1, 2**53 - 1, -(2**53 - 1)])
def test_safe_integers_are_written_as_is(value: int) -> None:
    assert canonicalize(value) == str(value).encode()


@pytest.mark.parametrize("value", [2**53, -(2**53), 10**30])
def test_unsafe_integers_are_refused(value: int) -> None:
    with pytest.raises(CanonicalizationError, match="outside"):
        canonicalize(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused(value: float) -> None:
    with pytest.raises(CanonicalizationError) as caught:
        canonicalize({"x": [value]})
    assert isinstance(caught.value, ValueError)


def test_rfc8785_example_object() -> None:
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],'
        '"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonicalize(json.loads(source)) == expected.encode("utf-8")


def test_keys_sort_by_utf16_code_units() -> None:
    # RFC 8785 §3.2.3: U+1F600 is a surrogate pair (D83D DE00) and so sorts before U+FB33,
    # although its code point is larger.
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    names = [name for name, _ in json.loads(canonicalize(value), object_pairs_hook=list)]
    assert names == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_strings_use_only_mandatory_escapes() -> None:
    text = '\b\f\n\r\t\x00\x01\x1f\x7f"\\/\u2028é😀'
    expected = '"\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\x7f\\"\\\\/\u2028é😀"'
    assert canonicalize(text) == expected.encode("utf-8")


def test_containers_and_literals() -> None:
    value = {"b": [1, (2.5, None)], "a": {"z": True, "y": False}, "": "empty"}
    assert canonicalize(value) == b'{"":"empty","a":{"y":false,"z":true},"b":[1,[2.5,null]]}'


@pytest.mark.parametrize(
    "value",
    [
        {1: "int key"},
        {("a",): "tuple key"},
        b"bytes",
        {"set": {1, 2}},
        object(),
        "lone \ud800 surrogate",
        {"\udfff": "lone surrogate key"},
    ],
)
def test_unsupported_values_are_refused(value: Any) -> None:
    with pytest.raises(CanonicalizationError):
        canonicalize(value)


def test_excessive_nesting_is_refused() -> None:
    value: Any = []
    for _ in range(300):
        value = [value]
    with pytest.raises(CanonicalizationError, match="nesting"):
        canonicalize(value)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_JSON = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=16,
)


@given(_JSON)
def test_matches_independent_implementation(value: Any) -> None:
    # The rfc8785 package is the independent oracle (a test dependency).
    assert canonicalize(value) == rfc8785.dumps(value)


def _as_double(literal: str) -> int | float:
    # Read numbers as a JSON consumer in ECMAScript would: beyond 2**53 only doubles exist.
    number = int(literal)
    return number if abs(number) < 2**53 else float(literal)


@given(_JSON)
def test_canonical_form_is_a_fixed_point(value: Any) -> None:
    encoded = canonicalize(value)
    assert canonicalize(json.loads(encoded, parse_int=_as_double)) == encoded


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_round_trip(value: float) -> None:
    assert float(json.loads(canonicalize(value))) == value
