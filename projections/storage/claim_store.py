"""SQL of structured claims (see ``memory_claims`` in projections.storage.tables)."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from projections.storage.tables import claims

ClaimRow = sa.Row[Any]

# Built once: the extraction worker runs it for most messages.  Claim rows
# are inserted with their nodes (GraphStore.add_derived).
_open_candidates = (
    sa.select(claims)
    .where(
        claims.c.stream_id == sa.bindparam("stream_id"),
        claims.c.match_key.in_(sa.bindparam("match_keys", expanding=True)),
        claims.c.valid_to.is_(None),
    )
    .order_by(claims.c.valid_from, claims.c.node_id)
)

#: What a correction that looked for targets did (``memory_claims.correction``):
#: a claim stored later that it would have matched had come too late to be one.
_LOOKED_FOR_TARGETS = ("retired", "ambiguous", "no_match")
_later_corrections = (
    sa.select(claims)
    .where(
        claims.c.stream_id == sa.bindparam("stream_id"),
        claims.c.valid_from > sa.bindparam("after"),
        claims.c.correction.in_(_LOOKED_FOR_TARGETS),
    )
    .order_by(claims.c.valid_from, claims.c.node_id)
)


class ClaimStore:
    """Reads and writes the claim rows on one connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def open_candidates(self, stream_id: int, match_keys: Collection[bytes]) -> list[ClaimRow]:
        """Claims of the stream under any of ``match_keys`` whose interval is still open."""
        params = {"stream_id": stream_id, "match_keys": list(match_keys)}
        return list(self.conn.execute(_open_candidates, params))

    def later_corrections(self, stream_id: int, after: datetime) -> list[ClaimRow]:
        """Corrections of the stream effective after ``after`` that looked for targets,
        earliest first: the ones a back-dated claim may have been too late for."""
        return list(self.conn.execute(_later_corrections, {"stream_id": stream_id, "after": after}))

    def close_interval(self, stream_id: int, node_id: uuid.UUID, valid_to: datetime) -> None:
        self.conn.execute(
            claims.update()
            .where(claims.c.stream_id == stream_id, claims.c.node_id == node_id)
            .values(valid_to=valid_to)
        )

    def claim(self, stream_id: int, node_id: uuid.UUID) -> ClaimRow | None:
        query = sa.select(claims).where(
            claims.c.stream_id == stream_id, claims.c.node_id == node_id
        )
        return self.conn.execute(query).first()

    def stream_claims(
        self, stream_id: int, node_ids: Collection[uuid.UUID] | None = None
    ) -> list[ClaimRow]:
        """The stream's claim rows (of these nodes only, if given)."""
        query = sa.select(claims).where(claims.c.stream_id == stream_id).order_by(claims.c.node_id)
        if node_ids is not None:
            query = query.where(claims.c.node_id.in_(list(node_ids)))
        return list(self.conn.execute(query))

    def purge_stream(self, stream_id: int) -> None:
        self.conn.execute(claims.delete().where(claims.c.stream_id == stream_id))

    def purge_nodes(self, stream_id: int, node_ids: Collection[uuid.UUID]) -> None:
        """The claim rows of these nodes (the nodes delete_event re-derives)."""
        self.conn.execute(
            claims.delete().where(claims.c.stream_id == stream_id, claims.c.node_id.in_(node_ids))
        )
