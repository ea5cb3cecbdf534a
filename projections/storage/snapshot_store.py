"""SQL of verified snapshots, erased parts and proofs (see ``projection_snapshots`` in
projections.storage.tables, and projections.proofs for what they prove)."""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore import SubjectCipher
from projections.storage.tables import erased_parts, projection_proofs, projection_snapshots

#: Buckets a snapshot's items are spread over by anchor: a proof reads and rewrites
#: the buckets its part reaches (a few), and the header names every bucket's digest.
BUCKETS = 256
#: The bucket number of a snapshot's header row.
HEADER_BUCKET = -1
_HEADER = HEADER_BUCKET
_ANCHOR, _DIGEST = 16, 32

#: An item of derived state: the id that places it in a part, and its digest.
Anchored = tuple[uuid.UUID, str]
#: An erased part as recorded: its events and nodes, or None for a whole rebuild.
RecordedPart = tuple[frozenset[uuid.UUID], frozenset[uuid.UUID]] | None


def bucket_of(anchor: uuid.UUID) -> int:
    return zlib.crc32(anchor.bytes) % BUCKETS


@dataclass(frozen=True)
class SnapshotHeader:
    """Where a snapshot stands: the replay it came from, and its buckets' digests."""

    #: The projection version and the basis (embedder, extractor) it was replayed with.
    version: int
    basis: str
    #: The stream version the replay had applied, and the last erased part it covers.
    stream_version: int
    part_seq: int
    buckets: Mapping[int, str]


def _pack(items: Iterable[Anchored]) -> bytes:
    return b"".join(anchor.bytes + bytes.fromhex(digest) for anchor, digest in items)


def _unpack(blob: bytes) -> list[Anchored]:
    step = _ANCHOR + _DIGEST
    return [
        (uuid.UUID(bytes=blob[i : i + _ANCHOR]), blob[i + _ANCHOR : i + step].hex())
        for i in range(0, len(blob), step)
    ]


class SnapshotStore:
    """Reads and writes one stream's snapshots and erased parts, sealed under its key."""

    def __init__(self, conn: Connection, cipher: SubjectCipher) -> None:
        self.conn = conn
        self.cipher = cipher
        self.stream_id = cipher.stream_id

    # -- snapshots -------------------------------------------------------------

    def header(self, projection: str) -> SnapshotHeader | None:
        row = self._rows(projection, [_HEADER]).get(_HEADER)
        if row is None:
            return None
        raw = json.loads(row)
        raw["buckets"] = {int(b): d for b, d in raw["buckets"].items()}
        return SnapshotHeader(**raw)

    def items(self, projection: str, buckets: Collection[int]) -> dict[int, list[Anchored]]:
        """The items of these buckets (an empty list for a bucket without any)."""
        found = self._rows(projection, sorted(buckets))
        return {b: _unpack(found[b]) if b in found else [] for b in buckets}

    def write(
        self,
        projection: str,
        header: SnapshotHeader,
        buckets: Mapping[int, list[Anchored]],
        *,
        replace: bool,
    ) -> None:
        """Store ``buckets`` (all of them when ``replace``: the others are deleted) and
        the header; a bucket left without items has no row."""
        table = projection_snapshots
        mine = sa.and_(table.c.stream_id == self.stream_id, table.c.projection == projection)
        touched = [_HEADER, *buckets] if not replace else None
        delete = table.delete().where(mine)
        if touched is not None:
            delete = delete.where(table.c.bucket.in_(touched))
        self.conn.execute(delete)
        plain = {
            "version": header.version,
            "basis": header.basis,
            "stream_version": header.stream_version,
            "part_seq": header.part_seq,
            "buckets": {str(b): d for b, d in sorted(header.buckets.items())},
        }
        header_row = self._row(projection, _HEADER, json.dumps(plain, separators=(",", ":")))
        self.conn.execute(
            table.insert(),
            [
                header_row | {"stream_version": header.stream_version},
                *(
                    self._row(projection, b, _pack(items)) | {"stream_version": None}
                    for b, items in sorted(buckets.items())
                    if items
                ),
            ],
        )

    def _row(self, projection: str, bucket: int, blob: bytes | str) -> dict[str, Any]:
        plain = blob.encode() if isinstance(blob, str) else blob
        return {
            "stream_id": self.stream_id,
            "projection": projection,
            "bucket": bucket,
            "sealed": self.cipher.seal("snapshot", _row_id(projection, bucket), plain),
        }

    def drop_items(self, anchors: Collection[uuid.UUID]) -> None:
        """Take the items anchored in ``anchors`` out of every snapshot of the stream.

        An erasure calls it with the part it re-derived, in its own transaction,
        so no snapshot holds an item of erased content once the erasure returns.
        The headers stay as they are: they name the replay the snapshot came
        from, and the proof that follows re-digests every bucket the part
        reaches (``projections.proofs.prove_part``) from the items left here
        and its own replay.
        """
        touched = sorted({bucket_of(a) for a in anchors})
        if not touched:
            return
        table = projection_snapshots
        query = sa.select(table.c.projection, table.c.bucket, table.c.sealed).where(
            table.c.stream_id == self.stream_id, table.c.bucket.in_(touched)
        )
        dropped = set(anchors)
        for projection, bucket, sealed in list(self.conn.execute(query)):
            items = _unpack(self.cipher.open("snapshot", _row_id(projection, bucket), sealed))
            kept = [item for item in items if item[0] not in dropped]
            if len(kept) == len(items):
                continue
            row = sa.and_(
                table.c.stream_id == self.stream_id,
                table.c.projection == projection,
                table.c.bucket == bucket,
            )
            if kept:
                sealed_kept = self._row(projection, bucket, _pack(kept))["sealed"]
                self.conn.execute(table.update().where(row).values(sealed=sealed_kept))
            else:
                self.conn.execute(table.delete().where(row))

    def drop_all(self) -> None:
        """Every snapshot of the stream (an erasure that rebuilt it whole: the next proof
        replays it whole and takes a new one)."""
        table = projection_snapshots
        self.conn.execute(table.delete().where(table.c.stream_id == self.stream_id))

    def _rows(self, projection: str, buckets: list[int]) -> dict[int, bytes]:
        table = projection_snapshots
        query = sa.select(table.c.bucket, table.c.sealed).where(
            table.c.stream_id == self.stream_id,
            table.c.projection == projection,
            table.c.bucket.in_(buckets),
        )
        return {
            b: self.cipher.open("snapshot", _row_id(projection, b), sealed)
            for b, sealed in self.conn.execute(query)
        }

    # -- erased parts ----------------------------------------------------------

    def add_part(self, events: Collection[uuid.UUID] | None, nodes: Collection[uuid.UUID]) -> None:
        """Record what an erasure changed; ``events=None``: it rebuilt the whole stream.

        What the erasure changed leaves the snapshots with it (``drop_items``,
        ``drop_all``): a snapshot never holds erased content."""
        seq = self.last_seq() + 1
        sealed = None
        if events is None:
            self.drop_all()
        else:
            self.drop_items({*events, *nodes})
            plain = {"events": sorted(map(str, events)), "nodes": sorted(map(str, nodes))}
            text = json.dumps(plain, separators=(",", ":")).encode()
            sealed = self.cipher.seal("erased-part", seq.to_bytes(8, "big"), text)
        self.conn.execute(
            erased_parts.insert().values(
                stream_id=self.stream_id, seq=seq, whole=events is None, sealed=sealed
            )
        )

    def parts_after(self, seq: int) -> tuple[int, list[RecordedPart]]:
        """The last part's number, and each part recorded after ``seq`` as (events,
        nodes), or None for an erasure that rebuilt the whole stream."""
        query = (
            sa.select(erased_parts)
            .where(erased_parts.c.stream_id == self.stream_id, erased_parts.c.seq > seq)
            .order_by(erased_parts.c.seq)
        )
        last, parts = seq, list[RecordedPart]()
        for row in self.conn.execute(query):
            last = row.seq
            if row.whole:
                parts.append(None)
                continue
            plain = json.loads(
                self.cipher.open("erased-part", row.seq.to_bytes(8, "big"), row.sealed)
            )
            parts.append(
                (
                    frozenset(map(uuid.UUID, plain["events"])),
                    frozenset(map(uuid.UUID, plain["nodes"])),
                )
            )
        return last, parts

    def last_seq(self) -> int:
        """The number of the stream's last erased part (0: none yet)."""
        last = self.conn.execute(
            sa.select(sa.func.max(erased_parts.c.seq)).where(
                erased_parts.c.stream_id == self.stream_id
            )
        ).scalar()
        return int(last or 0)


def purge_stream(conn: Connection, stream_id: int) -> None:
    """A forgotten stream's snapshots and parts (its key is destroyed with them)."""
    for table in (projection_snapshots, erased_parts):
        conn.execute(table.delete().where(table.c.stream_id == stream_id))


def _row_id(projection: str, bucket: int) -> bytes:
    return f"{projection}/{bucket}".encode()


# -- proofs -------------------------------------------------------------------


def save_proof(
    conn: Connection, stream_id: int, job_id: uuid.UUID, proof: Mapping[str, Any]
) -> None:
    conn.execute(
        projection_proofs.delete().where(
            projection_proofs.c.stream_id == stream_id, projection_proofs.c.job_id == job_id
        )
    )
    conn.execute(
        projection_proofs.insert().values(
            stream_id=stream_id, job_id=job_id, proof=json.dumps(proof, sort_keys=True)
        )
    )


def take_proof(conn: Connection, stream_id: int, job_id: uuid.UUID) -> dict[str, Any] | None:
    """A job's proof, deleted as it is read: the certificate that states it is its record."""
    mine = sa.and_(projection_proofs.c.stream_id == stream_id, projection_proofs.c.job_id == job_id)
    text = conn.execute(sa.select(projection_proofs.c.proof).where(mine)).scalar()
    if text is None:
        return None
    conn.execute(projection_proofs.delete().where(mine))
    return dict(json.loads(text))
