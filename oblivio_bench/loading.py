"""Scratch memory stores and test data for ``bench memory`` and ``bench erasure``.

Large stores are loaded through :func:`append_memories`: the calls of
``oblivio.memory.commands.store`` (lock the owner's stream, append the
``memory.stored`` event, apply it to the node graph with the stream's
cipher), made for a batch of events in one transaction instead of one
transaction per event.  What lands in the log and the graph is what
``store()`` writes; :func:`check_equivalent` proves that the event data is
the same on every run.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from eventstore import NewEvent, RecordedEvent, Subject
from oblivio.bootstrap import migrate, open_event_store
from oblivio.client import MemoryClient
from oblivio.memory import inputs
from oblivio.memory.context import MemoryContext
from oblivio.settings import Settings
from oblivio_bench.config import CITUS, WITH_CITUS, check_backend
from oblivio_bench.scratch import citus_databases, postgres_databases
from oblivio_bench.systems import BenchError
from projections import events as ev
from projections.embedders import Embedder
from projections.model import NodeType, Role, Scope, SourceType
from projections.scoring import ScoringConfig

#: Events per transaction when loading through :func:`append_memories`.
LOAD_BATCH = 500
#: How long to wait for loaded events to become deliverable to the projection runner.
VISIBILITY_TIMEOUT_SECONDS = 60.0
VOCABULARY_SIZE = 4_000
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "fe", "gu", "hi")


def _vocabulary(size: int) -> tuple[str, ...]:
    rng = random.Random(4711)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return tuple(sorted(words))


VOCABULARY = _vocabulary(VOCABULARY_SIZE)


def memory_text(rng: random.Random) -> str:
    """A memory of 16 to 24 words (about 140 characters), words drawn at random."""
    return " ".join(rng.choices(VOCABULARY, k=rng.randint(16, 24)))


def query_text(rng: random.Random) -> str:
    return " ".join(rng.choices(VOCABULARY, k=rng.randint(3, 6)))


def memory_texts(rng: random.Random, count: int) -> list[str]:
    return [memory_text(rng) for _ in range(count)]


# -- the command path, batched ----------------------------------------------------------


def stored_data(user_id: str, content: str) -> dict[str, Any]:
    """The data ``store(content, user_id=…)`` records, with every default."""
    return {
        "user_id": inputs.user(user_id),
        "content": inputs.content(content),
        "scope": Scope.PERSONAL.value,
        "role": Role.USER.value,
        "session_id": None,
        "source_type": SourceType.USER_STATED.value,
        "node_type": NodeType.FACT.value,
        "meta": inputs.meta(None),
    }


def stored_event(user_id: str, content: str) -> NewEvent:
    return NewEvent(ev.STORED, stored_data(user_id, content))


def append_memories(
    ctx: MemoryContext, user_id: str, contents: Sequence[str]
) -> list[RecordedEvent]:
    """Store ``contents`` for one subject in one transaction, as ``store()`` does one."""
    return append_events(ctx, user_id, [stored_event(user_id, content) for content in contents])


def append_events(
    ctx: MemoryContext, user_id: str, new_events: Sequence[NewEvent]
) -> list[RecordedEvent]:
    """Append memory.stored events of one subject in one transaction and apply them to
    the node graph, as ``store()`` does one."""
    with ctx.store.transaction() as tx:
        stream = tx.lock_stream(Subject(ctx.namespace, user_id), create=True)
        recorded = tx.append_locked(stream, new_events)
        cipher = tx.cipher(stream.ref.stream_id)
        if cipher is None:
            raise BenchError(f"the data key of {user_id!r} vanished while loading")
        for event in recorded:
            ctx.graph.apply(tx.connection, cipher, event)
    return recorded


def load_subject(
    ctx: MemoryContext, user_id: str, count: int, rng: random.Random, batch: int = LOAD_BATCH
) -> list[RecordedEvent]:
    """Give one subject ``count`` more memories, ``batch`` per transaction; their events."""
    recorded: list[RecordedEvent] = []
    for start in range(0, count, batch):
        texts = memory_texts(rng, min(batch, count - start))
        recorded += append_memories(ctx, user_id, texts)
    return recorded


def wait_until_visible(ctx: MemoryContext, expected: int) -> None:
    """Wait (untimed) until ``expected`` events are pending for the vector projection.

    On PostgreSQL the log delivers only events below the oldest open
    transaction on the server, so a transaction open elsewhere (another
    database included) holds events back; timing the runner then would
    measure the wait, or fewer events.  Gives up after a minute: the caller's
    count check then names the cause.
    """
    runner = ctx.runner
    deadline = time.monotonic() + VISIBILITY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        pending = sum(
            ctx.store.count_after(runner.checkpoint(p), partition=(p, runner.partitions))
            for p in range(runner.partitions)
        )
        if pending >= expected:
            return
        time.sleep(0.05)


def check_applied(applied: int, expected: int) -> None:
    """Fail unless the projection runner applied exactly the events loaded for it."""
    if applied != expected:
        raise BenchError(
            f"the projection runner applied {applied:,} events, expected {expected:,} (on "
            "PostgreSQL, a long transaction in the database holds the log's delivery "
            "horizon back)"
        )


def check_equivalent(stored: RecordedEvent, user_id: str) -> None:
    """Fail unless a ``store()`` event carries exactly what :func:`stored_data` builds."""
    data: Mapping[str, Any] = stored.data or {}
    expected = stored_data(user_id, data.get("content", "?"))
    if stored.type != ev.STORED or dict(data) != expected:
        raise BenchError(
            f"store() recorded {stored.type} {dict(data)!r}; the bench's equivalent "
            f"event would be {ev.STORED} {expected!r}: update oblivio_bench.loading"
        )


# -- scratch stores ---------------------------------------------------------------------


@contextmanager
def scratch_settings(
    backend: str, server_url: str, labels: Sequence[str]
) -> Iterator[dict[str, Settings]]:
    """Settings of one fresh, migrated store per label; everything removed at exit.

    Keyrings and issuer keys live in a temporary directory on every backend;
    on PostgreSQL each label also gets a scratch database of its own, on Citus one
    on a cluster started for the run.
    """
    check_backend(backend, WITH_CITUS)
    with tempfile.TemporaryDirectory(prefix="oblivio-bench-") as tmp, ExitStack() as stack:
        urls: dict[str, str] = {}
        if backend == "postgres":
            urls = stack.enter_context(postgres_databases(server_url, labels))
        elif backend == CITUS:
            urls = stack.enter_context(citus_databases(labels))
        settings = {
            label: Settings(
                data_dir=Path(tmp) / label,
                database_url=urls.get(label),
                keyring_path=Path(tmp) / f"{label}-keyring.json",  # scratch, beside the data
            )
            for label in labels
        }
        for each in settings.values():
            each.data_dir.mkdir(parents=True)
            migrate(each)
            open_event_store(each).close()
        yield settings


@contextmanager
def open_client(
    settings: Settings, embedder: Embedder | None = None, scoring: ScoringConfig | None = None
) -> Iterator[MemoryClient]:
    """A facade client on a scratch store (``None``: the default embedder and scoring)."""
    client = MemoryClient(settings=settings, embedder=embedder, scoring=scoring)
    try:
        yield client
    finally:
        client.close()
