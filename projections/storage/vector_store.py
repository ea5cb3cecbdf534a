"""SQL of the vector state: embeddings, resonance triggers, negative attractors."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore import SubjectCipher
from eventstore.backends import insert_replacing, insert_rows
from eventstore.schema import events
from projections.storage.graph_store import IDS_PER_STATEMENT, open_json, seal_json
from projections.storage.tables import attractors, node_directory, nodes, triggers, vectors

# After a delete_event: the vectors of the erased events' nodes that the graph
# still holds (it is updated first) move to the event the graph now derives
# them from; the others go.  Both read the rows of the erased events' nodes only
# (the vectors' key), and find a node in the graph through the node directory
# (memory_nodes has no index by node id): their cost does not grow with the stream.
#: A vector's node in the graph, once its directory entry is found: by the node's key.
_vector_node = sa.and_(
    nodes.c.stream_id == vectors.c.stream_id,
    nodes.c.event_id == node_directory.c.event_id,
    nodes.c.ordinal == node_directory.c.ordinal,
)
_graph_node = (
    sa.select(node_directory.c.event_id)
    .select_from(node_directory)
    .join(nodes, _vector_node)
    .where(
        node_directory.c.stream_id == vectors.c.stream_id,
        node_directory.c.node_id == vectors.c.node_id,
    )
)
_erased_vectors = sa.and_(
    vectors.c.stream_id == sa.bindparam("erased_stream"),
    vectors.c.node_id.in_(sa.bindparam("erased_nodes", expanding=True)),
    vectors.c.event_id.in_(sa.bindparam("erased_events", expanding=True)),
)
_keep_graph_nodes = (
    vectors.update()
    .where(_erased_vectors, sa.exists(_graph_node))
    .values(event_id=_graph_node.scalar_subquery())
)
_drop_other_nodes = vectors.delete().where(_erased_vectors, ~sa.exists(_graph_node))


@dataclass(frozen=True)
class NodeVector:
    """One node's embedding, to be sealed under its subject's key and stored."""

    cipher: SubjectCipher
    node_id: uuid.UUID
    event_id: uuid.UUID
    embedder: str
    vector: Sequence[float]


def _event_node_vectors(of_embedder: bool) -> sa.Select[Any]:
    """The nodes of some events of a stream with their vectors (retrieval reads those
    of a few new events after each write); of the ``embedder`` parameter's, if
    ``of_embedder``.

    Each node's vector is looked up by the vector table's key, (stream, node,
    embedder), in a subquery per node: a join leaves the planner free to read the
    stream's vectors by (stream, embedder) and match node ids as a filter, and
    PostgreSQL does so when its statistics count few vectors per stream (a table
    never analysed, a person who just grew), which reads every vector of the
    person after each write.
    """
    # The vector's stream is the parameter, not the node's column (the same value):
    # Citus routes a statement to one shard only when every table in it is pinned to
    # the stream id given; correlated with the node's column, it read every shard.
    vector = sa.select(vectors.c.embedding).where(
        vectors.c.stream_id == sa.bindparam("stream_id"), vectors.c.node_id == nodes.c.node_id
    )
    if of_embedder:
        vector = vector.where(vectors.c.embedder == sa.bindparam("embedder"))
    embedding = vector.order_by(vectors.c.embedder).limit(1).scalar_subquery()
    return sa.select(nodes, embedding.label("embedding")).where(
        nodes.c.stream_id == sa.bindparam("stream_id"),
        nodes.c.event_id.in_(sa.bindparam("event_ids", expanding=True)),
    )


# Built once, not per read: building a statement and its cache key costs about as much
# CPU as executing it, and retrieval reads the new events' vectors after each write.
_EVENT_NODE_VECTORS = {of: _event_node_vectors(of) for of in (False, True)}


# Built once: a subject's nodes with their vectors, in store order, for the retrieval
# index.  Whichever of the stream's nodes or vectors the database reads first (by
# their key's prefix, the stream), every other row is found by its key: the node's
# directory entry by node id, the node by (stream, event, ordinal), the vector by
# (stream, node id), the event by its id; so the cost is linear in the nodes on both
# backends, whatever the planner knows.  The events give the order, sorted by the
# database.  Joined only nodes to vectors, SQLite without table statistics read the
# vectors first and the stream's nodes (no index by node id) once per vector: 23 s
# for 5,000 nodes.
_stream_node_vectors = (
    sa.select(nodes, vectors.c.embedding, vectors.c.embedder)
    .select_from(vectors)
    .join(
        node_directory,
        sa.and_(
            node_directory.c.stream_id == vectors.c.stream_id,
            node_directory.c.node_id == vectors.c.node_id,
        ),
    )
    .join(nodes, sa.and_(_vector_node, nodes.c.node_id == node_directory.c.node_id))
    .join(
        events,
        sa.and_(events.c.stream_id == nodes.c.stream_id, events.c.event_id == nodes.c.event_id),
    )
    .where(vectors.c.stream_id == sa.bindparam("stream_id"))
    .order_by(events.c.version, nodes.c.ordinal)
)


def pack_vector(values: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def unpack_vector(raw: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


class VectorStore:
    """Reads and writes the vector-state tables on one connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def put_vectors(self, items: Sequence[NodeVector]) -> None:
        """Store (or replace) the vectors of many nodes, sealed, in one statement.

        Replacing makes re-applying a page (or a node) overwrite, not collide;
        only the embedders being written are replaced (a re-embedding job's
        target and the serving embedder live side by side).  A page used to
        delete its keys first: PostgreSQL, without statistics for a stream
        that had just grown (or not counting on a large one), planned that
        delete as a scan of the stream's every vector row, so a subject's
        catch-up slowed with each page it wrote (issue 33).  Each row of the
        upsert is matched through the table's key alone.
        """
        if not items:
            return
        rows = [
            {
                "node_id": item.node_id,
                "stream_id": item.cipher.stream_id,
                "event_id": item.event_id,
                "embedder": item.embedder,
                "dimension": len(item.vector),
                "embedding": item.cipher.seal(
                    "vector", item.node_id.bytes, pack_vector(item.vector)
                ),
            }
            for item in items
        ]
        # Through the driver on PostgreSQL (compiled once, no SQLAlchemy execution):
        # a catch-up right after a store writes one page of a few rows.
        insert_rows(self.conn, insert_replacing(self.conn, vectors), rows)

    def node_vectors(self, stream_id: int, embedder: str | None = None) -> list[sa.Row[Any]]:
        """Node rows joined with their vectors of ``embedder`` (never two embedders' vectors:
        they are not comparable), in store order (the version of the event a node comes
        from, then its ordinal); nodes not yet embedded are left out.  ``None``: a store
        that records no embedder, whose vectors all come from the process's own."""
        params: dict[str, Any] = {"stream_id": stream_id}
        if embedder is None:
            return list(self.conn.execute(_stream_node_vectors, params))
        query = _stream_node_vectors.where(vectors.c.embedder == embedder)
        return list(self.conn.execute(query, params))

    def event_node_vectors(
        self, stream_id: int, event_ids: Sequence[uuid.UUID], embedder: str | None = None
    ) -> list[sa.Row[Any]]:
        """Like :meth:`node_vectors`, for the nodes of some events of the stream only
        (a range of the subject-first key per event)."""
        query, found = _EVENT_NODE_VECTORS[embedder is not None], []
        params: dict[str, Any] = {"stream_id": stream_id}
        if embedder is not None:
            params["embedder"] = embedder
        for start in range(0, len(event_ids), IDS_PER_STATEMENT):
            chunk = list(event_ids[start : start + IDS_PER_STATEMENT])
            rows = self.conn.execute(query, params | {"event_ids": chunk})
            found += [row for row in rows if row.embedding is not None]  # not embedded yet
        return found

    def stream_vectors(
        self,
        stream_id: int,
        embedder: str | None = None,
        node_ids: Collection[uuid.UUID] | None = None,
    ) -> list[sa.Row[Any]]:
        """The stream's vectors (of ``embedder``, of these nodes, where given)."""
        query = sa.select(vectors).where(vectors.c.stream_id == stream_id)
        if embedder is not None:
            query = query.where(vectors.c.embedder == embedder)
        if node_ids is not None:
            query = query.where(vectors.c.node_id.in_(list(node_ids)))
        return list(self.conn.execute(query.order_by(vectors.c.node_id, vectors.c.embedder)))

    def purge_events(
        self, stream_id: int, event_ids: Sequence[uuid.UUID], node_ids: Sequence[uuid.UUID]
    ) -> None:
        """Remove what erased events contributed to the vector state (the vectors
        attributed to them, and their triggers and attractors).

        Run it once the node graph has dropped the events' nodes: a node the graph
        still holds (an identity's ENTITY node, named by messages that remain; a
        message's note when only its claims event was erased) keeps its vector,
        which is what a replay would embed again (the same text), now attributed to
        the event the graph derives the node from.
        """
        erased = {
            "erased_stream": stream_id,
            "erased_events": list(event_ids),
            "erased_nodes": list(node_ids),
        }
        self.conn.execute(_keep_graph_nodes, erased)
        self.conn.execute(_drop_other_nodes, erased)
        for table in (triggers, attractors):
            erased_rows = sa.and_(table.c.stream_id == stream_id, table.c.event_id.in_(event_ids))
            self.conn.execute(table.delete().where(erased_rows))

    def add_trigger(
        self,
        cipher: SubjectCipher,
        trigger_id: uuid.UUID,
        event_id: uuid.UUID,
        body: dict[str, Any],
        weight: float,
        threshold: float,
    ) -> None:
        scores = {"weight": weight, "threshold": threshold}
        self._replace_sealed(
            triggers.c.trigger_id, "trigger", cipher, trigger_id, event_id, body, scores
        )

    def remove_trigger(self, stream_id: int, trigger_id: uuid.UUID) -> None:
        self.conn.execute(
            triggers.delete().where(
                triggers.c.stream_id == stream_id, triggers.c.trigger_id == trigger_id
            )
        )

    def stream_triggers(self, cipher: SubjectCipher) -> list[tuple[sa.Row[Any], Any]]:
        return self._opened(triggers.c.trigger_id, "trigger", cipher)

    def add_attractor(
        self,
        cipher: SubjectCipher,
        attractor_id: uuid.UUID,
        event_id: uuid.UUID,
        body: dict[str, Any],
        severity: float,
    ) -> None:
        scores = {"severity": severity}
        self._replace_sealed(
            attractors.c.attractor_id, "attractor", cipher, attractor_id, event_id, body, scores
        )

    def clear_attractors(self, stream_id: int) -> None:
        self.conn.execute(attractors.delete().where(attractors.c.stream_id == stream_id))

    def stream_attractors(self, cipher: SubjectCipher) -> list[tuple[sa.Row[Any], Any]]:
        return self._opened(attractors.c.attractor_id, "attractor", cipher)

    def count_attractors(self, stream_id: int) -> int:
        query = sa.select(sa.func.count()).where(attractors.c.stream_id == stream_id)
        return int(self.conn.execute(query).scalar_one())

    # Triggers and attractors are kept alike: a row by id, its body sealed under the
    # subject's key and bound to the row's kind and id (the associated data: the kind
    # names must stay what the rows were sealed with).

    def _replace_sealed(
        self,
        id_column: sa.Column[uuid.UUID],
        kind: str,
        cipher: SubjectCipher,
        row_id: uuid.UUID,
        event_id: uuid.UUID,
        body: dict[str, Any],
        scores: dict[str, float],
    ) -> None:
        table = id_column.table
        self.conn.execute(table.delete().where(id_column == row_id))
        keys = {id_column.name: row_id, "stream_id": cipher.stream_id, "event_id": event_id}
        sealed = seal_json(cipher, kind, row_id, body)
        self.conn.execute(table.insert().values({**keys, "body": sealed, **scores}))

    def _opened(
        self, id_column: sa.Column[uuid.UUID], kind: str, cipher: SubjectCipher
    ) -> list[tuple[sa.Row[Any], Any]]:
        table = id_column.table
        query = sa.select(table).where(table.c.stream_id == cipher.stream_id).order_by(id_column)
        return [
            (row, open_json(cipher, kind, row._mapping[id_column], row.body))
            for row in self.conn.execute(query)
        ]

    def purge_nodes(self, stream_id: int, node_ids: Collection[uuid.UUID]) -> None:
        """Every embedder's vectors of these nodes (a part a proof replays)."""
        selected = sa.and_(vectors.c.stream_id == stream_id, vectors.c.node_id.in_(list(node_ids)))
        self.conn.execute(vectors.delete().where(selected))

    def purge_stream(self, stream_id: int) -> None:
        # subject_embedders stays: a rebuild that purges and replays a switched
        # subject must write (and digest) the same embedder's vectors again.
        for table in (vectors, triggers, attractors):
            self.conn.execute(table.delete().where(table.c.stream_id == stream_id))
