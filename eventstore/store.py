"""The event store: the log's public face."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from eventstore.audit import AUDIT_NAMESPACE, AUDIT_SUBJECT, AuditEntry
from eventstore.backend import Backend
from eventstore.batch import encode_batch
from eventstore.codec import DEFAULT_MAX_EVENT_BYTES, EventCodec, SubjectCipher
from eventstore.companions import Companions
from eventstore.heads import OptimisticAppends
from eventstore.ids import check_namespace, check_subject
from eventstore.integrity import select_streams, verify_streams
from eventstore.keys import KeyProvider
from eventstore.model import (
    ANY,
    START,
    ExpectedVersion,
    KeyDestruction,
    LogCursor,
    LogPage,
    NewEvent,
    RecordedEvent,
    StreamHead,
    StreamRef,
    Tombstone,
    VerifyReport,
)
from eventstore.reader import (
    EventDecoder,
    read_by_ids,
    read_stream_rows,
    subject_cipher,
)
from eventstore.schema import events, streams
from eventstore.transaction import Clock, Transaction

DEFAULT_PAGE_SIZE = 500
_NO_LIMIT = 2**62  # "no bound" as a number both databases take for a version and a LIMIT

#: ``(index, count)``: the streams whose id modulo ``count`` equals ``index``.
Partition = tuple[int, int]


class ReadView:
    """A connection for reading projection tables, and the ciphers to decrypt them."""

    def __init__(self, conn: sa.Connection, codec: EventCodec) -> None:
        self.connection = conn
        self._codec = codec

    def cipher(self, stream_id: int) -> SubjectCipher | None:
        """The stream's cipher, or ``None`` once its data key is destroyed."""
        return subject_cipher(self.connection, self._codec, stream_id)


def utc_now() -> datetime:
    return datetime.now(UTC)


class EventStore:
    """An append-only, encrypted, hash-chained log with one stream per subject."""

    def __init__(
        self,
        backend: Backend,
        keys: KeyProvider,
        *,
        clock: Clock = utc_now,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self.backend = backend
        self.codec = EventCodec(keys, max_event_bytes)
        self.clock = clock
        self._optimistic = OptimisticAppends(backend, self.codec, clock)

    def close(self) -> None:
        self.backend.dispose()

    # -- writing ---------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """A write transaction: commits when the block ends, rolls back on error.

        Once it has committed, the heads it left its streams at are
        remembered for the optimistic path (:mod:`eventstore.heads`).
        """
        with self.backend.write_connection() as conn, conn.begin():
            tx = Transaction(conn, self.backend, self.codec, self.clock)
            yield tx
        for stream in tx.appended_streams():
            self._optimistic.remember(stream)

    def append(
        self,
        namespace: str,
        subject: str,
        new_events: Sequence[NewEvent],
        expected_version: ExpectedVersion = ANY,
    ) -> list[RecordedEvent]:
        """Append events to the subject's stream; see :meth:`Transaction.append`.

        The events are first offered to one conditional statement at the
        head this process last left the stream (or reads without a lock),
        see :mod:`eventstore.heads`; when that writes nothing, under the
        stream lock.
        """
        check_namespace(namespace)
        subject_key = self.codec.subject_key(namespace, check_subject(subject))
        encoded = encode_batch(self.codec, new_events, expected_version)
        recorded = self._optimistic.append(namespace, subject_key, encoded, expected_version)
        if recorded is not None:
            return recorded
        with self.transaction() as tx:
            return tx.append_encoded(namespace, subject_key, encoded, expected_version)

    def try_append(
        self,
        namespace: str,
        subject: str,
        new_events: Sequence[NewEvent],
        companions: Companions,
    ) -> list[RecordedEvent] | None:
        """Append in one conditional step with the rows ``companions`` derives, or write nothing.

        The optimistic path of :meth:`append` alone, with companion rows of
        other tables written under the same condition as the events (see
        :mod:`eventstore.companions`).  ``None`` means that nothing was
        written and the locked path must decide (in a :meth:`transaction`):
        caller-chosen event ids, a head another writer moved, a closed
        generation, a destroyed or unreadable key.
        """
        check_namespace(namespace)
        subject_key = self.codec.subject_key(namespace, check_subject(subject))
        encoded = encode_batch(self.codec, new_events, ANY)
        return self._optimistic.append(namespace, subject_key, encoded, ANY, companions)

    @contextmanager
    def reading(self) -> Iterator[ReadView]:
        """A read-only view for projections' queries: a connection plus subject ciphers."""
        with self.backend.read_connection() as conn:
            yield ReadView(conn, self.codec)

    def append_audit(self, entry: AuditEntry) -> RecordedEvent:
        with self.transaction() as tx:
            return tx.append_audit(entry)

    # -- reading ---------------------------------------------------------------

    def read_stream(
        self,
        namespace: str,
        subject: str,
        *,
        from_version: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[RecordedEvent]:
        """Events of the subject's current stream generation, by version.

        Forwards from ``from_version`` (default 1), or backwards from it
        (default: the head).
        """
        key = self.codec.subject_key(check_namespace(namespace), check_subject(subject))
        if backwards:
            params = {"version": _NO_LIMIT if from_version is None else from_version}
        else:
            params = {"version": from_version or 1}
        params["limit"] = _NO_LIMIT if limit is None else limit
        with self.backend.stream_read(namespace, key, backwards, params) as found:
            if found is None:
                return []
            keys = {found.stream.ref.stream_id: found.stream}
            return EventDecoder(self.codec, keys, self.backend.row_types).decode_all(found.rows)

    def read_audit(self) -> list[RecordedEvent]:
        """The whole audit stream, by version."""
        with self.backend.read_connection() as conn:
            key = self.codec.subject_key(AUDIT_NAMESPACE, AUDIT_SUBJECT)
            stream = self._stream_by_key(conn, AUDIT_NAMESPACE, key)
            if stream is None:
                return []
            return read_stream_rows(conn, self.codec, stream.stream_id)

    def get_events(self, event_ids: Sequence[uuid.UUID]) -> list[RecordedEvent]:
        """The stored events among ``event_ids`` (any stream), in log order."""
        with self.backend.read_connection() as conn:
            return read_by_ids(conn, self.codec, event_ids)

    def read_all(
        self,
        after: LogCursor = START,
        limit: int = DEFAULT_PAGE_SIZE,
        *,
        partition: Partition | None = None,
    ) -> LogPage:
        """One page of the whole log in global order, strictly after ``after``.

        With ``partition=(index, count)`` only streams whose id falls in that
        partition are read: projection workers split the log this way so that
        each stream is handled by one worker at a time, in order.
        """
        params = {"group": after.commit_group, "position": after.position, "limit": limit}
        if partition is not None:
            params["index"], params["count"] = partition
        found = self.backend.log_page(params, partitioned=partition is not None)
        decoder = EventDecoder(self.codec, found.streams, self.backend.row_types)
        page = decoder.decode_all(found.rows)
        return LogPage(page, page[-1].cursor if page else after)

    def count_after(self, after: LogCursor, *, partition: Partition | None = None) -> int:
        """How many visible events follow ``after`` (in one partition, if given)."""
        query = sa.select(sa.func.count()).where(
            self.backend.after_cursor(), self.backend.visible_commit_groups(events.c.commit_group)
        )
        params = {"group": after.commit_group, "position": after.position}
        if partition is not None:
            query = query.where(events.c.stream_id % partition[1] == partition[0])
        with self.backend.read_connection() as conn:
            return int(conn.execute(query, params).scalar_one())

    def subscribe(
        self,
        after: LogCursor = START,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        poll_interval: float = 0.2,
        stop: threading.Event | None = None,
    ) -> Iterator[RecordedEvent]:
        """Follow the log from ``after`` for ever (or until ``stop`` is set)."""
        stop = stop or threading.Event()
        cursor = after
        while not stop.is_set():
            page = self.read_all(cursor, page_size)
            yield from page.events
            cursor = page.next_cursor
            if len(page.events) < page_size:
                stop.wait(poll_interval)

    def head(self, namespace: str, subject: str) -> StreamHead | None:
        """The subject's latest stream generation, or ``None`` if it never wrote."""
        with self.backend.read_connection() as conn:
            row = self._current_stream(conn, namespace, subject)
        if row is None:
            return None
        ref = StreamRef(row.stream_id, row.namespace, row.subject_key, row.generation)
        return StreamHead(ref, row.version, row.chain_hash, row.closed_at, row.key_destroyed_at)

    def last_cursor(self, namespace: str, subject: str) -> LogCursor | None:
        """The log cursor of the subject's latest event (what "caught up" waits for)."""
        with self.backend.read_connection() as conn:
            stream = self._current_stream(conn, namespace, subject)
            if stream is None or stream.version == 0:
                return None
            row = conn.execute(
                sa.select(events.c.commit_group, events.c.position).where(
                    events.c.stream_id == stream.stream_id, events.c.version == stream.version
                )
            ).one()
        return LogCursor(row.commit_group, row.position)

    def cipher(self, stream_id: int) -> SubjectCipher | None:
        """The cipher of a stream's data key for reading projections, or ``None`` once destroyed."""
        with self.backend.read_connection() as conn:
            return subject_cipher(conn, self.codec, stream_id)

    def subject_ref(self, namespace: str, subject: str) -> str:
        """The pseudonymous reference (hex keyed hash) of a subject."""
        check_namespace(namespace)
        return self.codec.subject_key(namespace, check_subject(subject)).hex()

    def verify(self, namespace: str | None = None, subject: str | None = None) -> VerifyReport:
        """Walk the chain of one subject's streams, or of the whole log."""
        with self.backend.read_connection() as conn:
            query = select_streams()
            if namespace is not None and subject is not None:
                key = self.codec.subject_key(check_namespace(namespace), check_subject(subject))
                query = query.where(streams.c.namespace == namespace, streams.c.subject_key == key)
            return verify_streams(conn, conn.execute(query).all())

    # -- erasure primitives (each in its own transaction) ---------------------

    def tombstone(
        self,
        namespace: str,
        subject: str,
        event_ids: Sequence[uuid.UUID] | None,
        erasure_request_id: uuid.UUID,
    ) -> list[Tombstone]:
        """Erase the payload of some (or all) events of the subject's latest stream."""
        with self.transaction() as tx:
            stream = tx.lock_stream(namespace, subject)
            if stream is None:
                return []
            return tx.tombstone(stream.stream_id, event_ids, erasure_request_id)

    def destroy_data_key(self, namespace: str, subject: str) -> KeyDestruction | None:
        """Destroy the data key of the subject's latest stream, if it still exists."""
        with self.transaction() as tx:
            stream = tx.lock_stream(namespace, subject)
            if stream is None:
                return None
            return tx.destroy_data_key(stream.stream_id)

    # -- helpers ------------------------------------------------------------

    def _current_stream(self, conn: sa.Connection, namespace: str, subject: str) -> Any:
        key = self.codec.subject_key(check_namespace(namespace), check_subject(subject))
        return self._stream_by_key(conn, namespace, key)

    def _stream_by_key(self, conn: sa.Connection, namespace: str, key: bytes) -> Any:
        return conn.execute(
            sa.select(streams)
            .where(streams.c.namespace == namespace, streams.c.subject_key == key)
            .order_by(streams.c.generation.desc())
            .limit(1)
        ).first()
