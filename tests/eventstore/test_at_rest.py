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
import uuid
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

from eventstore import EventStore, KeyringFile, NewEvent, create_backend

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


def found_in(blob: bytes, needles: Iterable[bytes]) -> list[bytes]:
    return [n for n in needles if n in blob]


def scan_files(paths: Iterable[Path], needles: list[bytes]) -> dict[str, list[bytes]]:
    """For each file that contains any needle: which ones."""
    hits = {}
    for path in paths:
        found = found_in(path.read_bytes(), needles)
        if found:
            hits[path.name] = found
    return hits


# -- SQLite ---------------------------------------------------------------------------------


def sqlite_files(directory: Path) -> list[Path]:
    """Every file in the data directory: database, -wal, -shm, journals, anything else."""
    return sorted(p for p in directory.rglob("*") if p.is_file())


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
        assert scan_files(sqlite_files(tmp_path), needles) == {}
        # Copy them into the main file too (the WAL keeps its frames).
        with store.backend.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(FULL)")
        assert scan_files(sqlite_files(tmp_path), needles) == {}
    finally:
        store.close()
    assert scan_files(sqlite_files(tmp_path), needles) == {}

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

_RELATIONS = sa.text(
    """
    WITH own AS (
        SELECT oid FROM pg_class
        WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'i', 't', 'S', 'm')
    ), toast AS (
        SELECT c.reltoastrelid AS oid FROM pg_class c JOIN own USING (oid)
        WHERE c.reltoastrelid <> 0
    ), toast_index AS (
        SELECT i.indexrelid AS oid FROM pg_index i JOIN toast t ON i.indrelid = t.oid
    ), everything AS (
        SELECT oid FROM own UNION SELECT oid FROM toast UNION SELECT oid FROM toast_index
    )
    SELECT oid::regclass::text AS name, pg_relation_filepath(oid) AS path
    FROM everything WHERE pg_relation_filepath(oid) IS NOT NULL ORDER BY 1
    """
)


@contextmanager
def admin_connection(url: str) -> Iterator[sa.Connection]:
    from eventstore.backends.postgres import normalise_postgres_url

    engine = sa.create_engine(normalise_postgres_url(url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def relation_files(conn: sa.Connection) -> dict[str, list[str]]:
    """Data-directory-relative files of every table, index and TOAST relation in public."""
    files: dict[str, list[str]] = {}
    for name, path in conn.execute(_RELATIONS).all():
        candidates = [path, f"{path}.1", f"{path}_fsm", f"{path}_vm", f"{path}_init"]
        files[name] = [p for p in candidates if file_size(conn, p) is not None]
    return files


def file_size(conn: sa.Connection, path: str) -> int | None:
    size = conn.execute(
        sa.text("SELECT (pg_stat_file(:p, true)).size"), {"p": path}
    ).scalar_one()
    return None if size is None else int(size)


def read_server_file(conn: sa.Connection, path: str) -> bytes:
    # Read through the server (superuser): works for a local server and a
    # container alike, and sees exactly what PostgreSQL wrote.
    blob = conn.execute(sa.text("SELECT pg_read_binary_file(:p)"), {"p": path}).scalar_one()
    return bytes(blob)


def scan_relations(conn: sa.Connection, needles: list[bytes]) -> dict[str, list[bytes]]:
    conn.exec_driver_sql("CHECKPOINT")  # every dirty page of every relation reaches its file
    hits = {}
    for name, paths in relation_files(conn).items():
        found = {n for p in paths for n in found_in(read_server_file(conn, p), needles)}
        if found:
            hits[name] = sorted(found)
    return hits


def current_wal_lsn(conn: sa.Connection) -> str:
    return str(conn.exec_driver_sql("SELECT pg_current_wal_insert_lsn()").scalar_one())


def wal_segments(conn: sa.Connection, start_lsn: str) -> list[str]:
    """Every WAL segment from the one holding ``start_lsn`` to the current one."""
    last = conn.exec_driver_sql(
        "SELECT pg_walfile_name(pg_current_wal_insert_lsn())"
    ).scalar_one()
    names = conn.execute(
        sa.text(
            """
            SELECT name FROM pg_ls_waldir()
            WHERE name ~ '^[0-9A-F]{24}$'
              AND name BETWEEN pg_walfile_name(CAST(:start AS pg_lsn)) AND :last
            ORDER BY name
            """
        ),
        {"start": start_lsn, "last": last},
    ).scalars().all()
    assert names, "no WAL segment found"
    assert names[-1] == last
    return [f"pg_wal/{name}" for name in names]


def scan_wal(conn: sa.Connection, start_lsn: str, needles: list[bytes]) -> dict[str, list[bytes]]:
    hits = {}
    for path in wal_segments(conn, start_lsn):
        found = found_in(read_server_file(conn, path), needles)
        if found:
            hits[path] = found
    return hits


@contextmanager
def wal_retained(conn: sa.Connection) -> Iterator[str]:
    """Keep every WAL segment from now on, for the life of ``conn``; yield the start LSN.

    A temporary physical replication slot stops checkpoints from recycling the
    segments under scan, and disappears with the session even if the test dies.
    """
    slot = f"oblivio_at_rest_{uuid.uuid4().hex[:12]}"
    conn.execute(
        sa.text("SELECT pg_create_physical_replication_slot(:slot, true, true)"), {"slot": slot}
    )
    try:
        yield current_wal_lsn(conn)
    finally:
        conn.execute(sa.text("SELECT pg_drop_replication_slot(:slot)"), {"slot": slot})


@pytest.mark.postgres
def test_postgres_relation_files_and_wal_hold_no_plaintext(
    postgres_url: str, keyring: KeyringFile
) -> None:
    s = Secrets.new()
    needles = s.needles()
    with admin_connection(postgres_url) as admin, wal_retained(admin) as start_lsn:
        store = EventStore(create_backend(postgres_url), keyring)
        try:
            write_personal_events(store, s)
        finally:
            store.close()

        assert scan_relations(admin, needles) == {}
        assert scan_wal(admin, start_lsn, needles) == {}
        # The scan really looked at stored events, including out-of-line TOAST.
        events_files = relation_files(admin)
        toast = admin.exec_driver_sql(
            "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'events'::regclass"
        ).scalar_one()
        assert file_size(admin, events_files["events"][0])
        assert file_size(admin, events_files[toast][0])

        # Positive control: plaintext in a throwaway table is found by both scans.
        admin.exec_driver_sql("CREATE TABLE plaintext_control (t text)")
        admin.execute(sa.text("INSERT INTO plaintext_control VALUES (:t)"), {"t": s.user_id})
        relation_hits = scan_relations(admin, needles)
        assert set(relation_hits) == {"plaintext_control"}
        assert s.user_id.encode() in relation_hits["plaintext_control"]
        wal_hits = scan_wal(admin, start_lsn, needles)
        assert any(s.user_id.encode() in found for found in wal_hits.values())
