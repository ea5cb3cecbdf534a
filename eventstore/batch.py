"""A batch of new events on its way into one stream: validated, sealed, chained.

Pure computation, no SQL: a :class:`~eventstore.transaction.Transaction`
that holds the stream's lock seals the batch at the stream's head and hands
it to the backend's one append as a :class:`SealedBatch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from eventstore import crypto
from eventstore.codec import EncodedEvent, EventCodec, parse_content
from eventstore.errors import InvalidInputError
from eventstore.model import ANY, ExpectedVersion, NewEvent, RecordedEvent, StreamRef
from eventstore.reader import recorded_event

if TYPE_CHECKING:
    import sqlalchemy as sa


def encode_batch(
    codec: EventCodec, new_events: Sequence[NewEvent], expected_version: ExpectedVersion
) -> list[EncodedEvent]:
    """Validate a batch before anything is written; raises :class:`InvalidInputError`."""
    if not new_events:
        raise InvalidInputError("nothing to append")
    if expected_version is not ANY and (
        not isinstance(expected_version, int) or expected_version < 0
    ):
        raise InvalidInputError("expected_version must be a non-negative integer or ANY")
    encoded = codec.encode_all(new_events)
    if len({e.event_id for e in encoded}) != len(encoded):
        raise InvalidInputError("a batch must not contain the same event id twice")
    return encoded


class SealedBatch(NamedTuple):
    """Encrypted, chained rows for versions ``old_version + 1 …`` of one stream.

    The backend writes them only if the stream head is still at
    ``old_version`` (and the stream open with its key alive), moving the head
    to the last row in the same step.  A named tuple (immutable, and cheaper
    to build than a frozen dataclass: one is made per append).
    """

    stream: StreamRef
    old_version: int
    recorded_at: datetime
    events: Sequence[EncodedEvent]
    ciphertexts: list[bytes]
    digests: list[bytes]
    chain_hashes: list[bytes]
    #: Written even if processing of the subject is restricted (GDPR Art. 18): the
    #: restriction's own events, or an operator acting on the restriction request.
    past_restriction: bool = False

    @property
    def new_version(self) -> int:
        return self.old_version + len(self.events)

    @property
    def chain_hash(self) -> bytes:
        return self.chain_hashes[-1]

    @property
    def versions(self) -> range:
        return range(self.old_version + 1, self.new_version + 1)


def seal_batch(
    codec: EventCodec,
    key: crypto.AeadKey,
    stream: StreamRef,
    head: tuple[int, bytes],
    encoded: Sequence[EncodedEvent],
    now: datetime,
    *,
    past_restriction: bool = False,
) -> SealedBatch:
    """Encrypt every event under the data ``key`` and extend the chain from ``head``
    (version, hash);
    ``past_restriction``: see :attr:`SealedBatch.past_restriction`."""
    old_version, chain = head
    ciphertexts = codec.seal_all(key, encoded, stream.stream_id, old_version + 1)
    micros = crypto.chain_micros(now)  # every event of the batch is recorded at ``now``
    digests, chains = [], []
    for version, event, ciphertext in zip(
        range(old_version + 1, old_version + 1 + len(encoded)), encoded, ciphertexts, strict=True
    ):
        digest = crypto.ciphertext_digest(ciphertext)
        chain = crypto.chain_link(
            chain, event.event_id, version, event.type, event.schema_version, micros, digest
        )
        digests.append(digest)
        chains.append(chain)
    return SealedBatch(
        stream, old_version, now, encoded, ciphertexts, digests, chains, past_restriction
    )


def event_rows(batch: SealedBatch, commit_group: int) -> list[dict[str, Any]]:
    """The batch's rows of the ``events`` table, in version order (positions left to the
    database)."""
    return [
        {
            "commit_group": commit_group,
            "event_id": event.event_id,
            "stream_id": batch.stream.stream_id,
            "version": version,
            "type": event.type,
            "schema_version": event.schema_version,
            "recorded_at": batch.recorded_at,
            "payload": batch.ciphertexts[i],
            "digest": batch.digests[i],
            "chain_hash": batch.chain_hashes[i],
        }
        for i, (event, version) in enumerate(zip(batch.events, batch.versions, strict=True))
    ]


class DerivedRows(NamedTuple):
    """Rows an append derives (the inline projection's), written by the append itself
    and only if its head moved: nothing of them is left behind by an append that
    found the head elsewhere.

    Every row has the same keys.  ``unless_present``: a row whose unique key exists
    already is skipped (the node directory's rule), not an error.
    """

    table: sa.Table
    rows: Sequence[dict[str, Any]]
    unless_present: bool = False


#: Where the backend put one row: ``(position, commit_group)``.
Placement = tuple[int, int]


def recorded_events(batch: SealedBatch, placements: Sequence[Placement]) -> list[RecordedEvent]:
    """The appended events as readers will see them, without reading them back.

    Each plaintext is parsed here, once: what the caller then derives from an
    appended event (the inline projection, the nodes it names) reads this.
    """
    recorded = []
    for i, (event, version) in enumerate(zip(batch.events, batch.versions, strict=True)):
        position, group = placements[i]
        data, metadata = parse_content(event.plaintext())
        recorded.append(
            recorded_event(
                event.event_id,
                batch.stream,
                version,
                position,
                group,
                event.type,
                event.schema_version,
                batch.recorded_at,
                data,
                metadata,
                batch.digests[i],
                batch.chain_hashes[i],
                None,
                None,
            )
        )
    return recorded
