"""Reads of one subject go to one shard: Citus routes a statement by the stream id it is given.

A statement that finds the stream inside itself (a subquery of ``streams``, a join
with it) reads every shard, or has every shard's rows copied to the coordinator.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from eventstore.backends import create_backend
from eventstore.reader import EventReads
from eventstore.store import _STREAM_BACKWARDS, _STREAM_FORWARDS
from eventstore.transaction import _BY_ID_LOCKED
from projections.storage.stream_marks import _lock_statement
from projections.storage.vector_reads import _stream_state
from projections.storage.vector_store import _EVENT_NODE_VECTORS

pytestmark = pytest.mark.citus


def tasks(url: str, query: sa.Select[Any], **more: Any) -> list[str]:
    """The ``Task Count`` lines of the statement's plan on the cluster."""
    values = {"stream_id": 7, "version": 1, "limit": 100, **more}
    return statement_tasks(url, query.params(values))


def statement_tasks(url: str, statement: Any) -> list[str]:
    """The ``Task Count`` lines of the plan of ``statement``, its values given."""
    sql = statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})
    with psycopg.connect(url, autocommit=True) as conn:
        plan = [row[0] for row in conn.execute(f"EXPLAIN {sql}".encode())]
    return [line.strip() for line in plan if "Task Count" in line]


@pytest.mark.parametrize("query", [_STREAM_FORWARDS, _STREAM_BACKWARDS])
def test_a_page_of_a_subjects_stream_reads_one_shard(citus_url: str, query: Any) -> None:
    assert tasks(citus_url, query) == ["Task Count: 1"]


def test_the_state_tokens_stream_part_reads_one_shard(citus_url: str) -> None:
    # The last event, the subject's embedder and its backfill mark: before, joined
    # into the token's one statement, every shard's rows of all three on every retrieve.
    # Both followers' marks of the stream too (the detector's, before, was its partition's
    # checkpoint, read on the coordinator).
    names = {"projection": "vector_state", "follower": "likely_updates"}
    assert tasks(citus_url, _stream_state, **names) == ["Task Count: 1"]


def test_an_appends_lock_of_its_stream_row_reads_one_shard(citus_url: str) -> None:
    # The stream row and its data key, locked by id: on the stream's shard, where the
    # append then moves the head and inserts the events (tests/citus/test_one_phase.py).
    assert tasks(citus_url, _BY_ID_LOCKED) == ["Task Count: 1"]


def test_the_streams_and_keys_read_after_a_page_read_one_shard(citus_url: str) -> None:
    # Every read of events ends with its streams' rows and data keys, by the ids the
    # page held: one stream's (read_stream's) must go to that stream's shard only.
    reads = EventReads(create_backend(citus_url), codec=None)  # type: ignore[arg-type]
    query = reads._streams_of.params(stream_ids=[7])
    assert tasks(citus_url, query) == ["Task Count: 1"]


@pytest.mark.parametrize("of_embedder", [False, True])
def test_the_new_events_nodes_with_their_vectors_read_one_shard(
    citus_url: str, of_embedder: bool
) -> None:
    # What a consistent retrieve right after a store reads to apply the new events:
    # with the vector found by the node's stream (correlated), Citus planned it over
    # every shard, 32 tasks on each such retrieve.
    query = _EVENT_NODE_VECTORS[of_embedder]
    ids = [uuid.UUID(int=1), uuid.UUID(int=2)]
    assert tasks(citus_url, query, event_ids=ids, embedder="e") == ["Task Count: 1"]


def test_a_reads_catch_up_of_its_stream_reads_and_locks_one_shard(citus_url: str) -> None:
    # A consistent read right after a store: the stream's mark locked (an upsert), its
    # new events read by version.  Before, a page of the vector state's log partition
    # (stream id modulo 8), which Citus cannot route: every shard, twice a catch-up.
    lock = _lock_statement(True).values(
        [{"stream_id": 7, "name": "vector_state", "version": 0, "commit_group": 0, "position": 0}]
    )
    assert statement_tasks(citus_url, lock) == ["Task Count: 1"]
    reads = EventReads(create_backend(citus_url), codec=None)  # type: ignore[arg-type]
    assert tasks(citus_url, reads._of_stream_up_to, after=1, up_to=3) == ["Task Count: 1"]
