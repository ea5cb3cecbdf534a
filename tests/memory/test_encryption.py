"""Personal content in the projection tables is encrypted.

Distinctive strings go in through every operation that takes personal text
(content, session id, metadata, trigger keyword and text, attractor text,
description and source, actor id); then every row of every projection table
(the retrieval index's image included: the client images every subject) is
read with plain SQL and each text or bytes value is searched for them.
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa

from oblivio import MemoryClient
from oblivio.settings import Settings
from projections import metadata as projection_metadata
from projections.storage.vector_store import pack_vector
from tests.memory._support import remember

PERSONAL_TABLES = {
    "memory_nodes",
    "memory_vectors",
    "retrieval_triggers",
    "retrieval_attractors",
    "retrieval_images",
}


def _mark(kind: str) -> str:
    return f"zebra{kind}{secrets.token_hex(8)}"


def _write_personal_data(memory: MemoryClient) -> tuple[list[str], list[bytes]]:
    """Store distinctive personal strings everywhere; return them and the raw vectors."""
    content, newer, session = _mark("content"), _mark("newer"), _mark("session")
    note, keyword, trigger_text = _mark("meta"), _mark("keyword"), _mark("trigger")
    attractor, description, source, actor = (
        _mark("attractor"),
        _mark("description"),
        _mark("source"),
        _mark("actor"),
    )
    _, old = remember(
        memory,
        f"My secret is {content}",
        session_id=session,
        scope="project",
        meta={"note": note, "confidence": 0.9},
    )
    evidence, new = remember(memory, f"My secret is now {newer}", scope="project")
    memory.supersede(old.id, new.id, evidence_id=evidence, user_id="alice", actor_id=actor)
    memory.add_resonance_trigger(user_id="alice", keyword=keyword, weight=2.0)
    memory.add_resonance_trigger(user_id="alice", text=trigger_text)
    memory.add_negative_attractor(
        attractor, user_id="alice", description=description, source=source
    )
    assert memory.retrieve("secret", user_id="alice", include_superseded=True).nodes
    embedder = memory.context.embedder
    vectors = [pack_vector(v) for v in embedder.embed([old.content, new.content, attractor])]
    strings = [
        content,
        newer,
        session,
        note,
        keyword,
        trigger_text,
        attractor,
        description,
        source,
        actor,
        "alice",
    ]
    return strings, vectors


def _rows(memory: MemoryClient) -> dict[str, list[sa.Row[object]]]:
    with memory.context.store.backend.engine.connect() as conn:
        return {
            table.name: list(conn.execute(sa.select(table)))
            for table in projection_metadata.sorted_tables
        }


def _leaks(rows: list[sa.Row[object]], needles: list[bytes]) -> list[tuple[str, bytes]]:
    found = []
    for row in rows:
        for column, value in row._mapping.items():
            raw = value.encode() if isinstance(value, str) else value
            if isinstance(raw, bytes | bytearray | memoryview):
                found += [(str(column), n) for n in needles if n in bytes(raw)]
    return found


def test_projection_tables_hold_no_plaintext(fresh_settings: Settings) -> None:
    imaging = fresh_settings.model_copy(update={"retrieval_image_nodes": 1})
    with MemoryClient(settings=imaging) as memory:
        strings, vectors = _write_personal_data(memory)
        memory.context.retrieval.save_images()
        tables = _rows(memory)

    assert set(tables) >= PERSONAL_TABLES
    for name in PERSONAL_TABLES:
        assert tables[name], f"{name} is empty: the scan would prove nothing"
    # Positive control: the same scan does find values stored in the clear.
    assert _leaks(tables["memory_nodes"], [b"project", b"superseded"])

    needles = [s.encode() for s in strings] + [s[5:].encode() for s in strings[:-1]]
    for name, rows in tables.items():
        assert _leaks(rows, needles) == [], f"plaintext in {name}"
        assert _leaks(rows, vectors) == [], f"an embedding in the clear in {name}"
