"""Read queries of the retrieval index: the subject's state token.

The retrieval index (:mod:`projections.retrieval_index`) keeps one subject's
decrypted nodes and vectors in process memory.  Before it serves a query it
reads a small *state token* in two statements (the second by stream id, so
that on Citus it reads the stream's one shard); any change to what retrieval
may return for the subject changes the token, so a stale or erased entry is
never served.  Why each part is enough:

* ``stream_id`` – a forgotten subject writes into a new stream generation.
* ``version`` – every memory operation (store, supersede, contradict,
  reinforce, triggers, attractors) appends an event to the stream, and the
  inline node graph commits in the same transaction as the append.
* ``closed_at`` / ``key_destroyed_at`` – ``forget`` closes the stream and
  destroys its key in the transaction that purges its rows.
* ``erasures`` – ``delete_event`` (and retention, which uses it) leaves the
  stream version as it is, but inserts its erasure request in the same
  transaction that tombstones (or removes) the event and purges its rows.
* ``rebuilds`` – a rebuild job re-derives the subject's rows after an erasure
  and marks itself done in the same transaction.
* ``vector_mark`` – the vector state is written after commit, by the runner or
  a consistent read's catch-up, each moving the stream's mark (the version of
  its last event applied, ``projection_stream_marks``) in the transaction that
  writes the stream's vectors.  Once it equals ``version`` the stream's vectors
  cannot change until one of the parts above changes.
* ``embedder`` – the embedder whose vectors serve the subject: a re-embedding
  job switches it (and the store's, when the job ends) in the transaction
  that completes the subject's new vectors.
* ``graph_marked`` – an upgrade marks a stream whose graph must be rebuilt from
  the log (``memory_graph_backfills``); the rebuild, which appends nothing,
  drops the mark in its transaction (oblivio.memory.backfills).

Two more parts ride along, so that a ranked read asks them without a statement
of its own, but are not compared (they do not change what the cached index
holds): whether processing of the subject is restricted now (Art. 18,
``subject_restrictions``, in the first statement), and the stream's mark of
another follower a consistent read waits for (the likely-update detector: the
version of the stream's last event it judged, in the second statement, on the
stream's shard beside the vector state's mark).

All of these already exist and are written anyway; the token adds no write
to the ``store()`` path.  The token must be read *before* the rows it
validates: rows read afterwards can only be newer than the token, which costs
at most one extra reload, never a stale answer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.reader import LATEST_STREAM_ID
from eventstore.schema import erasure_requests, rebuild_jobs, streams, subject_restrictions
from projections.storage import Fetch
from projections.storage.embedder_store import current_embedder
from projections.storage.tables import (
    graph_backfills,
    stream_marks,
    subject_embedders,
)


@dataclass(frozen=True)
class StateToken:
    """What a cached subject must still match to be served (see the module docstring)."""

    stream_id: int
    version: int
    closed_at: datetime | None
    key_destroyed_at: datetime | None
    erasures: int
    rebuilds: int
    #: The version of the stream's last event the vector state applied (0: none).
    vector_mark: int
    #: The serving embedder's name (``None``: the store records none yet).
    embedder: str | None
    #: Whether the stream's graph waits for a rebuild from the log.
    graph_marked: bool
    #: Whether processing of the subject is restricted now (GDPR Art. 18).
    restricted: bool = field(default=False, compare=False)
    #: The version of the stream's last event the follower named when the token was
    #: read has judged (0: none; ``None``: no follower named).
    follower_mark: int | None = field(default=None, compare=False)

    @property
    def readable(self) -> bool:
        """False once the subject is forgotten: nothing of it may be returned."""
        return self.closed_at is None and self.key_destroyed_at is None

    @property
    def caught_up(self) -> bool:
        """Whether the vector state has applied the stream's last event (true without
        events)."""
        return self.vector_mark >= self.version

    @property
    def followed(self) -> bool:
        """Whether the follower named when the token was read has passed the stream's
        last event (true without events; false when no follower was named)."""
        return self.version == 0 or (
            self.follower_mark is not None and self.follower_mark >= self.version
        )

    def caught_up_now(self) -> StateToken:
        """This token once the vector state has applied its last event (the runner
        said so): what reading it again would give unless something else changed
        meanwhile.  Rows read after that are then newer than this token, which
        (as above) costs at most one reload, never a stale answer."""
        return dataclasses.replace(self, vector_mark=self.version)

    def followed_now(self) -> StateToken:
        """This token once its follower has passed its last event without appending
        anything (the follower said so): what reading it again would give unless
        something else changed meanwhile (as for :meth:`caught_up_now`)."""
        return dataclasses.replace(self, follower_mark=self.version)


def _build_token_statement() -> sa.Select[tuple[object, ...]]:
    """The token's first statement: the subject's latest stream generation (from the
    stream directory) and what is kept beside it, not on its shard (requests, jobs,
    restrictions).

    Parameters: ``namespace`` and ``subject_key``.
    """
    stream = LATEST_STREAM_ID.subquery("stream")
    of_subject = sa.and_(
        erasure_requests.c.namespace == sa.bindparam("namespace"),
        erasure_requests.c.subject_key == sa.bindparam("subject_key"),
    )
    erasures = sa.select(sa.func.count()).select_from(erasure_requests).where(of_subject)
    rebuilds = (
        sa.select(sa.func.count())
        .select_from(rebuild_jobs)
        .where(
            rebuild_jobs.c.request_id.in_(
                sa.select(erasure_requests.c.request_id).where(of_subject)
            ),
            rebuild_jobs.c.status == "done",
        )
    )
    restriction = sa.and_(
        subject_restrictions.c.namespace == sa.bindparam("namespace"),
        subject_restrictions.c.subject_key == sa.bindparam("subject_key"),
    )
    return sa.select(
        stream,
        erasures.scalar_subquery().label("erasures"),
        rebuilds.scalar_subquery().label("rebuilds"),
        current_embedder().label("current_embedder"),
        subject_restrictions.c.restricted_at,
    ).select_from(stream.outerjoin(subject_restrictions, restriction))


def _build_stream_state() -> sa.Select[tuple[object, ...]]:
    """The token's second statement: what lies with the stream's rows (its head, its
    own embedder, its backfill mark, the vector state's mark and the other follower's),
    each by the stream id it is given.

    Parameters ``stream_id`` (the first statement's), ``projection`` (the vector
    state's name, whose mark is read) and ``follower`` (the other follower's name,
    ``None`` for none).  On Citus this is routed to the
    stream's one shard; joined into the first statement it had every shard's rows of
    these tables copied to the coordinator per read.
    """
    stream_id = sa.bindparam("stream_id", type_=sa.BigInteger())

    def mark_of(name: str) -> sa.ScalarSelect[int]:
        return (
            sa.select(stream_marks.c.version)
            .where(stream_marks.c.stream_id == stream_id, stream_marks.c.name == sa.bindparam(name))
            .scalar_subquery()
        )

    return sa.select(
        streams.c.version,
        streams.c.closed_at,
        streams.c.key_destroyed_at,
        sa.select(subject_embedders.c.embedder)
        .where(subject_embedders.c.stream_id == stream_id)
        .scalar_subquery()
        .label("embedder"),
        sa.exists().where(graph_backfills.c.stream_id == stream_id).label("marked"),
        mark_of("projection").label("vector_mark"),
        mark_of("follower").label("follower_mark"),
    ).where(streams.c.stream_id == stream_id)


token_statement = _build_token_statement()
_stream_state = _build_stream_state()


def state_token(
    conn: Connection,
    fetch: Fetch,
    namespace: str,
    subject_key: bytes,
    projection: str,
    follower: str | None = None,
) -> StateToken | None:
    """The token of the subject's latest stream; ``None`` if it never wrote.
    ``follower`` names the other follower whose mark of the stream the token carries.

    Both statements run through ``fetch`` (``eventstore.Backend.fetch``): built and
    compiled once, they skip SQLAlchemy's execution (its cache key of these
    statements alone cost more CPU than the server took to answer them), and
    every retrieve reads them.
    """
    rows = fetch(conn, token_statement, {"namespace": namespace, "subject_key": subject_key})
    if not rows:
        return None
    # The first statement's columns, in its order.
    [(stream_id, erasures, rebuilds, current, restricted_at)] = rows
    # Read after the first statement: at least as new, which (as for the rows the
    # token validates) can only cost a reload.
    params = {"stream_id": stream_id, "projection": projection, "follower": follower}
    heads = fetch(conn, _stream_state, params)
    if not heads:  # on a cluster: a generation committed on the coordinator, not yet on its shard
        return None
    [(version, closed_at, key_destroyed_at, embedder, marked, mark, follower_mark)] = heads
    return StateToken(
        stream_id=stream_id,
        version=version,
        closed_at=closed_at,
        key_destroyed_at=key_destroyed_at,
        erasures=erasures,
        rebuilds=rebuilds,
        vector_mark=mark or 0,
        embedder=current if embedder is None else embedder,
        graph_marked=bool(marked),
        restricted=restricted_at is not None,
        follower_mark=None if follower is None else follower_mark or 0,
    )
