"""Arrays packed in PostgreSQL's binary format read back as the values they were built from."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
import pytest

from eventstore import postgres_arrays as arrays

pytestmark = pytest.mark.postgres


@pytest.fixture
def conn(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        yield connection


CASES: list[tuple[Callable[[Any], arrays.PackedArray], str, Sequence[Any]]] = [
    (arrays.uuid_array, "uuid[]", [uuid.uuid4(), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)]),
    (arrays.bigint_array, "bigint[]", [1, 0, -1, 2**31, 2**63 - 1, -(2**63)]),
    (arrays.int_array, "int[]", [1, 0, -1, 2**31 - 1, -(2**31)]),
    (arrays.text_array, "text[]", ["memory.stored", "", "naïve ✓ 名前", 'a,b{c}"d\\']),
    (arrays.bytea_array, "bytea[]", [b"", b"\x00\xff" * 40, bytes(range(256))]),
]


@pytest.mark.parametrize(("pack", "sql_type", "values"), CASES, ids=[c[1] for c in CASES])
def test_a_packed_array_reads_back_element_by_element(
    conn: psycopg.Connection[Any],
    pack: Callable[[Any], arrays.PackedArray],
    sql_type: str,
    values: Sequence[Any],
) -> None:
    query = f"SELECT x, ord FROM unnest(%b::{sql_type}) WITH ORDINALITY AS t(x, ord)"
    rows = conn.execute(query.encode(), [pack(values)]).fetchall()
    assert [(x, i) for x, i in rows] == [(v, i) for i, v in enumerate(values, start=1)]


def test_an_empty_array_unnests_to_no_rows(conn: psycopg.Connection[Any]) -> None:
    assert conn.execute(b"SELECT unnest(%b::bytea[])", [arrays.bytea_array([])]).fetchall() == []


def test_a_value_outside_the_element_type_is_refused_before_sending() -> None:
    with pytest.raises(struct.error):
        arrays.int_array([2**31])
