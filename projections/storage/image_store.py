"""SQL of retrieval index images (``retrieval_images`` in projections.storage.tables;
projections.index_image says what they hold and when they may be used)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from projections.storage import Fetch
from projections.storage.tables import retrieval_images


@dataclass(frozen=True)
class StoredImage:
    """One stream's image as stored: the stream version it reflects and its sealed chunks."""

    stream_version: int
    image_id: uuid.UUID
    #: The sealed chunks in order; fewer than the image was cut into if rows are missing.
    chunks: list[bytes]
    expected_chunks: int

    @property
    def complete(self) -> bool:
        return len(self.chunks) == self.expected_chunks


_read = (
    sa.select(
        retrieval_images.c.chunk,
        retrieval_images.c.stream_version,
        retrieval_images.c.chunks,
        retrieval_images.c.image_id,
        retrieval_images.c.sealed,
    )
    .where(retrieval_images.c.stream_id == sa.bindparam("stream_id"))
    .order_by(retrieval_images.c.chunk)
)


def read(conn: Connection, stream_id: int, fetch: Fetch) -> StoredImage | None:
    """The stream's image in one statement, or ``None`` without one (through ``fetch``:
    on PostgreSQL psycopg's binary protocol, so 150 MB of chunks are not sent and parsed
    as hex text)."""
    rows = fetch(conn, _read, {"stream_id": stream_id})
    if not rows:
        return None
    _, version, chunks, image_id, _ = rows[0]
    return StoredImage(
        stream_version=version,
        image_id=image_id,
        chunks=[row[4] for row in rows if row[3] == image_id],
        expected_chunks=chunks,
    )


def replace(
    conn: Connection,
    stream_id: int,
    stream_version: int,
    image_id: uuid.UUID,
    sealed: Sequence[bytes],
) -> None:
    """Make ``sealed`` the stream's image (the previous one is deleted)."""
    purge_stream(conn, stream_id)
    conn.execute(
        retrieval_images.insert(),
        [
            {
                "stream_id": stream_id,
                "chunk": number,
                "stream_version": stream_version,
                "chunks": len(sealed),
                "image_id": image_id,
                "sealed": chunk,
            }
            for number, chunk in enumerate(sealed)
        ],
    )


def purge_stream(conn: Connection, stream_id: int) -> None:
    """Delete the stream's image (erasure, forget, or a newer image replacing it)."""
    conn.execute(retrieval_images.delete().where(retrieval_images.c.stream_id == stream_id))
