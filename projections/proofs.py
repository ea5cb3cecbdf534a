"""Certified deletes whose proof costs what they change.

A rebuild job proves that a projection's live rows equal a replay of what
remains of the log.  Replaying the whole stream costs what the person holds; a
proof here costs what changed since the last proof:

* A **snapshot** is the item digests (``Projection.anchored_digests``) of a
  *replay* of the stream, never of live rows: the first proof of a stream
  replays it whole and keeps the result (``take_snapshot``); every later proof
  derives the next snapshot from the previous one and its own replay.  It
  names the stream version it covers, is sealed under the subject's key, and is
  deleted (and its key destroyed) by ``forget``.
* Every erasure records the closed **part** it re-derived
  (``projections.parts``); events appended since the snapshot add theirs.
  ``prove_part`` takes the part reached from both, digests its live items,
  replays only the part's remaining events in place, and digests them again.
  Equal digests show the live part equals its replay; outside the part no
  event was added or erased since the snapshot, so its items are the snapshot's
  (a replay's) and the erasure wrote none of them.  The next snapshot is the
  previous one without the part's items, plus the replayed part.

A projection that cannot bound its replay to a part (``replay_part`` answers
False), a snapshot of another projection version or basis, or an erasure that
rebuilt the stream, sends the proof back to a whole replay, which takes a new
snapshot.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from projections.base import Anchored, Projection, StreamSource, compose_digests, replay
from projections.parts import reach
from projections.storage.snapshot_store import SnapshotHeader, SnapshotStore, bucket_of


@dataclass(frozen=True)
class Proof:
    """A proof's two digests and what the certificate states about how they were taken."""

    state_digest: str
    replay_digest: str
    details: dict[str, Any]


def snapshot_digest(header: SnapshotHeader) -> str:
    """A snapshot's digest: composed over its buckets' digests, so a proof that
    rewrites a few buckets computes it without reading the others."""
    return compose_digests(f"{b}:{d}" for b, d in header.buckets.items())


def _position(header: SnapshotHeader) -> dict[str, Any]:
    return {"stream_version": header.stream_version, "digest": snapshot_digest(header)}


def _by_bucket(items: Iterable[Anchored]) -> dict[int, list[Anchored]]:
    buckets: dict[int, list[Anchored]] = defaultdict(list)
    for item in items:
        buckets[bucket_of(item[0])].append(item)
    return buckets


def _digests(buckets: dict[int, list[Anchored]]) -> dict[int, str]:
    return {b: compose_digests(d for _, d in items) for b, items in buckets.items() if items}


def take_snapshot(
    source: StreamSource,
    projection: Projection,
    stream_id: int,
    stream_version: int,
    replayed: list[Anchored],
) -> dict[str, Any]:
    """Keep ``replayed`` (the item digests of a replay of the whole stream at
    ``stream_version``) as the stream's snapshot; what the certificate says of it."""
    cipher = source.cipher(stream_id)
    if cipher is None:  # forgotten: nothing was replayed, nothing is kept or said
        return {}
    conn = source.connection
    snapshots = SnapshotStore(conn, cipher)
    buckets = _by_bucket(replayed)
    header = SnapshotHeader(
        version=projection.version,
        basis=projection.snapshot_basis(conn, stream_id),
        stream_version=stream_version,
        part_seq=snapshots.last_seq(),
        buckets=_digests(buckets),
    )
    snapshots.write(projection.name, header, buckets, replace=True)
    return {"replayed": "stream", "snapshot": _position(header)}


def prove_part(
    source: StreamSource, projection: Projection, stream_id: int, stream_version: int
) -> Proof | None:
    """Prove the part changed since the stream's snapshot, and move the snapshot to
    ``stream_version``; None when only a whole replay can prove it (see above)."""
    cipher = source.cipher(stream_id)
    if cipher is None:
        return None
    conn = source.connection
    snapshots = SnapshotStore(conn, cipher)
    header = snapshots.header(projection.name)
    if (
        header is None
        or header.version != projection.version
        or header.basis != projection.snapshot_basis(conn, stream_id)
    ):
        return None
    last_seq, parts = snapshots.parts_after(header.part_seq)
    seed_events = {e.event_id for e in source.read_stream_id(stream_id, header.stream_version)}
    seed_nodes: set[Any] = set()
    for found in parts:
        if found is None:  # an erasure rebuilt the stream: no part to bound it
            return None
        seed_events |= found[0]
        seed_nodes |= found[1]
    part = reach(conn, stream_id, seed_events, seed_nodes)
    live = projection.anchored_digests(source, stream_id, part)
    savepoint = conn.begin_nested()
    if not projection.replay_part(source, stream_id, part):
        savepoint.rollback()
        return None
    savepoint.commit()
    replayed = projection.anchored_digests(source, stream_id, part)

    anchors = part.anchors
    touched = {bucket_of(a) for a in anchors}
    kept = snapshots.items(projection.name, touched)
    buckets = {b: [item for item in items if item[0] not in anchors] for b, items in kept.items()}
    for b, items in _by_bucket(replayed).items():
        buckets.setdefault(b, []).extend(items)
    digests = {b: d for b, d in header.buckets.items() if b not in buckets} | _digests(buckets)
    after = SnapshotHeader(
        header.version, header.basis, stream_version, last_seq, dict(sorted(digests.items()))
    )
    snapshots.write(projection.name, after, buckets, replace=False)
    details = {
        "replayed": "part",
        "from_snapshot": _position(header),
        "part": {"events": len(part.events), "nodes": len(part.nodes), "items": len(replayed)},
        "snapshot": _position(after),
    }
    return Proof(
        compose_digests(d for _, d in live), compose_digests(d for _, d in replayed), details
    )


def build_snapshot(
    source: StreamSource, projection: Projection, stream_id: int, stream_version: int
) -> dict[str, Any]:
    """Bring the stream's snapshot to ``stream_version`` from a replay, live rows left as
    they are; what was done (``{}``: the subject is forgotten).

    From the snapshot there is, a part proof (``prove_part``, in a savepoint)
    replays what was written since; without one, or where a part cannot bound
    it, the stream is replayed whole in a savepoint and its items kept.  Either
    way the replay is compared with the live rows first: a snapshot stands for
    them in later proofs, so one that differs raises ``SnapshotMismatchError``
    and nothing is kept (the next certified delete replays the stream whole and
    certifies what it finds).
    """
    if source.cipher(stream_id) is None:
        return {}
    savepoint = source.connection.begin_nested()
    proof = prove_part(source, projection, stream_id, stream_version)
    if proof is not None:
        if proof.state_digest != proof.replay_digest:
            savepoint.rollback()
            raise SnapshotMismatchError(projection.name, "part")
        savepoint.commit()
        return proof.details
    savepoint.rollback()
    return _snapshot_from_whole_replay(source, projection, stream_id, stream_version)


def _snapshot_from_whole_replay(
    source: StreamSource, projection: Projection, stream_id: int, stream_version: int
) -> dict[str, Any]:
    live = compose_digests(d for _, d in projection.anchored_digests(source, stream_id))
    replayed = _replayed_items(source, projection, stream_id)
    if compose_digests(d for _, d in replayed) != live:
        raise SnapshotMismatchError(projection.name, "stream")
    return take_snapshot(source, projection, stream_id, stream_version, replayed)


class SnapshotMismatchError(RuntimeError):
    """A replay differs from the live rows: no snapshot is built from it."""

    def __init__(self, projection: str, replayed: str) -> None:
        super().__init__(f"{projection}: the live rows differ from a replay of the {replayed}")


def replayed_snapshot_digest(source: StreamSource, projection: Projection, stream_id: int) -> str:
    """The digest a snapshot of a fresh replay of the whole stream has now, live rows left
    untouched (a savepoint): what a certified part's resulting snapshot must equal."""
    buckets = _digests(_by_bucket(_replayed_items(source, projection, stream_id)))
    return compose_digests(f"{b}:{d}" for b, d in buckets.items())


def _replayed_items(source: StreamSource, projection: Projection, stream_id: int) -> list[Anchored]:
    """The projection's items as a replay of the whole stream derives them, in a
    savepoint rolled back after: the live rows stay as they were."""
    savepoint = source.connection.begin_nested()
    try:
        replay(source, [projection], stream_id)
        return projection.anchored_digests(source, stream_id)
    finally:
        savepoint.rollback()
