"""The audit page's filters and paging read the audit index, never the whole
stream; a filtered export carries its gap records and verifies offline."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from eventstore import AuditEntry, schema
from eventstore.errors import InvalidInputError
from oblivio import MemoryClient
from oblivio.memory import compliance, oversight
from oblivio.memory.oversight import AuditFilters

SUBJECT_A = "a" * 64
SUBJECT_B = "b" * 64


def _write(client: MemoryClient, count: int, subject: str, action: str = "test.entry") -> None:
    store = client.context.store
    with store.transaction() as tx:
        for _ in range(count):
            tx.append_audit(AuditEntry(action, namespace="default", subject_ref=subject))


def test_a_page_is_the_newest_matching_entries_and_their_count(client: MemoryClient) -> None:
    _write(client, 30, SUBJECT_A)
    _write(client, 7, SUBJECT_B, "test.other")
    _write(client, 5, SUBJECT_A)
    ctx = client.context

    newest = oversight.audit_trail(ctx, per_page=10)
    assert newest.total == 42
    assert [line["version"] for line in newest.entries] == list(range(42, 32, -1))

    of_b = oversight.audit_trail(ctx, filters=AuditFilters(subject=SUBJECT_B), per_page=5)
    assert of_b.total == 7
    assert of_b.pages == 2
    assert {line["entry"]["subject_ref"] for line in of_b.entries} == {SUBJECT_B}
    assert [line["version"] for line in of_b.entries] == [37, 36, 35, 34, 33]
    second = oversight.audit_trail(ctx, filters=AuditFilters(subject=SUBJECT_B), page=2, per_page=5)
    assert [line["version"] for line in second.entries] == [32, 31]

    by_action = oversight.audit_trail(ctx, filters=AuditFilters(action="test.other"))
    assert by_action.total == 7
    later = ctx.clock() + timedelta(days=1)
    assert oversight.audit_trail(ctx, filters=AuditFilters(since=later)).total == 0
    assert not newest.checked
    assert newest.chain_problem is None
    assert oversight.audit_trail(ctx, check_chain=True).chain_problem is None


def test_the_actor_filter_takes_the_acting_key_id(client: MemoryClient) -> None:
    ctx = client.context
    actor = ctx.store.pseudonym("actor", "api-key:0123456789abcdef")
    with ctx.store.transaction() as tx:
        tx.append_audit(AuditEntry("test.entry", namespace="default", actor_ref=actor))
        tx.append_audit(AuditEntry("test.entry", namespace="default"))
    by_key = oversight.audit_trail(ctx, filters=AuditFilters(actor="0123456789abcdef"))
    by_ref = oversight.audit_trail(ctx, filters=AuditFilters(actor=actor))
    assert by_key.total == by_ref.total == 1


@pytest.mark.parametrize(
    "filters",
    [
        AuditFilters(action="Not An Action"),
        AuditFilters(subject="alice"),
        AuditFilters(actor="api-key:x"),
    ],
)
def test_malformed_filters_are_typed_errors(client: MemoryClient, filters: AuditFilters) -> None:
    with pytest.raises(InvalidInputError):
        oversight.audit_trail(client.context, filters=filters)


def test_entries_written_before_the_index_are_indexed_on_first_read(
    client: MemoryClient,
) -> None:
    _write(client, 12, SUBJECT_A)
    ctx = client.context
    with ctx.store.transaction() as tx:  # as a store upgraded from before the index
        tx.connection.execute(sa.delete(schema.audit_index))
    _write(client, 3, SUBJECT_B)
    trail = oversight.audit_trail(ctx, filters=AuditFilters(subject=SUBJECT_A), per_page=50)
    assert trail.total == 12
    with ctx.store.reading() as view:
        indexed = view.connection.execute(
            sa.select(sa.func.count()).select_from(schema.audit_index)
        )
        assert indexed.scalar_one() == 15


def test_a_filtered_export_verifies_offline_through_its_gaps(client: MemoryClient) -> None:
    _write(client, 4, SUBJECT_A)
    _write(client, 3, SUBJECT_B)
    _write(client, 2, SUBJECT_A)
    ctx = client.context
    text = compliance.export_audit(ctx, filters={"subject_ref": SUBJECT_A})
    manifest = compliance.verify_audit_export(text, client.jwks())
    assert manifest["count"] == 6
    assert manifest["filters"] == {"subject_ref": SUBJECT_A}
    assert len(manifest["gaps"]) == 3  # subject B's entries between A's, by their chain inputs

    lines = text.splitlines()
    dropped = "\n".join([*lines[:2], *lines[3:]]) + "\n"  # a line left out of the export
    with pytest.raises(compliance.ExportVerificationError):
        compliance.verify_audit_export(dropped, client.jwks())
