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
from projections.base import Anchored, Projection, StreamSource, StreamView, item_digest
from projections.embedders import Embedder
from projections.extraction import Extractor, OneNodePerEvent
from projections.model import NodeType
from projections.parts import Part
from projections.storage import embedder_store
from projections.storage.vector_store import NodeVector, VectorStore
from projections.store_embedders import StoreEmbedders

#: Events that act on the vector state's triggers and attractors.
_MODIFIERS = frozenset(
    {ev.TRIGGER_ADDED, ev.TRIGGER_REMOVED, ev.ATTRACTOR_ADDED, ev.ATTRACTORS_CLEARED}
)

#: A node to embed: its subject's cipher, node id, source event id and text.
_NodeText = tuple[SubjectCipher, uuid.UUID, uuid.UUID, str]


class VectorProjection(Projection):
    """Embeddings of nodes, plus triggers and attractors, per subject."""

    name = "vector_state"
    version = 1

    def __init__(
        self,
        embedder: Embedder,
        extractor: Extractor | None = None,
        embedders: StoreEmbedders | None = None,
    ) -> None:
        #: Which embedders write and serve each subject (the store records it).
        self.embedders = embedders or StoreEmbedders(embedder, None)
        self.extractor = extractor or OneNodePerEvent()

    @property
    def embedder(self) -> Embedder:
        """The embedder this process was started with (the store's, checked at start)."""
        return self.embedders.first

    def apply(self, conn: Connection, cipher: SubjectCipher, event: RecordedEvent) -> None:
        self.apply_page(conn, [(cipher, event)])

    def apply_page(
        self, conn: Connection, page: Sequence[tuple[SubjectCipher, RecordedEvent]]
    ) -> None:
        """Apply events in log order, embedding and writing all their nodes at once.

        Nodes' vectors are written after the page's trigger and attractor
        events: the two never touch the same rows, so the order between them
        does not change the state, and one embedding call and one write serve
        the whole page (per embedder: a re-embedding job's target writes too).
        """
        store = VectorStore(conn)
        writers = self.embedders.writers(conn, {cipher.stream_id for cipher, _ in page})
        stored: list[tuple[SubjectCipher, RecordedEvent]] = []
        for cipher, event in page:
            if event.data is None:
                continue
            if event.type in (ev.STORED, ev.CLAIMS_EXTRACTED):
                stored.append((cipher, event))
            else:
                serving = writers[cipher.stream_id][0]
                self._apply_modifier(store, cipher, event, event.data, serving)
        store.put_vectors(self._node_vectors(stored, writers))

    def _apply_modifier(
        self,
        store: VectorStore,
        cipher: SubjectCipher,
        event: RecordedEvent,
        data: dict[str, Any],
        embedder: Embedder,
    ) -> None:
        """Resonance triggers and negative attractors (embedded by the serving embedder)."""
        if event.type == ev.TRIGGER_ADDED:
            body = {"keyword": data.get("keyword"), "text": data.get("text")}
            if data.get("text"):
                body["vector"] = embedder.embed([data["text"]])[0]
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
            body["vector"] = embedder.embed([data["text"]])[0]
            store.add_attractor(
                cipher, uuid.UUID(data["attractor_id"]), event.event_id, body, data["severity"]
            )
        elif event.type == ev.ATTRACTORS_CLEARED:
            store.clear_attractors(cipher.stream_id)

    def _node_vectors(
        self,
        stored: Sequence[tuple[SubjectCipher, RecordedEvent]],
        writers: dict[int, list[Embedder]],
    ) -> list[NodeVector]:
        """Every node of the stored events with its vectors, one embedding call per embedder."""
        by_embedder: dict[str, tuple[Embedder, list[_NodeText]]] = {}
        for cipher, event in stored:
            texts = self._node_texts(event)
            for embedder in writers[cipher.stream_id]:
                _, nodes = by_embedder.setdefault(embedder.name, (embedder, []))
                nodes += [(cipher, *node) for node in texts]
        result: list[NodeVector] = []
        for embedder, named in by_embedder.values():
            # An entity named by several events of the page is embedded once (its
            # text is the same): one row per node, as put_vectors needs.
            nodes = list({(n[0].stream_id, n[1]): n for n in named}.values())
            vectors = embedder.embed([content for *_, content in nodes]) if nodes else []
            result += [
                NodeVector(cipher, node_id, event_id, embedder.name, vector)
                for (cipher, node_id, event_id, _), vector in zip(nodes, vectors, strict=True)
            ]
        return result

    def _node_texts(self, event: RecordedEvent) -> list[tuple[uuid.UUID, uuid.UUID, str]]:
        """Each node an event adds: its id, its source event, its text.

        A claims event's nodes belong to the ingested message they came from,
        so erasing that message drops their vectors with its own.
        """
        data = event.data or {}
        if event.type == ev.CLAIMS_EXTRACTED:
            source = uuid.UUID(data["source_event_id"])
            nodes = [*data["claims"], *(data.get("entities") or [])]
            return [(uuid.UUID(n["node_id"]), source, _text(n)) for n in nodes]
        drafts = self.extractor.extract(data["content"], NodeType(data["node_type"]))
        return [
            (ev.node_id(event.event_id, ordinal), event.event_id, d.content)
            for ordinal, d in enumerate(drafts)
        ]

    def purge(self, conn: Connection, stream_id: int) -> None:
        VectorStore(conn).purge_stream(stream_id)

    def purge_events(
        self, source: StreamSource, stream_id: int, erased: Sequence[RecordedEvent]
    ) -> None:
        """Drop what the erased events contributed; the rebuild job later proves the
        rest (embedding everything again would make the erasure slow).  A claims
        event's nodes are attributed to its message (see ``_node_texts``)."""
        attributed = [event.event_id for event in erased]
        attributed += [
            uuid.UUID(event.data["source_event_id"])
            for event in erased
            if event.type == ev.CLAIMS_EXTRACTED and event.data is not None
        ]
        # The nodes those vectors can belong to: the ones the erased events add (read
        # with their data), so the statements read those nodes' rows, not the stream's.
        node_ids = [
            node_id
            for event in erased
            if event.type in (ev.STORED, ev.CLAIMS_EXTRACTED) and event.data is not None
            for node_id, _, _ in self._node_texts(event)
        ]
        VectorStore(source.connection).purge_events(stream_id, attributed, node_ids)

    def anchored_digests(
        self, view: StreamView, stream_id: int, part: Part | None = None
    ) -> list[Anchored]:
        """Vectors are placed by their node, triggers and attractors by the event that
        wrote them."""
        conn, cipher = view.connection, view.cipher(stream_id)
        store = VectorStore(conn)
        # The serving embedder's vectors: a running re-embedding's are not served yet.
        serving = embedder_store.serving(conn, stream_id)
        rows = store.stream_vectors(stream_id, serving, None if part is None else part.nodes)
        if cipher is None:
            if rows:
                raise ValueError("vector rows remain for a stream whose key is destroyed")
            return []
        vectors = (
            (
                r.node_id,
                {
                    "node_id": r.node_id,
                    "embedder": r.embedder,
                    # The packed float32 values as they decrypt: the same numbers as
                    # a list of floats, digested without rendering 256 of them as text.
                    "vector": cipher.open("vector", r.node_id.bytes, r.embedding),
                },
            )
            for r in rows
        )
        # Few per person, so read whole; a part holds those of its events only.
        triggers = (
            (
                r.event_id,
                {"id": r.trigger_id, "weight": r.weight, "threshold": r.threshold, "body": body},
            )
            for r, body in store.stream_triggers(cipher)
            if part is None or r.event_id in part.events
        )
        attractors = (
            (r.event_id, {"id": r.attractor_id, "severity": r.severity, "body": body})
            for r, body in store.stream_attractors(cipher)
            if part is None or r.event_id in part.events
        )
        return [
            *((anchor, item_digest("vector", v)) for anchor, v in vectors),
            *((anchor, item_digest("trigger", t)) for anchor, t in triggers),
            *((anchor, item_digest("attractor", a)) for anchor, a in attractors),
        ]

    def replay_part(self, source: StreamSource, stream_id: int, part: Part) -> bool:
        """Embed the part's nodes again from its remaining events.  A part holding a
        trigger or attractor event is not bounded here: those events act on rows other
        events wrote (a removal, clearing every attractor), which no node links."""
        cipher = source.cipher(stream_id)
        if cipher is None:
            return False
        found = source.get_events(sorted(part.events))
        if any(e.type in _MODIFIERS for e in found):
            return False
        VectorStore(source.connection).purge_nodes(stream_id, part.nodes)
        remaining = sorted((e for e in found if e.data is not None), key=lambda e: e.version)
        if remaining:
            self.apply_page(source.connection, [(cipher, e) for e in remaining])
        return True

    def snapshot_basis(self, conn: Connection, stream_id: int) -> str:
        return f"{embedder_store.serving(conn, stream_id)}/{type(self.extractor).__qualname__}"


def _text(node: dict[str, Any]) -> str:
    """A claims event's node text: a claim's content, an entity's name."""
    return str(node["content"] if "content" in node else node["name"])
