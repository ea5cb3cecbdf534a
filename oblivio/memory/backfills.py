"""Rebuilding the node graph of streams an upgrade marked, lazily or all at once.

Some migrations add state that only the encrypted log holds (pj0008: which
event touched which node, and the item rows; pj0010: effective times;
pj0012: the items' effective order).  SQL cannot derive it, so they mark
every affected stream in ``memory_graph_backfills``, and the stream's graph is
rebuilt from the log under its lock: on its first item operation, its next
``delete_event`` (see projections.graph), or for every marked stream at once
with :func:`backfill_marked` (``oblivio rebuild graphs``).  A rebuild purges
the stream's graph, which drops its mark, so each stream is rebuilt once.
"""

from __future__ import annotations

from collections.abc import Callable

from eventstore import SubjectCipher, Transaction
from oblivio.memory.context import MemoryContext
from projections.base import replay
from projections.reads import GraphReads

#: Streams read per page of marks (each one is rebuilt in a transaction of its own).
PAGE = 100


def backfill_locked(ctx: MemoryContext, tx: Transaction, cipher: SubjectCipher) -> bool:
    """Rebuild the stream's graph from the log if it is marked, under the stream's lock
    (which ``tx`` holds), as a replay would; whether it was marked."""
    if not ctx.graph.needs_rebuild(tx.connection, cipher.stream_id):
        return False
    replay(tx, [ctx.graph], cipher.stream_id)
    return True


def marked_count(ctx: MemoryContext) -> int:
    """How many streams wait for a rebuild of their graph."""
    with ctx.store.reading() as view:
        return GraphReads(view).count_marked()


def backfill_marked(ctx: MemoryContext, done: Callable[[int], None] = lambda _: None) -> int:
    """Rebuild every marked stream's graph, one transaction per stream; the number
    rebuilt.  ``done`` is called with the stream id after each one.

    Resumable and idempotent: a rebuilt stream is no longer marked, so a second run
    (or one after an interruption) rebuilds only what is still marked.  Writers of
    a stream wait for its lock meanwhile; other streams are not held up.  A stream
    forgotten since it was marked has no graph to rebuild: its mark is skipped.
    """
    rebuilt, after = 0, 0
    while True:
        with ctx.store.reading() as view:
            page = GraphReads(view).marked_streams(after, PAGE)
        if not page:
            return rebuilt
        for stream_id in page:
            with ctx.store.transaction() as tx:
                stream = tx.lock_stream(stream_id)
                if stream is not None and stream.closed_at is None:
                    rebuilt += int(backfill_locked(ctx, tx, tx.locked_cipher(stream)))
            done(stream_id)
        after = page[-1]
