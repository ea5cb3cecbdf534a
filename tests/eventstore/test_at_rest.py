"""Plaintext never at rest: raw user ids, content, metadata, actor and session ids.

The test writes distinctive strings through the store and then scans the raw
bytes the database keeps on disk: the SQLite file with its ``-wal`` and
``-shm`` files, or PostgreSQL's relation files (tables, indexes, TOAST) after
a CHECKPOINT plus every WAL segment written meanwhile.  Each scan has a
positive control: the same string written in plaintext into a throwaway table
in the same database must be found by the same scanner, so a scan that cannot
see anything fails instead of passing.
"""

from __future__ import annotations

import secrets
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

from eventstore import EventStore, KeyringFile, NewEvent, create_backend
from tests._at_rest import ServerFiles, files_below, scan_files, superuser, wal_kept

NAMESPACE = "default"
LARGE_REPEAT = 1_000  # ~30 kB of content: past SQLite's page and PostgreSQL's TOAST threshold


@dataclass(frozen=True)
class Secrets:
    """Distinctive personal strings, each with a random token of its own."""

    user_id: str
    content: str
    metadata_note: str
    actor_id: str
    session_id: str

    @classmethod
    def new(cls) -> Secrets:
        def mark(kind: str) -> str:
            return f"zebra-{kind}-{secrets.token_hex(12)}"

        return cls(mark("subject"), mark("content"), mark("meta"), mark("actor"), mark("session"))

    def strings(self) -> list[str]:
        return [self.user_id, self.content, self.metadata_note, self.actor_id, self.session_id]

    def needles(self) -> list[bytes]:
        """The whole strings and their random tokens alone, as UTF-8."""
        tokens = [s.rsplit("-", 1)[1] for s in self.strings()]
        return [s.encode() for s in self.strings() + tokens]


def write_personal_events(store: EventStore, s: Secrets) -> None:
    """Append events carrying every secret in data and metadata, then read them back."""
    personal = {"actor_id": s.actor_id, "session_id": s.session_id}
    store.append(
        NAMESPACE,
        s.user_id,
        [
            NewEvent(
                "memory.stored",
                {"content": f"{s.content}: my cat is called Zebra", "user_id": s.user_id},
                metadata={**personal, "note": s.metadata_note},
            ),
            NewEvent("memory.stored", {"content": f"{s.content} " * LARGE_REPEAT, **personal}),
        ],
    )
    store.append(NAMESPACE, s.user_id, [NewEvent("session.started", personal, metadata=personal)])
    stored = store.read_stream(NAMESPACE, s.user_id)
    assert len(stored) == 3
    assert stored[0].metadata is not None
    assert stored[0].metadata["note"] == s.metadata_note  # it was really written


# -- SQLite ---------------------------------------------------------------------------------


def test_sqlite_files_hold_no_plaintext(
    sqlite_url: str, keyring: KeyringFile, tmp_path: Path
) -> None:
    s = Secrets.new()
    needles = s.needles()
    database = Path(sa.engine.make_url(sqlite_url).database or "")
    wal = database.with_name(database.name + "-wal")
    shm = database.with_name(database.name + "-shm")

    store = EventStore(create_backend(sqlite_url), keyring)
    try:
        write_personal_events(store, s)
        # While the store is open the new pages sit in the WAL.
        assert wal.stat().st_size > 0
        assert shm.exists()
        assert scan_files(files_below(tmp_path), needles) == {}
        # Copy them into the main file too (the WAL keeps its frames).
        with store.backend.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(FULL)")
        assert scan_files(files_below(tmp_path), needles) == {}
    finally:
        store.close()
    assert scan_files(files_below(tmp_path), needles) == {}

    # Positive control: the same scanner finds plaintext in the WAL, then in the file.
    with closing(sqlite3.connect(database)) as conn:
        conn.execute("CREATE TABLE plaintext_control (t TEXT)")
        conn.execute("INSERT INTO plaintext_control VALUES (?)", (s.user_id,))
        conn.commit()
        hits = scan_files([wal], needles)
        assert hits == {wal.name: [s.user_id.encode(), needles[len(s.strings())]]}
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert database.name in scan_files([database], needles)


# -- PostgreSQL -------------------------------------------------------------------------------


@pytest.mark.postgres
def test_postgres_relation_files_and_wal_hold_no_plaintext(
    postgres_url: str, keyring: KeyringFile
) -> None:
    s = Secrets.new()
    needles = s.needles()
    with superuser(postgres_url) as admin, wal_kept(admin) as start_lsn:
        files = ServerFiles(admin)
        store = EventStore(create_backend(postgres_url), keyring)
        try:
            write_personal_events(store, s)
        finally:
            store.close()

        assert files.relation_hits(needles) == {}
        assert files.wal_hits(start_lsn, needles) == {}
        # The scan really looked at stored events, including out-of-line TOAST.
        toast = admin.exec_driver_sql(
            "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'events'::regclass"
        ).scalar_one()
        relations = files.relation_files()
        for name in ("events", toast):
            main_fork = next(iter(relations[name].values()))
            assert main_fork, name

        # Positive control: plaintext in a throwaway table is found by both scans.
        admin.exec_driver_sql("CREATE TABLE plaintext_control (t text)")
        admin.execute(sa.text("INSERT INTO plaintext_control VALUES (:t)"), {"t": s.user_id})
        relation_hits = files.relation_hits(needles)
        assert set(relation_hits) == {"plaintext_control"}
        assert s.user_id.encode() in relation_hits["plaintext_control"]
        wal_hits = files.wal_hits(start_lsn, needles)
        assert any(s.user_id.encode() in found for found in wal_hits.values())
