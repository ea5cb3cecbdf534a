"""Walks the per-stream integrity chain and names the first break.

Verification needs no keys: the chain covers ciphertext digests, so it holds
across erasures (tombstones keep their digest) and key destruction.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore import crypto
from eventstore.model import ChainBreak, VerifyReport
from eventstore.schema import events, stream_directory, streams

_chain_columns = sa.select(
    events.c.event_id,
    events.c.version,
    events.c.position,
    events.c.type,
    events.c.schema_version,
    events.c.recorded_at,
    events.c.payload,
    events.c.digest,
    events.c.chain_hash,
).order_by(events.c.version)


def verify_streams(conn: Connection, stream_rows: Iterable[sa.Row[Any]]) -> VerifyReport:
    """Verify each given stream row (from the ``streams`` table) in turn."""
    streams_checked = events_checked = 0
    for stream in stream_rows:
        rows = conn.execute(_chain_columns.where(events.c.stream_id == stream.stream_id)).all()
        checked, problem = _verify_stream(stream, rows)
        if problem is None:
            problem = _directory_problem(conn, stream)
        streams_checked += 1
        events_checked += checked
        if problem is not None:
            return VerifyReport(streams_checked, events_checked, problem)
    return VerifyReport(streams_checked, events_checked, None)


_directory_entry = sa.select(
    stream_directory.c.namespace, stream_directory.c.subject_key, stream_directory.c.generation
).where(stream_directory.c.stream_id == sa.bindparam("stream_id"))


def _directory_problem(conn: Connection, stream: sa.Row[Any]) -> ChainBreak | None:
    """A break if the directory, where the subject's stream is looked up, names another
    subject or generation for this stream than the row its chain starts from: reads of
    one subject would return another's events while every hash still matched."""
    entry = conn.execute(_directory_entry, {"stream_id": stream.stream_id}).first()
    if entry is not None and tuple(entry) == (
        stream.namespace,
        stream.subject_key,
        stream.generation,
    ):
        return None
    return ChainBreak(
        stream.stream_id, stream.version, None, "stream directory does not match the stream"
    )


def select_streams(stream_id: int | None = None) -> sa.Select[Any]:
    query = sa.select(streams).order_by(streams.c.stream_id)
    return query if stream_id is None else query.where(streams.c.stream_id == stream_id)


def _verify_stream(stream: sa.Row[Any], rows: Iterable[Any]) -> tuple[int, ChainBreak | None]:
    chain = crypto.stream_genesis(stream.namespace, stream.subject_key, stream.generation)
    version = 0
    last_position = 0
    for row in rows:
        version += 1
        reason = _row_problem(row, version, last_position, chain)
        if reason:
            return version, ChainBreak(stream.stream_id, version, row.event_id, reason)
        chain, last_position = row.chain_hash, row.position
    if (stream.version, stream.chain_hash) != (version, chain):
        return version, ChainBreak(
            stream.stream_id, stream.version, None, "stream head does not match its last event"
        )
    return version, None


def _row_problem(row: sa.Row[Any], version: int, last_position: int, chain: bytes) -> str | None:
    if row.version != version:
        return f"expected version {version}, found {row.version}"
    if row.position <= last_position:
        return "positions do not increase with versions"
    stored_digest_wrong = (
        row.payload is not None and crypto.ciphertext_digest(row.payload) != row.digest
    )
    if stored_digest_wrong:
        return "digest does not match the stored ciphertext"
    try:
        expected = crypto.chain_hash(
            chain,
            row.event_id,
            row.version,
            row.type,
            row.schema_version,
            row.recorded_at,
            row.digest,
        )
    except (struct.error, ValueError, OverflowError, TypeError):
        # Tampered values can fall outside what the hash encodes; that is a
        # break to report, not a crash of the verifier.
        return "stored values are out of range"
    if expected != row.chain_hash:
        return "chain hash does not match"
    return None
