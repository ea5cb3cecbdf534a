"""Reading the log by partition: the same events as the whole log, and a plan that pages."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from eventstore import (
    START,
    EventStore,
    KeyringFile,
    LogCursor,
    NewEvent,
    RecordedEvent,
    create_backend,
)

HORIZON_WAIT_SECONDS = 30


def write_log(store: EventStore, subjects: int = 12, per_subject: int = 5) -> None:
    for round_no in range(per_subject):
        for n in range(subjects):
            store.append("default", f"subject-{n}", [NewEvent("memory.stored", {"r": round_no})])
    # On PostgreSQL another transaction of this database (autovacuum's ANALYZE
    # takes an xid) can hold delivery back a moment; wait rather than read short.
    deadline = time.monotonic() + HORIZON_WAIT_SECONDS
    while store.count_after(START) < subjects * per_subject and time.monotonic() < deadline:
        time.sleep(0.05)


def read_everything(
    store: EventStore, page: int, partition: tuple[int, int] | None
) -> list[RecordedEvent]:
    cursor, seen = START, list[RecordedEvent]()
    while events := store.read_all(cursor, page, partition=partition).events:
        seen += events
        cursor = events[-1].cursor
    return seen


def test_partitions_split_the_log_in_global_order(store: EventStore) -> None:
    write_log(store)
    whole = read_everything(store, 7, None)
    assert len(whole) == 60
    count = 4
    parts = [read_everything(store, 3, (index, count)) for index in range(count)]
    for index, part in enumerate(parts):
        assert all(e.stream.stream_id % count == index for e in part)
        assert [e.cursor for e in part] == sorted(e.cursor for e in part)
        assert part == [e for e in whole if e.stream.stream_id % count == index]
    assert sum(len(p) for p in parts) == len(whole)
    assert store.count_after(START, partition=(1, count)) == len(parts[1])


@pytest.fixture
def pg_store(postgres_url: str, keyring: KeyringFile) -> Iterator[EventStore]:
    store = EventStore(create_backend(postgres_url), keyring)
    yield store
    store.close()


@pytest.mark.postgres
def test_a_partition_page_walks_the_index_instead_of_sorting_the_rest_of_the_log(
    pg_store: EventStore,
) -> None:
    # Without statistics for ``stream_id % n`` PostgreSQL would sort a bitmap
    # scan of everything after the cursor; the page must come from the index.
    write_log(pg_store, subjects=20, per_subject=20)
    # The statements read_all runs for a page of partition 1 of 4 and of the whole log.
    for partitioned in (True, False):
        query = pg_store._log_pages[partitioned]
        with pg_store.backend.statement_reads() as conn:
            compiled = query.compile(dialect=conn.dialect)
            params = {**compiled.params, "group": 0, "position": 0, "limit": 10}
            params |= {"index": 1, "count": 4}
            plan = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + str(compiled), params))
        assert "Index Scan using ix_events_commit_group_position" in plan, plan
        assert "Sort" not in plan, plan
    page = pg_store.read_all(LogCursor(0, 0), 10, partition=(1, 4))
    assert len(page.events) == 10
