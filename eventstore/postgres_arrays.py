"""Array parameters for PostgreSQL, packed in its binary format in one pass.

A batch append sends its rows as seven arrays that ``unnest`` turns back into
rows (eventstore.postgres).  psycopg's own list dumper inspects and dumps
every element in Python, which cost about a quarter of a 100-event append's
client time.  The arrays here are one-dimensional, never contain NULL and
hold elements of one known type, so each is a header and length-prefixed
elements joined in C (``struct``, ``bytes.join``); psycopg sends the bytes
as they are, under the array type's oid.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import ClassVar

import psycopg
from psycopg.adapt import Dumper
from psycopg.postgres import types
from psycopg.pq import Format

_INT4 = struct.Struct(">i")


class PackedArray:
    """A one-dimensional array without NULLs in PostgreSQL's binary format (``array_send``)."""

    __slots__ = ("data",)
    element_type: ClassVar[str]

    def __init__(self, data: bytes) -> None:
        self.data = data

    @classmethod
    def header(cls, count: int) -> bytes:
        """Dimensions 1, no NULLs, the element type, ``count`` elements from index 1."""
        return struct.pack(">iiiii", 1, 0, types[cls.element_type].oid, count, 1)


class _PackedArrayDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: PackedArray) -> bytes:
        return obj.data


def _register(array: type[PackedArray]) -> None:
    oid = types[array.element_type].array_oid
    dumper = type(f"{array.__name__}Dumper", (_PackedArrayDumper,), {"oid": oid})
    psycopg.adapters.register_dumper(array, dumper)


class UuidArray(PackedArray):
    __slots__ = ()
    element_type = "uuid"


class BigintArray(PackedArray):
    __slots__ = ()
    element_type = "int8"


class IntArray(PackedArray):
    __slots__ = ()
    element_type = "int4"


class TextArray(PackedArray):
    __slots__ = ()
    element_type = "text"


class ByteaArray(PackedArray):
    __slots__ = ()
    element_type = "bytea"


for _array in (UuidArray, BigintArray, IntArray, TextArray, ByteaArray):
    _register(_array)


def uuid_array(values: Sequence[uuid.UUID]) -> UuidArray:
    prefix = _INT4.pack(16)
    return UuidArray(b"".join([UuidArray.header(len(values)), *(prefix + v.bytes for v in values)]))


def bigint_array(values: Sequence[int]) -> BigintArray:
    body = struct.pack(">" + "iq" * len(values), *[n for v in values for n in (8, v)])
    return BigintArray(BigintArray.header(len(values)) + body)


def int_array(values: Sequence[int]) -> IntArray:
    body = struct.pack(">" + "ii" * len(values), *[n for v in values for n in (4, v)])
    return IntArray(IntArray.header(len(values)) + body)


def text_array(values: Sequence[str]) -> TextArray:
    return TextArray(_variable_length(TextArray.header(len(values)), [v.encode() for v in values]))


def bytea_array(values: Sequence[bytes]) -> ByteaArray:
    return ByteaArray(_variable_length(ByteaArray.header(len(values)), values))


def _variable_length(header: bytes, values: Sequence[bytes]) -> bytes:
    parts = [header]
    for value in values:
        parts.append(_INT4.pack(len(value)))
        parts.append(value)
    return b"".join(parts)
