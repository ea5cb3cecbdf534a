"""After forget, the subject's content and user id are nowhere on disk, and its data key
row is gone.

SQLite: the database file and its -wal/-shm files.  PostgreSQL: the files of every
table, index and TOAST relation after a CHECKPOINT, and every WAL segment written
since the test began (kept by a temporary replication slot), up to the current one.
Each scanner has a positive control: a plaintext string planted in a throwaway table
must be found by the same scan, so a scanner that looks at nothing cannot pass.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from eventstore.backends.postgres import normalise_postgres_url
from eventstore.schema import data_keys, events
from oblivio import MemoryClient
from oblivio.settings import Settings
from tests.erasure._support import (
    completed,
    data_key_rows,
    marker,
    raw_rows,
    seed_subject,
    stream_id_of,
)

LARGE_REPEAT = 800  # tens of kB: SQLite overflow pages, PostgreSQL TOAST


def write_subject(client: MemoryClient) -> tuple[str, list[bytes]]:
    """A subject with small and large memories; its user id and every needle to look for."""
    user_id = marker("subject-zebra")
    seeded = seed_subject(client, user_id)
    large = marker("large")
    client.store(f"{large} " * LARGE_REPEAT, user_id=user_id, meta={"note": marker("meta")})
    texts = [user_id, large, *seeded.secrets]
    tokens = [t.rsplit("-", 1)[1] for t in texts]  # the random part alone, too
    return user_id, [t.encode() for t in texts + tokens]


def hits_in(blob: bytes, needles: Iterable[bytes]) -> list[bytes]:
    return [n for n in needles if n in blob]


def scan_paths(paths: Iterable[Path], needles: list[bytes]) -> dict[str, list[bytes]]:
    found = {}
    for path in paths:
        hits = hits_in(path.read_bytes(), needles)
        if hits:
            found[path.name] = hits
    return found


def forget_and_certify(client: MemoryClient, user_id: str) -> int:
    stream_id = stream_id_of(client, user_id)
    assert len(data_key_rows(client, stream_id)) == 1
    completed(client.forget(user_id, wait=True))
    assert data_key_rows(client, stream_id) == []
    return stream_id


# -- SQLite ------------------------------------------------------------------------------


def sqlite_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and "keyring" not in p.name
                  and "issuer-keys" not in p.name)


def test_sqlite_file_and_wal_hold_nothing_of_a_forgotten_subject(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    client = MemoryClient(settings=Settings(data_dir=data_dir, keyring_path=tmp_path / "k.json"))
    try:
        user_id, needles = write_subject(client)
        stream_id = stream_id_of(client, user_id)
        [dek] = data_key_rows(client, stream_id)
        ciphertexts = [  # their heads: a large one continues on overflow pages
            row.payload[:48]
            for row in raw_rows(client, sa.select(events.c.payload).where(
                events.c.stream_id == stream_id))
        ]
        database = Path(str(client.context.store.backend.engine.url.database))
        wal = database.with_name(database.name + "-wal")
        # Control: before the forget, the wrapped key and the ciphertext are on disk.
        on_disk = b"".join(p.read_bytes() for p in sqlite_files(data_dir))
        assert dek.wrapped_key in on_disk
        assert all(c in on_disk for c in ciphertexts)

        forget_and_certify(client, user_id)

        assert wal.stat().st_size > 0  # the scan below covers uncheckpointed frames too
        assert scan_paths(sqlite_files(data_dir), needles) == {}
    finally:
        client.close()  # the last connection checkpoints the WAL into the file
    assert scan_paths(sqlite_files(data_dir), needles) == {}
    # secure_delete=ON: once checkpointed, the destroyed wrapped key and the erased
    # ciphertext do not linger in freed space of the database file.
    after = b"".join(p.read_bytes() for p in sqlite_files(data_dir))
    assert dek.wrapped_key not in after
    assert [c for c in ciphertexts if c in after] == []

    # Positive control: the same scanner finds a planted plaintext in the WAL and the file.
    with closing(sqlite3.connect(database)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE plaintext_control (t TEXT)")
        conn.execute("INSERT INTO plaintext_control VALUES (?)", (user_id,))
        conn.commit()
        assert user_id.encode() in scan_paths([wal], needles).get(wal.name, [])
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert user_id.encode() in scan_paths([database], needles).get(database.name, [])


# -- PostgreSQL ----------------------------------------------------------------------------

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
    )
    SELECT oid::regclass::text AS name, pg_relation_filepath(oid) AS path
    FROM (SELECT oid FROM own UNION SELECT oid FROM toast UNION SELECT oid FROM toast_index) x
    WHERE pg_relation_filepath(oid) IS NOT NULL ORDER BY 1
    """
)


class ServerFiles:
    """Reads PostgreSQL's files: straight from the data directory when this process can
    (a local server), else through ``pg_read_binary_file`` (a container)."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.root = Path(str(conn.exec_driver_sql("SHOW data_directory").scalar_one()))

    def read(self, relative: str) -> bytes | None:
        path = self.root / relative
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except PermissionError:
            blob = self.conn.execute(
                sa.text("SELECT pg_read_binary_file(:p, 0, 1 << 30, true)"), {"p": relative}
            ).scalar_one()
            return None if blob is None else bytes(blob)

    def relation_hits(self, needles: list[bytes]) -> dict[str, list[bytes]]:
        """CHECKPOINT, then scan every segment and fork of every relation in public."""
        self.conn.exec_driver_sql("CHECKPOINT")
        found: dict[str, list[bytes]] = {}
        scanned = 0
        for name, path in self.conn.execute(_RELATIONS).all():
            for candidate in (path, f"{path}_fsm", f"{path}_vm", *(f"{path}.{i}" for i in
                                                                   range(1, 4))):
                blob = self.read(candidate)
                if blob is None:
                    continue
                scanned += len(blob)
                hits = hits_in(blob, needles)
                if hits:
                    found.setdefault(name, []).extend(hits)
        assert scanned > 0, "no relation file was readable"
        return found

    def wal_hits(self, start_lsn: str, needles: list[bytes]) -> dict[str, list[bytes]]:
        """Scan every WAL segment from the one holding ``start_lsn`` to the current one."""
        current = self.conn.exec_driver_sql(
            "SELECT pg_walfile_name(pg_current_wal_insert_lsn())"
        ).scalar_one()
        names = self.conn.execute(
            sa.text(
                "SELECT name FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$' "
                "AND name BETWEEN pg_walfile_name(CAST(:s AS pg_lsn)) AND :c ORDER BY name"
            ),
            {"s": start_lsn, "c": current},
        ).scalars().all()
        assert names, "no WAL segment found"
        assert names[-1] == current, "the current WAL segment was not found"
        found = {}
        for name in names:
            blob = self.read(f"pg_wal/{name}")
            assert blob is not None, name
            hits = hits_in(blob, needles)
            if hits:
                found[name] = hits
        return found


@contextmanager
def superuser(url: str) -> Iterator[sa.Connection]:
    engine = sa.create_engine(normalise_postgres_url(url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


@contextmanager
def wal_kept(conn: sa.Connection) -> Iterator[str]:
    """Keep every WAL segment from now on (temporary slot); yield the start LSN."""
    slot = f"oblivio_erasure_{uuid.uuid4().hex[:12]}"
    conn.execute(
        sa.text("SELECT pg_create_physical_replication_slot(:s, true, true)"), {"s": slot}
    )
    try:
        yield str(conn.exec_driver_sql("SELECT pg_current_wal_insert_lsn()").scalar_one())
    finally:
        conn.execute(sa.text("SELECT pg_drop_replication_slot(:s)"), {"s": slot})


@pytest.mark.postgres
def test_postgres_files_and_wal_hold_nothing_of_a_forgotten_subject(
    pg_store_settings: Settings, postgres_url: str
) -> None:
    with superuser(postgres_url) as admin, wal_kept(admin) as start_lsn:
        files = ServerFiles(admin)
        client = MemoryClient(settings=pg_store_settings)
        try:
            user_id, needles = write_subject(client)
            stream_id = forget_and_certify(client, user_id)
            assert raw_rows(
                client, sa.select(data_keys).where(data_keys.c.stream_id == stream_id)
            ) == []
        finally:
            client.close()

        assert files.relation_hits(needles) == {}
        assert files.wal_hits(start_lsn, needles) == {}

        # Positive control: a planted plaintext is found by both scans.
        admin.exec_driver_sql("CREATE TABLE plaintext_control (t text)")
        admin.execute(sa.text("INSERT INTO plaintext_control VALUES (:t)"), {"t": user_id})
        assert user_id.encode() in files.relation_hits(needles).get("plaintext_control", [])
        wal = files.wal_hits(start_lsn, needles)
        assert any(user_id.encode() in hits for hits in wal.values())
