"""Helpers shared by the erasure tests: seeding subjects and reading raw state."""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa

import projections
from eventstore import START, RecordedEvent
from eventstore.schema import certificates, data_keys, erasure_requests, events, rebuild_jobs
from oblivio import MemoryClient
from projections.storage.tables import node_directory
from workers.erasure import ErasureStatus
from workers.policy import ErasurePolicy
from workers.rebuild import RebuildWorker

W = TypeVar("W", bound=RebuildWorker)

#: Bounded waits everywhere: no test may hang on a broken worker.
WAIT_SECONDS = 30.0


def marker(kind: str) -> str:
    """A distinctive string that cannot occur by chance."""
    return f"{kind}-{secrets.token_hex(10)}"


@dataclass(frozen=True)
class Seeded:
    """A subject with memories, a correction, a reinforcement, a trigger and an attractor."""

    user_id: str
    event_ids: list[uuid.UUID]  # the two stored memories, oldest first
    node_ids: list[uuid.UUID]  # their nodes; the first was superseded by the second
    secrets: list[str]  # every personal string written for this subject


def seed_subject(client: MemoryClient, user_id: str) -> Seeded:
    """store → store → supersede → reinforce, plus a resonance trigger and an attractor."""
    old_word, new_word = marker("zebra"), marker("paris")
    old_text = f"My cat is called {old_word}"
    new_text = f"I moved to the city of {new_word}"
    trigger_word, attractor_text = marker("trigger"), marker("attractor")
    e1 = client.store(old_text, user_id=user_id, session_id=marker("session"))
    e2 = client.store(new_text, user_id=user_id)
    [n1] = client.get_event_nodes(e1, user_id=user_id)
    [n2] = client.get_event_nodes(e2, user_id=user_id)
    client.supersede(n1.id, n2.id, evidence_id=e2, user_id=user_id)
    client.reinforce(n2.id, user_id=user_id)
    client.add_resonance_trigger(user_id=user_id, keyword=trigger_word, weight=2.0)
    client.add_negative_attractor(attractor_text, user_id=user_id, description="outdated")
    assert client.retrieve(new_word, user_id=user_id).results, "seeded memory not retrievable"
    return Seeded(
        user_id, [e1, e2], [n1.id, n2.id], [old_text, new_text, trigger_word, attractor_text]
    )


# -- raw reads ----------------------------------------------------------------------------


def engine(client: MemoryClient) -> sa.Engine:
    return client.context.store.backend.engine


def raw_rows(client: MemoryClient, query: sa.Select[Any]) -> list[sa.Row[Any]]:
    with engine(client).connect() as conn:
        return list(conn.execute(query))


def _read_all(client: MemoryClient) -> list[RecordedEvent]:
    store, cursor, found = client.context.store, START, []
    while True:
        page = store.read_all(cursor, 200)
        found.extend(page.events)
        if not page.events:
            return found
        cursor = page.next_cursor


def whole_log(client: MemoryClient) -> list[RecordedEvent]:
    """Every event of the log in global order, read page by page with ``read_all``.

    On PostgreSQL ``read_all`` shows an event only once no older transaction of the
    database is still running (see ``eventstore.backends.postgres``), and the store's own
    workers may hold one; so wait, boundedly, until it shows every row of the table.
    """
    with engine(client).connect() as conn:
        expected = conn.execute(sa.select(sa.func.count()).select_from(events)).scalar_one()
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        found = _read_all(client)
        if len(found) >= expected:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"read_all shows {len(found)} of {expected} events")
        time.sleep(0.05)


def log_state(client: MemoryClient) -> list[tuple[Any, ...]]:
    """The raw events table plus erasure bookkeeping: equal snapshots mean nothing changed."""
    rows = raw_rows(
        client,
        sa.select(
            events.c.event_id, events.c.payload, events.c.erased_at, events.c.erasure_request_id
        ).order_by(events.c.position),
    )
    requests = raw_rows(client, sa.select(erasure_requests.c.request_id))
    jobs = raw_rows(client, sa.select(rebuild_jobs.c.job_id))
    keys = raw_rows(client, sa.select(data_keys.c.dek_id, data_keys.c.wrapped_key))
    return [tuple(r) for r in rows] + [("requests", len(requests), len(jobs), len(keys))]


def certificate_rows(client: MemoryClient, request_id: uuid.UUID) -> list[sa.Row[Any]]:
    return raw_rows(client, sa.select(certificates).where(certificates.c.request_id == request_id))


def data_key_rows(client: MemoryClient, stream_id: int) -> list[sa.Row[Any]]:
    return raw_rows(client, sa.select(data_keys).where(data_keys.c.stream_id == stream_id))


def projection_rows(client: MemoryClient, stream_id: int) -> dict[str, int]:
    """Rows per projection table that belong to one stream; only non-zero counts.

    Not the node directory, whose content-free entries erasure leaves in place
    (tests/erasure/test_node_directory.py pins what they hold)."""
    counts = {}
    for table in projections.metadata.sorted_tables:
        if "stream_id" not in table.c or table is node_directory:
            continue
        query = sa.select(sa.func.count()).select_from(table).where(table.c.stream_id == stream_id)
        with engine(client).connect() as conn:
            count = conn.execute(query).scalar_one()
        if count:
            counts[table.name] = count
    return counts


def stream_id_of(client: MemoryClient, user_id: str) -> int:
    head = client.context.store.head(client.context.namespace, user_id)
    assert head is not None
    return head.stream.stream_id


def run_jobs(client: MemoryClient) -> int:
    """Run every runnable rebuild job now; how many."""
    return client.context.rebuilder.run_pending()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def completed(status: ErasureStatus) -> dict[str, Any]:
    """The certificate of a completed request (asserting that it completed)."""
    assert status.status == "completed", (status.status, status.jobs)
    assert status.certificate is not None
    return status.certificate


def audit_entries(client: MemoryClient) -> list[dict[str, Any]]:
    """The audit export's lines, without the manifest line."""
    return [json.loads(line) for line in client.export_audit().splitlines()[:-1]]


def assert_same_request(
    client: MemoryClient, first: ErasureStatus, answers: Iterable[ErasureStatus]
) -> None:
    """Each of ``answers`` (to asking again) is ``first``: its request and its certificate,
    of which there is still one."""
    certificate = completed(first)
    for answer in answers:
        assert answer.request_id == first.request_id
        assert answer.certificate_id == first.certificate_id
        assert answer.certificate == certificate
    assert len(certificate_rows(client, first.request_id)) == 1


def rebuild_worker(client: MemoryClient, policy: ErasurePolicy, cls: type[W], **options: Any) -> W:
    """A rebuild worker of class ``cls`` on the client's store, projections and clock."""
    ctx = client.context
    return cls(ctx.store, ctx.projections, ctx.certifier, policy, ctx.clock, **options)
