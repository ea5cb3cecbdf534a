"""An append that ends its transaction (``Transaction.append_each(…, last=True)``).

On PostgreSQL the COMMIT goes out in the append's pipeline, one wait for both;
whatever the backend, an append that fails there leaves nothing of its
transaction, and one whose head was elsewhere commits nothing it refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from eventstore import ConflictError, EventStore, NewEvent, RecordedEvent, Subject
from eventstore.batch import DerivedRows
from eventstore.codec import SubjectCipher
from eventstore.schema import stream_directory
from tests.conftest import WITH_CITUS, url_of_backend

# The Citus backend takes the argument too (its COMMIT stays apart).
any_database_url = pytest.fixture(params=WITH_CITUS)(url_of_backend)


def stored(content: str) -> NewEvent:
    return NewEvent("memory.stored", {"content": content})


def test_an_append_that_fails_as_the_last_statement_leaves_nothing_of_its_transaction(
    store: EventStore,
) -> None:
    store.append("default", "bob", [stored("Bob's")])
    bob = store.head("default", "bob")
    assert bob is not None

    def colliding(
        _cipher: SubjectCipher, _events: list[RecordedEvent]
    ) -> tuple[Sequence[DerivedRows], None]:
        """A derived row that breaks a unique key (Bob's directory row again)."""
        row = {"namespace": "default", "subject_key": bob.stream.subject_key, "generation": 1}
        return [DerivedRows(stream_directory, [row])], None

    def create_and_append() -> None:
        with store.transaction() as tx:
            # Alice's stream is created in this transaction, then the append fails.
            stream = tx.lock_stream(Subject("default", "alice"), create=True)
            tx.append_each(stream, [stored("Alice's")], colliding, last=True)

    with pytest.raises(ConflictError):
        create_and_append()

    assert store.head("default", "alice") is None
    assert store.read_stream("default", "alice") == []
    # The pool's connection is usable again, and the store as well.
    store.append("default", "alice", [stored("again")])
    assert [e.data for e in store.read_stream("default", "alice")] == [{"content": "again"}]


def test_the_last_append_commits_its_transaction(store: EventStore) -> None:
    with store.transaction() as tx:
        stream = tx.lock_stream(Subject("default", "alice"), create=True)
        appended, _ = tx.append_each(
            stream, [stored("one"), stored("two")], lambda *_: ((), None), last=True
        )
    assert [event.version for event, replayed in appended] == [1, 2]
    assert [e.data for e in store.read_stream("default", "alice")] == [
        {"content": "one"},
        {"content": "two"},
    ]
