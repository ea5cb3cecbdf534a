"""Scanning what a database keeps on disk for strings that must not be there.

SQLite: every file of the data directory (database, ``-wal``, ``-shm``).
PostgreSQL: the files of every table, index and TOAST relation in ``public``
after a CHECKPOINT, and every WAL segment written since a start LSN, kept from
recycling by a temporary replication slot.  The tests that use these scanners
plant a plaintext control of their own, so a scanner that sees nothing fails.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa

from eventstore.backends.postgres import normalise_postgres_url

Hits = dict[str, list[bytes]]


def hits_in(blob: bytes, needles: Iterable[bytes]) -> list[bytes]:
    return [n for n in needles if n in blob]


def scan_files(paths: Iterable[Path], needles: list[bytes]) -> Hits:
    """For each file that contains any needle: which ones, by file name."""
    found = {}
    for path in paths:
        hits = hits_in(path.read_bytes(), needles)
        if hits:
            found[path.name] = hits
    return found


def files_below(directory: Path, *, skip: Iterable[str] = ()) -> list[Path]:
    """Every file below ``directory`` whose name contains none of ``skip``."""
    skipped = tuple(skip)
    return sorted(
        p for p in directory.rglob("*") if p.is_file() and not any(s in p.name for s in skipped)
    )


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
_WAL_SEGMENTS = sa.text(
    "SELECT name FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$' "
    "AND name BETWEEN pg_walfile_name(CAST(:start AS pg_lsn)) AND :last ORDER BY name"
)


@contextmanager
def superuser(url: str) -> Iterator[sa.Connection]:
    """An autocommit connection to the server of ``url`` (CHECKPOINT, slots, files)."""
    engine = sa.create_engine(normalise_postgres_url(url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


@contextmanager
def wal_kept(conn: sa.Connection) -> Iterator[str]:
    """Keep every WAL segment from now on, for the life of ``conn``; yield the start LSN.

    A temporary physical replication slot stops checkpoints from recycling the
    segments under scan, and disappears with the session even if the test dies.
    """
    slot = f"oblivio_at_rest_{uuid.uuid4().hex[:12]}"
    conn.execute(sa.text("SELECT pg_create_physical_replication_slot(:s, true, true)"), {"s": slot})
    try:
        yield str(conn.exec_driver_sql("SELECT pg_current_wal_insert_lsn()").scalar_one())
    finally:
        conn.execute(sa.text("SELECT pg_drop_replication_slot(:s)"), {"s": slot})


class ServerFiles:
    """Reads PostgreSQL's files: straight from the data directory when this process can
    (a local server), else through ``pg_read_binary_file`` (a container, another user)."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.root = Path(str(conn.exec_driver_sql("SHOW data_directory").scalar_one()))

    def read(self, relative: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        if self.root.is_dir():
            try:
                return (self.root / relative).read_bytes()
            except FileNotFoundError:
                return None
            except PermissionError:
                pass
        blob = self.conn.execute(
            sa.text("SELECT pg_read_binary_file(:p, 0, 1 << 30, true)"), {"p": relative}
        ).scalar_one()
        return None if blob is None else bytes(blob)

    def relation_files(self) -> dict[str, dict[str, bytes]]:
        """CHECKPOINT, then every segment and fork of every relation in public, by name."""
        self.conn.exec_driver_sql("CHECKPOINT")
        files: dict[str, dict[str, bytes]] = {}
        for name, path in self.conn.execute(_RELATIONS).all():
            forks = [path, f"{path}_fsm", f"{path}_vm", f"{path}_init"]
            for candidate in [*forks, *(f"{path}.{i}" for i in range(1, 4))]:
                blob = self.read(candidate)
                if blob is not None:
                    files.setdefault(name, {})[candidate] = blob
        return files

    def relation_hits(self, needles: list[bytes]) -> Hits:
        found: Hits = {}
        files = self.relation_files()
        assert any(any(blobs.values()) for blobs in files.values()), "no relation file was read"
        for name, blobs in files.items():
            hits = {n for blob in blobs.values() for n in hits_in(blob, needles)}
            if hits:
                found[name] = sorted(hits)
        return found

    def wal_hits(self, start_lsn: str, needles: list[bytes]) -> Hits:
        """Scan every WAL segment from the one holding ``start_lsn`` to the current one."""
        last = self.conn.exec_driver_sql(
            "SELECT pg_walfile_name(pg_current_wal_insert_lsn())"
        ).scalar_one()
        names = self.conn.execute(_WAL_SEGMENTS, {"start": start_lsn, "last": last}).scalars()
        segments = list(names)
        assert segments, "no WAL segment found"
        assert segments[-1] == last, "the current WAL segment was not found"
        found = {}
        for name in segments:
            blob = self.read(f"pg_wal/{name}")
            assert blob is not None, name
            hits = hits_in(blob, needles)
            if hits:
                found[name] = hits
        return found
