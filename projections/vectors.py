"""The vector state projection (asynchronous: applied by workers after commit).

It embeds the nodes of stored events and keeps the retrieval modifiers that
are events too (resonance triggers, negative attractors), so they persist and
replay like everything else.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.engine import Connection

from eventstore import RecordedEvent, SubjectCipher
from projections import events as ev
from projections.digest import state_digest
from projections.embedders import Embedder
from projections.extraction import Extractor, OneNodePerEvent
from projections.model import NodeType
from projections.storage.vector_store import VectorStore, unpack_vector


class VectorProjection:
    """Embeddings of nodes, plus triggers and attractors, per subject."""

    name = "vector_state"
    version = 1

    def __init__(self, embedder: Embedder, extractor: Extractor | None = None) -> None:
        self.embedder = embedder
        self.extractor = extractor or OneNodePerEvent()

    def apply(self, conn: Connection, cipher: SubjectCipher, event: RecordedEvent) -> None:
        if event.data is None:
            return
        store = VectorStore(conn)
        data = event.data
        if event.type == ev.STORED:
            self._embed_nodes(store, cipher, event, data)
        elif event.type == ev.TRIGGER_ADDED:
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

    def _embed_nodes(
        self, store: VectorStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        drafts = self.extractor.extract(data["content"], NodeType(data["node_type"]))
        vectors = self.embedder.embed([d.content for d in drafts])
        for ordinal, vector in enumerate(vectors):
            node_id = ev.node_id(event.event_id, ordinal)
            store.put_vector(cipher, node_id, event.event_id, self.embedder.name, vector)

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
