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
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy as sa

from eventstore.schema import data_keys, events
from oblivio import MemoryClient
from oblivio.settings import Settings
from projections.storage.tables import retrieval_images
from tests._at_rest import ServerFiles, files_below, scan_files, superuser, wal_kept
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
    """A subject with small and large memories and the image of its retrieval index (the
    client images every subject); its user id and every needle to look for."""
    user_id = marker("subject-zebra")
    seeded = seed_subject(client, user_id)
    large = marker("large")
    client.store(f"{large} " * LARGE_REPEAT, user_id=user_id, meta={"note": marker("meta")})
    assert client.retrieve(large, user_id=user_id).results
    client.context.retrieval.save_images()
    assert image_heads(client, stream_id_of(client, user_id)), "no image: the scan would miss it"
    texts = [user_id, large, *seeded.secrets]
    tokens = [t.rsplit("-", 1)[1] for t in texts]  # the random part alone, too
    return user_id, [t.encode() for t in texts + tokens]


def image_heads(client: MemoryClient, stream_id: int) -> list[bytes]:
    """The first bytes of each sealed chunk of the stream's retrieval index image."""
    query = sa.select(retrieval_images.c.sealed).where(retrieval_images.c.stream_id == stream_id)
    return [row.sealed[:48] for row in raw_rows(client, query)]


def imaging(settings: Settings) -> Settings:
    return settings.model_copy(update={"retrieval_image_nodes": 1})


def forget_and_certify(client: MemoryClient, user_id: str) -> int:
    stream_id = stream_id_of(client, user_id)
    assert len(data_key_rows(client, stream_id)) == 1
    completed(client.forget(user_id, wait=True))
    assert data_key_rows(client, stream_id) == []
    return stream_id


# -- SQLite ------------------------------------------------------------------------------


def sqlite_files(directory: Path) -> list[Path]:
    return files_below(directory, skip=("keyring", "issuer-keys"))


def test_sqlite_file_and_wal_hold_nothing_of_a_forgotten_subject(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    client = MemoryClient(
        settings=imaging(Settings(data_dir=data_dir, keyring_path=tmp_path / "k.json"))
    )
    try:
        user_id, needles = write_subject(client)
        stream_id = stream_id_of(client, user_id)
        [dek] = data_key_rows(client, stream_id)
        ciphertexts = (
            [  # their heads: a large one continues on overflow pages
                row.payload[:48]
                for row in raw_rows(
                    client, sa.select(events.c.payload).where(events.c.stream_id == stream_id)
                )
            ]
            + image_heads(client, stream_id)
        )
        database = Path(str(client.context.store.backend.engine.url.database))
        wal = database.with_name(database.name + "-wal")
        # Control: before the forget, the wrapped key and the ciphertext are on disk.
        on_disk = b"".join(p.read_bytes() for p in sqlite_files(data_dir))
        assert dek.wrapped_key in on_disk
        assert all(c in on_disk for c in ciphertexts)

        forget_and_certify(client, user_id)

        assert wal.stat().st_size > 0  # the scan below covers uncheckpointed frames too
        assert scan_files(sqlite_files(data_dir), needles) == {}
    finally:
        client.close()  # the last connection checkpoints the WAL into the file
    assert scan_files(sqlite_files(data_dir), needles) == {}
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
        assert user_id.encode() in scan_files([wal], needles).get(wal.name, [])
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert user_id.encode() in scan_files([database], needles).get(database.name, [])


# -- PostgreSQL ----------------------------------------------------------------------------


@pytest.mark.postgres
def test_postgres_files_and_wal_hold_nothing_of_a_forgotten_subject(
    pg_store_settings: Settings, postgres_url: str
) -> None:
    with superuser(postgres_url) as admin, wal_kept(admin) as start_lsn:
        files = ServerFiles(admin)
        client = MemoryClient(settings=imaging(pg_store_settings))
        try:
            user_id, needles = write_subject(client)
            stream_id = forget_and_certify(client, user_id)
            assert (
                raw_rows(client, sa.select(data_keys).where(data_keys.c.stream_id == stream_id))
                == []
            )
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
