"""Canonical JSON of event data: orjson where it writes the same bytes, else the standard library.

What gets encrypted, digested and chained is this encoding, so the fast path
must never change a byte, accept a value the standard encoder refuses or
refuse one it accepts.  The reference below is the encoder the log used before
the fast path; Hypothesis compares the two over arbitrary values.
"""

from __future__ import annotations

import enum
import json
import math
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import InvalidEncodingError, InvalidInputError
from eventstore.codec import encode_json

_REFERENCE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def reference(value: Mapping[str, Any]) -> bytes | type[Exception]:
    """The bytes the standard encoder writes, or the log's error class for a refused value."""
    try:
        text = _REFERENCE.encode(value)
    except (TypeError, ValueError):
        return InvalidInputError
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return InvalidEncodingError


def encoded(value: Mapping[str, Any]) -> bytes | type[Exception]:
    try:
        return encode_json(value, "event data")
    except InvalidInputError as e:
        return type(e)


class Colour(enum.IntEnum):
    RED = 1


class Text(str):
    pass


# Every code point, lone surrogates included (Hypothesis leaves them out by default).
any_text = st.text(st.characters(codec=None, exclude_categories=()))
floats = st.one_of(
    st.floats(),  # NaN, infinities, subnormals, huge and tiny values
    st.floats(min_value=1e-10, max_value=1e-3),  # where orjson stops writing exponents
    st.floats(min_value=-1e-3, max_value=-1e-10),
    st.sampled_from([0.0, -0.0, 1e-4, 9.999999999999999e-5, 1e15, 1e16, 1e17, 5e-324]),
)
integers = st.one_of(
    st.integers(),
    st.integers(min_value=2**63 - 2, max_value=2**64 + 1),  # the edges of orjson's range
    st.integers(min_value=-(2**63) - 1, max_value=-(2**63) + 1),
)
scalars = st.one_of(st.none(), st.booleans(), integers, floats, any_text)
# Values the standard encoder refuses or writes in its own way.
odd = st.one_of(
    st.uuids(),
    st.just(Colour.RED),
    any_text.map(Text),
    st.tuples(integers, any_text),
    st.just(float("nan")),
)
values = st.recursive(
    st.one_of(scalars, odd),
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(any_text, inner, max_size=5),
        st.dictionaries(st.one_of(integers, st.booleans()), inner, min_size=1, max_size=3),
    ),
    max_leaves=30,
)


@settings(max_examples=600)
@given(st.dictionaries(any_text, values, max_size=6))
def test_the_same_bytes_or_the_same_refusal_as_the_standard_encoder(
    value: dict[str, Any],
) -> None:
    assert encoded(value) == reference(value)


@settings(max_examples=500)
@given(st.dictionaries(any_text, st.one_of(scalars, st.lists(scalars)), max_size=8))
def test_plain_json_values_take_the_same_bytes(value: dict[str, Any]) -> None:
    assert encoded(value) == reference(value)


@pytest.mark.parametrize(
    "value",
    [
        {"x": 9.99e-05},  # orjson writes 0.0000999
        {"x": 1e-9},
        {"x": 2**64},  # beyond orjson's integers
        {"x": -(2**63) - 1},
        {"x": "\ud800"},  # a lone surrogate: refused as invalid UTF-8
        {"x": math.inf},
        {"x": uuid.UUID(int=1)},  # orjson would write it; the log refuses it
        {"x": Colour.RED},
        {"\U0001f600": 1, "é": 2, "Z": 3, "a": [{"b": None, "A": True}]},
        {"deep": [[[[[[[[[[[[[[[[[[[[1.5]]]]]]]]]]]]]]]]]]]]},
    ],
)
def test_values_on_the_edges_of_the_fast_path(value: dict[str, Any]) -> None:
    assert encoded(value) == reference(value)


def test_nesting_beyond_orjsons_limit_is_written_by_the_standard_encoder() -> None:
    value: Any = 1.5
    for _ in range(300):
        value = [value]
    assert encoded({"x": value}) == reference({"x": value})


def test_a_circular_value_is_refused() -> None:
    value: dict[str, Any] = {}
    value["self"] = value
    assert encoded(value) is InvalidInputError
