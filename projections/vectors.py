"""The vector state projection (asynchronous: applied by workers after commit).

It embeds the nodes of stored events and keeps the retrieval modifiers that
are events too (resonance triggers, negative attractors), so they persist and
replay like everything else.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from eventstore import RecordedEvent, SubjectCipher
from projections import events as ev
from projections.digest import state_digest
from projections.embedders import Embedder
from projections.extraction import Extractor, OneNodePerEvent
from projections.model import NodeType
from projections.storage.vector_store import NodeVector, VectorStore, unpack_vector


class VectorProjection:
    """Embeddings of nodes, plus triggers and attractors, per subject."""

    name = "vector_state"
    version = 1

    def __init__(self, embedder: Embedder, extractor: Extractor | None = None) -> None:
        self.embedder = embedder
        self.extractor = extractor or OneNodePerEvent()

    def apply(self, conn: Connection, cipher: SubjectCipher, event: RecordedEvent) -> None:
        self.apply_page(conn, [(cipher, event)])

    def apply_page(
        self, conn: Connection, page: Sequence[tuple[SubjectCipher, RecordedEvent]]
    ) -> None:
        """Apply events in log order, embedding and writing all their nodes at once.

        Nodes' vectors are written after the page's trigger and attractor
        events: the two never touch the same rows, so the order between them
        does not change the state, and one embedding call and one write serve
        the whole page.
        """
        store = VectorStore(conn)
        stored: list[tuple[SubjectCipher, RecordedEvent]] = []
        for cipher, event in page:
            if event.data is None:
                continue
            if event.type in (ev.STORED, ev.CLAIMS_EXTRACTED):
                stored.append((cipher, event))
            else:
                self._apply_modifier(store, cipher, event, event.data)
        store.put_vectors(self._node_vectors(stored))

    def _apply_modifier(
        self, store: VectorStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        """Resonance triggers and negative attractors."""
        if event.type == ev.TRIGGER_ADDED:
            body = {"keyword": data.get("keyword"), "text": data.get("text")}
            if data.get("text"):
                body["vector"] = self.embedder.embed([data["text"]])[0]
            store.add_trigger(
                cipher,
                uuid.UUID(data["trigger_id"]),
                event.event_id,
                body,
                data["weight"],
                data["threshold"],
            )
        elif event.type == ev.TRIGGER_REMOVED:
            store.remove_trigger(cipher.stream_id, uuid.UUID(data["trigger_id"]))
        elif event.type == ev.ATTRACTOR_ADDED:
            body = {k: data.get(k) for k in ("text", "description", "source")}
            body["vector"] = self.embedder.embed([data["text"]])[0]
            store.add_attractor(
                cipher, uuid.UUID(data["attractor_id"]), event.event_id, body, data["severity"]
            )
        elif event.type == ev.ATTRACTORS_CLEARED:
            store.clear_attractors(cipher.stream_id)

    def _node_vectors(
        self, stored: Sequence[tuple[SubjectCipher, RecordedEvent]]
    ) -> list[NodeVector]:
        """Every node of the stored events with its vector, from one embedding call."""
        nodes: list[tuple[SubjectCipher, uuid.UUID, uuid.UUID, str]] = []
        for cipher, event in stored:
            nodes += [(cipher, *node) for node in self._node_texts(event)]
        vectors = self.embedder.embed([content for *_, content in nodes]) if nodes else []
        return [
            NodeVector(cipher, node_id, event_id, self.embedder.name, vector)
            for (cipher, node_id, event_id, _), vector in zip(nodes, vectors, strict=True)
        ]

    def _node_texts(self, event: RecordedEvent) -> list[tuple[uuid.UUID, uuid.UUID, str]]:
        """Each node an event adds: its id, its source event, its text.

        A claims event's nodes belong to the ingested message they came from,
        so erasing that message drops their vectors with its own.
        """
        data = event.data or {}
        if event.type == ev.CLAIMS_EXTRACTED:
            source = uuid.UUID(data["source_event_id"])
            return [(uuid.UUID(c["node_id"]), source, c["content"]) for c in data["claims"]]
        drafts = self.extractor.extract(data["content"], NodeType(data["node_type"]))
        return [
            (ev.node_id(event.event_id, ordinal), event.event_id, d.content)
            for ordinal, d in enumerate(drafts)
        ]

    def purge(self, conn: Connection, stream_id: int) -> None:
        VectorStore(conn).purge_stream(stream_id)

    def purge_event(self, conn: Connection, stream_id: int, event_id: uuid.UUID) -> None:
        """Drop what one erased event contributed (the rebuild job later replays the rest)."""
        VectorStore(conn).purge_event(stream_id, event_id)

    def digest(self, conn: Connection, cipher: SubjectCipher | None, stream_id: int) -> str:
        store = VectorStore(conn)
        rows = store.stream_vectors(stream_id)
        if cipher is None:
            if rows:
                raise ValueError("vector rows remain for a stream whose key is destroyed")
            return state_digest({"vectors": [], "triggers": [], "attractors": []})
        state = {
            "vectors": [
                {
                    "node_id": r.node_id,
                    "embedder": r.embedder,
                    "vector": unpack_vector(cipher.open("vector", r.node_id.bytes, r.embedding)),
                }
                for r in rows
            ],
            "triggers": [
                {"id": r.trigger_id, "weight": r.weight, "threshold": r.threshold, "body": body}
                for r, body in store.stream_triggers(cipher)
            ],
            "attractors": [
                {"id": r.attractor_id, "severity": r.severity, "body": body}
                for r, body in store.stream_attractors(cipher)
            ],
        }
        return state_digest(state)
