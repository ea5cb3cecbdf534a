"""The event store: the log's public face."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa

from eventstore import audit_index, subject_rights
from eventstore.audit import AUDIT_NAMESPACE, AUDIT_SUBJECT, AuditEntry
from eventstore.audit_index import AuditQuery
from eventstore.backends.port import Backend
from eventstore.batch import encode_batch
from eventstore.codec import DEFAULT_MAX_EVENT_BYTES, EventCodec, SubjectCipher
from eventstore.crypto import GENESIS_HASH
from eventstore.errors import ConflictError, KeyUnavailableError
from eventstore.heads import StreamHeads
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
    Subject,
    Tombstone,
    VerifyReport,
)
from eventstore.reader import (
    LATEST_STREAM_ID,
    Decoded,
    EventReads,
    latest_stream,
    latest_stream_params,
    select_event_columns,
    subject_cipher,
)
from eventstore.schema import audit_index as audit_index_table
from eventstore.schema import events, streams
from eventstore.transaction import (
    AppendHead,
    Clock,
    Derive,
    HeadMovedError,
    LatestStreams,
    Transaction,
    append_at,
)

T = TypeVar("T")

DEFAULT_PAGE_SIZE = 500
_AUDIT_INDEX_BATCH = 2000  # audit entries indexed per transaction when catching up
_NO_LIMIT = 2**62  # "no bound" as a number both databases take for a version and a LIMIT

#: ``(index, count)``: the streams whose id modulo ``count`` equals ``index``.
Partition = tuple[int, int]

# Stream pages of one generation (parameters ``stream_id``, ``version``, ``limit``),
# found first in the stream directory (``LATEST_STREAM_ID``) in a statement of its
# own.  Found inside the page's statement (a subquery), it saved a round trip on one
# server, but Citus can route a statement to the one shard of a stream only by a
# stream id it is given: with the subquery, every page of one subject read every shard.
_stream_id = sa.bindparam("stream_id", type_=sa.BigInteger())
_limit = sa.bindparam("limit", type_=sa.BigInteger())
_version = sa.bindparam("version", type_=sa.BigInteger())
_STREAM_FORWARDS = (
    select_event_columns.where(events.c.stream_id == _stream_id, events.c.version >= _version)
    .order_by(events.c.version)
    .limit(_limit)
)
_STREAM_BACKWARDS = (
    select_event_columns.where(events.c.stream_id == _stream_id, events.c.version <= _version)
    .order_by(events.c.version.desc())
    .limit(_limit)
)


class ReadView:
    """A connection for reading projection tables, and the ciphers to decrypt them."""

    def __init__(self, conn: sa.Connection, codec: EventCodec, reads: EventReads) -> None:
        self.connection = conn
        self._codec = codec
        self._reads = reads

    def cipher(self, stream_id: int) -> SubjectCipher | None:
        """The stream's cipher, or ``None`` once its data key is destroyed."""
        return subject_cipher(self.connection, self._codec, stream_id)

    def stream_since(self, stream_id: int, after_version: int, up_to_version: int) -> Decoded:
        """The events of one stream generation after ``after_version`` up to
        ``up_to_version``, by version, and the stream's cipher (``None`` once its data
        key is destroyed), read in this view after them: a cached index reads what it
        has not applied, and the key to read those events' rows, in two statements
        (by the stream's id, no lookup of the subject's latest stream first), and a
        subject's first load its key alone."""
        return self._reads.stream_since(self.connection, stream_id, after_version, up_to_version)


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
        self.reads = EventReads(backend, self.codec)
        #: The stream heads appends start from (see :meth:`append_each`).
        self.heads = StreamHeads()
        # Each subject's latest stream id, so a lock need not look it up first.
        self._latest_streams = LatestStreams()
        # The two log pages, built once with bound parameters (``group``,
        # ``position``, ``limit`` and for a partition ``index``, ``count``).
        page = select_event_columns.where(backend.after_cursor())
        partitioned = page.where(
            events.c.stream_id % sa.bindparam("count", type_=sa.BigInteger())
            == sa.bindparam("index", type_=sa.BigInteger())
        )
        self._log_pages = {
            False: page.order_by(*backend.log_order).limit(_limit),
            True: partitioned.order_by(*backend.log_order).limit(_limit),
        }
        # One past the highest commit group a log read of this store has shown.
        # Every writer below it had ended then, so every later read may deliver
        # up to it.  PostgreSQL's horizon can move back a little between two
        # statements (see eventstore.backends.postgres); passing this keeps the
        # log this process sees from ever shrinking, which followers rely on
        # (a head, then a look that must reach it: LogFollower.read_page).
        self._settled = 0
        self._settled_lock = threading.Lock()

    def close(self) -> None:
        self.heads.clear()
        self.backend.dispose()

    # -- what the layers above may know of the store ---------------------------------

    @property
    def backend_name(self) -> str:
        """``"sqlite"``, ``"postgresql"`` or ``"citus"`` (a Citus coordinator)."""
        return self.backend.name

    @property
    def embedded(self) -> bool:
        """True for the embedded default (one process owns one SQLite file)."""
        return self.backend.embedded

    @property
    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine, for libraries that keep tables beside the log's
        (APScheduler's job store) and for schema migrations."""
        return self.backend.engine

    @property
    def keys(self) -> KeyProvider:
        """Where the key-encryption keys come from."""
        return self.codec.keys

    def subject_key(self, namespace: str, subject: str) -> bytes:
        """The keyed hash that identifies a subject on disk."""
        return self.codec.subject_key(check_namespace(namespace), check_subject(subject))

    def pseudonym(self, kind: str, value: str) -> str:
        """A keyed, content-free reference to ``value`` (e.g. an actor id) for the audit log."""
        return self.codec.pseudonym(kind, value)

    # -- writing ---------------------------------------------------------------

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[Transaction]:
        """A write transaction: commits when the block ends, rolls back on error.

        ``durable=False`` lets the commit return before it reaches stable storage
        (a power loss may drop it; a killed process does not).  Only for writes of
        projection state alone, which the log can always replay: never for an
        append, an erasure or anything else the log does not hold.
        """
        with self.backend.write_connection(durable=durable) as conn, conn.begin():
            yield Transaction(
                conn,
                self.backend,
                self.reads,
                self.codec,
                self.clock,
                self.heads,
                self._latest_streams,
            )

    def append_each(
        self,
        subject: Subject,
        events_of: Callable[[StreamRef], Sequence[NewEvent]],
        derive: Derive[T],
    ) -> tuple[list[tuple[RecordedEvent, bool]], T | None]:
        """:meth:`Transaction.append_each` on the subject's open stream generation,
        whose events ``events_of`` gives (their ids may depend on the generation).

        The append is sealed at the head this process remembers for the subject
        (:mod:`eventstore.heads`) and written in one step that commits on its own,
        conditional on the head being still there: one wait on PostgreSQL, one
        transaction on SQLite.  When it is not (no head remembered, another writer
        moved it, a forget or restriction since, a caller-chosen event id stored
        already), nothing was written, and the append is made again under the
        stream's lock, which creates the generation, finds earlier appends of
        caller-chosen ids and refuses a restricted subject as any locked append;
        its append is the transaction's last statement and goes out with the COMMIT
        (three waits on PostgreSQL, the missed attempt included).
        """
        check_namespace(subject.namespace)
        subject_key = self.codec.subject_key(subject.namespace, check_subject(subject.subject))
        head = self.heads.get(subject.namespace, subject_key)
        if head is not None:
            at_head = self._append_at_remembered(head, events_of, derive)
            if at_head is not None:
                return at_head
            self.heads.drop(head)
        with self.transaction() as tx:
            stream = tx.lock_stream(subject, create=True)
            appended = tx.append_each(stream, events_of(stream.ref), derive, last=True)
            at = tx.head_of(stream)
        if at is not None:  # remembered once committed
            self.heads.put(at)
        return appended

    def _append_at_remembered(
        self,
        head: AppendHead,
        events_of: Callable[[StreamRef], Sequence[NewEvent]],
        derive: Derive[T],
    ) -> tuple[list[tuple[RecordedEvent, bool]], T | None] | None:
        """:meth:`append_each`'s append at the head this process remembers, or ``None``
        when it wrote nothing (the head was not there, or its KEK version was retired).

        The data key is unwrapped here for this append alone: only its wrapped form
        is remembered (:mod:`eventstore.heads`)."""
        encoded = encode_batch(self.codec, events_of(head.ref), ANY)
        try:
            cipher = SubjectCipher(self.codec.unwrap(head.wrapped_key), head.ref.stream_id)
        except KeyUnavailableError:  # wrapped under a KEK retired since: the key row's is new
            return None
        try:
            with self.backend.append_connection() as conn:
                placed, derived = append_at(
                    self.backend, conn, self.codec, head, cipher, encoded, self.clock(), derive
                )
        except (HeadMovedError, ConflictError):
            return None
        last = placed[-1]
        self.heads.put(AppendHead(head.ref, last.version, last.chain_hash, head.wrapped_key))
        return [(event, False) for event in placed], derived

    def append(
        self,
        namespace: str,
        subject: str,
        new_events: Sequence[NewEvent],
        expected_version: ExpectedVersion = ANY,
    ) -> list[RecordedEvent]:
        """Append events to the subject's stream; see :meth:`Transaction.append`.

        The batch is validated and encoded before a connection is taken.
        """
        check_namespace(namespace)
        subject_key = self.codec.subject_key(namespace, check_subject(subject))
        encoded = encode_batch(self.codec, new_events, expected_version)
        with self.transaction() as tx:
            return tx.append_encoded(namespace, subject_key, encoded, expected_version)

    @contextmanager
    def reading(self, *, snapshot: bool = True) -> Iterator[ReadView]:
        """A read-only view for projections' queries: a connection plus subject ciphers.

        ``snapshot=False`` is for one statement, or statements that need no common
        snapshot (each sees what had committed when it starts): on PostgreSQL they
        then run without the BEGIN and ROLLBACK a transaction costs, each a wait
        on the server (the state token a ranked read asks first, for one).
        """
        connection = self.backend.read_connection if snapshot else self.backend.statement_reads
        with connection() as conn:
            yield ReadView(conn, self.codec, self.reads)

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
            query, version = _STREAM_BACKWARDS, _NO_LIMIT if from_version is None else from_version
        else:
            query, version = _STREAM_FORWARDS, from_version or 1
        return self._read_latest_stream(namespace, key, query, version, limit)

    def read_audit(self) -> list[RecordedEvent]:
        """The whole audit stream, by version."""
        key = self.codec.subject_key(AUDIT_NAMESPACE, AUDIT_SUBJECT)
        return self._read_latest_stream(AUDIT_NAMESPACE, key, _STREAM_FORWARDS, 1, None)

    def audit_page(
        self, query: AuditQuery, limit: int, offset: int = 0
    ) -> tuple[list[RecordedEvent], int]:
        """One page of the audit entries ``query`` selects, newest first, and how many
        it selects: found in the audit index, read from the stream by id."""
        self._index_audit_entries()
        with self.backend.statement_reads() as conn:
            ids, total = audit_index.page(conn, query, limit, offset)
        entries = self.get_events(ids)  # ids of audit entries only
        return sorted(entries, key=lambda e: e.version, reverse=True), total

    def audit_head(self) -> tuple[int, bytes]:
        """The audit stream's head: its version (0: no entry yet) and chain hash."""
        key = self.codec.subject_key(AUDIT_NAMESPACE, AUDIT_SUBJECT)
        with self.backend.statement_reads() as conn:
            row = latest_stream(conn, AUDIT_NAMESPACE, key)
        return (0, GENESIS_HASH) if row is None else (row.version, row.chain_hash)

    def _index_audit_entries(self) -> None:
        """Index the audit entries written before the index existed (once)."""
        head_version, _ = self.audit_head()
        with self.backend.statement_reads() as conn:
            missing = audit_index.missing_versions(conn, head_version)
        key = self.codec.subject_key(AUDIT_NAMESPACE, AUDIT_SUBJECT)
        for first, last in missing:
            for start in range(first, last + 1, _AUDIT_INDEX_BATCH):
                size = min(_AUDIT_INDEX_BATCH, last + 1 - start)
                found = self._read_latest_stream(
                    AUDIT_NAMESPACE, key, _STREAM_FORWARDS, start, size
                )
                with self.transaction() as tx:
                    audit_index.record(
                        tx.connection, tx.insert_unless_present(audit_index_table), found
                    )

    def _read_latest_stream(
        self, namespace: str, key: bytes, query: sa.Select[Any], version: int, limit: int | None
    ) -> list[RecordedEvent]:
        """A page of the subject's latest stream generation (a stream query above).

        A generation closed by a forget between the two statements reads back as
        erased, as any read that meets a forget does: keys are read after events.
        """
        with self.backend.statement_reads() as conn:
            stream_id = conn.execute(
                LATEST_STREAM_ID, latest_stream_params(namespace, key)
            ).scalar()
            if stream_id is None:
                return []
            params = {
                "stream_id": stream_id,
                "version": version,
                "limit": _NO_LIMIT if limit is None else limit,
            }
            return self.reads.read(conn, query, params)

    def get_events(
        self, event_ids: Sequence[uuid.UUID], *, namespace: str | None = None
    ) -> list[RecordedEvent]:
        """The stored events among ``event_ids`` (any stream, or ``namespace``'s streams
        only), in log order."""
        with self.backend.read_connection() as conn:
            return self.reads.by_ids(conn, event_ids, namespace)

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
        params = self._cursor_params(after) | {"limit": limit}
        if partition is not None:
            params["index"], params["count"] = partition
        query = self._log_pages[partition is not None]
        with self.backend.statement_reads() as conn:
            page, ciphers = self.reads.read_keyed(
                conn, query, params | self.backend.log_params(conn, params)
            )
        if page:
            self._settle(page[-1].cursor)
        return LogPage(page, page[-1].cursor if page else after, ciphers)

    def log_head(self, after: LogCursor = START) -> LogCursor:
        """The cursor of the last event a reader may deliver now, or ``after`` when
        nothing after it may be.

        Every event up to it has committed, and none can commit before it
        later: a partition read of this store begun after this call that
        finds nothing of its partition up to here proves there is nothing to find.
        """
        params = self._cursor_params(after)
        query = self._log_query(sa.select(events.c.commit_group, events.c.position), None)
        query = query.order_by(*(c.desc() for c in self.backend.log_order)).limit(1)
        with self.backend.statement_reads() as conn:
            row = conn.execute(query, params | self.backend.log_params(conn, params)).first()
        if row is None:
            return after
        head = LogCursor(row.commit_group, row.position)
        self._settle(head)
        return head

    def count_after(self, after: LogCursor, *, partition: Partition | None = None) -> int:
        """How many visible events follow ``after`` (in one partition, if given)."""
        query = self._log_query(sa.select(sa.func.count()).select_from(events), partition)
        params = self._cursor_params(after)
        with self.backend.statement_reads() as conn:
            count = conn.execute(query, params | self.backend.log_params(conn, params))
            return int(count.scalar_one())

    def _cursor_params(self, after: LogCursor) -> dict[str, int]:
        """The parameters of :meth:`Backend.after_cursor`."""
        return {"group": after.commit_group, "position": after.position, "settled": self._settled}

    def _settle(self, shown: LogCursor) -> None:
        """Remember that a log read showed ``shown``: every writer up to its group had ended."""
        with self._settled_lock:
            self._settled = max(self._settled, shown.commit_group + 1)

    def _log_query(self, query: sa.Select[Any], partition: Partition | None) -> sa.Select[Any]:
        """``query`` restricted to the log after a cursor (the parameters of
        :meth:`_cursor_params`), visible now, and in one partition if given."""
        query = query.where(self.backend.after_cursor())
        if partition is None:
            return query
        index, count = partition
        return query.where(events.c.stream_id % count == index)

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
        with self.backend.statement_reads() as conn:
            row = self._current_stream(conn, namespace, subject)
        if row is None:
            return None
        ref = StreamRef(row.stream_id, row.namespace, row.subject_key, row.generation)
        return StreamHead(ref, row.version, row.chain_hash, row.closed_at, row.key_destroyed_at)

    def last_cursor(self, namespace: str, subject: str) -> LogCursor | None:
        """The log cursor of the subject's latest event (what "caught up" waits for)."""
        with self.backend.statement_reads() as conn:
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

    def processing_restricted(self, namespace: str, subject: str) -> bool:
        """Whether processing of the subject is restricted now (GDPR Art. 18): the
        predicate read paths ask; writers ask ``Transaction.processing_restricted``
        under the stream lock."""
        key = self.subject_key(namespace, subject)
        with self.backend.statement_reads() as conn:
            return subject_rights.is_restricted(conn, namespace, key)

    def subject_ref(self, namespace: str, subject: str) -> str:
        """The pseudonymous reference (hex keyed hash) of a subject."""
        check_namespace(namespace)
        return self.codec.subject_key(namespace, check_subject(subject)).hex()

    def verify(self, namespace: str | None = None, subject: str | None = None) -> VerifyReport:
        """Walk the chain of one subject's streams, of one namespace's, or of the whole
        log (every chain: the audit stream's too)."""
        with self.backend.read_connection() as conn:
            query = select_streams()
            if namespace is not None:
                query = query.where(streams.c.namespace == check_namespace(namespace))
            if namespace is not None and subject is not None:
                key = self.codec.subject_key(namespace, check_subject(subject))
                query = query.where(streams.c.subject_key == key)
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
            stream = tx.lock_stream(Subject(namespace, subject))
            if stream is None:
                return []
            return tx.tombstone(stream.ref.stream_id, event_ids, erasure_request_id)

    def destroy_data_key(self, namespace: str, subject: str) -> KeyDestruction | None:
        """Destroy the data key of the subject's latest stream, if it still exists."""
        with self.transaction() as tx:
            stream = tx.lock_stream(Subject(namespace, subject))
            if stream is None:
                return None
            return tx.destroy_data_key(stream.ref.stream_id)

    # -- helpers ------------------------------------------------------------

    def _current_stream(self, conn: sa.Connection, namespace: str, subject: str) -> Any:
        key = self.codec.subject_key(check_namespace(namespace), check_subject(subject))
        return latest_stream(conn, namespace, key)
