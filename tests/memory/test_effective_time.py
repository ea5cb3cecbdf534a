"""Two times on every memory: when it took effect (``occurred_at``) and when the log
recorded it.  Validity intervals and recency follow the first; the log's order and
retention sweeps the second (docs/memory.md, "Time")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from eventstore import InvalidInputError
from oblivio import MemoryClient, Scope
from workers.archiving import Archiver
from workers.maintenance import RetentionPolicy, sweep_retention

MOVED_IN = datetime(2022, 3, 1, tzinfo=UTC)
MOVED_ON = datetime(2024, 3, 15, tzinfo=UTC)


def stored_node(memory: MemoryClient, text: str, **fields: object):  # type: ignore[no-untyped-def]
    event_id = memory.store(text, user_id="alice", **fields)  # type: ignore[arg-type]
    [node] = memory.get_event_nodes(event_id, user_id="alice")
    return event_id, node


def test_a_memory_keeps_its_effective_time_beside_the_recorded_one(memory: MemoryClient) -> None:
    event_id, node = stored_node(memory, "Alice lives in Boston.", occurred_at=MOVED_IN)
    event = memory.get_event(event_id, user_id="alice")

    assert event is not None
    assert node.occurred_at == event.occurred_at == MOVED_IN
    assert event.recorded_at > MOVED_IN  # the log's own time stays the log's
    assert node.created_at == event.recorded_at
    assert node.valid_to is None


def test_without_occurred_at_a_memory_takes_effect_when_stored(memory: MemoryClient) -> None:
    event_id, node = stored_node(memory, "Alice plays the cello.")
    event = memory.get_event(event_id, user_id="alice")

    assert event is not None
    assert node.occurred_at == event.occurred_at == event.recorded_at == node.created_at


def test_occurred_at_is_given_in_any_zone_and_kept_in_utc(memory: MemoryClient) -> None:
    _, node = stored_node(memory, "Alice flew home.", occurred_at="2023-05-08T09:30:00+02:00")

    assert node.occurred_at == datetime(2023, 5, 8, 7, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("occurred_at", "message"),
    [
        (datetime(2023, 5, 8), "occurred_at must be a timezone-aware date and time"),
        ("2023-05-08T09:30:00", "occurred_at must be a timezone-aware date and time"),
        ("last spring", "occurred_at must be an ISO 8601 date and time"),
        (1683538200, "occurred_at must be a timezone-aware date and time"),
    ],
)
def test_a_time_without_a_zone_is_refused_and_nothing_is_written(
    memory: MemoryClient, occurred_at: object, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        memory.store("Alice moved.", user_id="alice", occurred_at=occurred_at)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=message):
        memory.put_item("home", "Alice moved.", user_id="alice", occurred_at=occurred_at)  # type: ignore[arg-type]

    assert memory.get_events(user_id="alice") == []


def test_a_correction_ends_validity_when_its_successor_took_effect(memory: MemoryClient) -> None:
    # Recorded in the other order: the later move was told first.
    _, chicago = stored_node(memory, "Alice lives in Chicago.", occurred_at=MOVED_ON)
    _, boston = stored_node(memory, "Alice lives in Boston.", occurred_at=MOVED_IN)

    memory.supersede(boston.id, chicago.id, user_id="alice")

    retired = memory.get_node(boston.id, user_id="alice", include_superseded=True)
    assert retired is not None
    assert retired.valid_to == MOVED_ON
    current = memory.get_node(chicago.id, user_id="alice")
    assert current is not None
    assert current.valid_to is None


def test_an_earlier_effective_correction_leaves_an_empty_interval(memory: MemoryClient) -> None:
    """An explicit correction by a memory that took effect before the retired one:
    the retired one never held (its interval ends where it began), and nothing else
    is retired by the earlier time."""
    _, later = stored_node(memory, "Alice drives a red car.", occurred_at=MOVED_ON)
    _, earlier = stored_node(memory, "Alice drives a blue car.", occurred_at=MOVED_IN)

    memory.supersede(later.id, earlier.id, user_id="alice")

    retired = memory.get_node(later.id, user_id="alice", include_superseded=True)
    assert retired is not None
    assert retired.valid_to == MOVED_ON == retired.occurred_at


def test_item_revisions_close_at_the_next_revisions_effective_time(memory: MemoryClient) -> None:
    first = memory.put_item("home", "Alice lives in Boston.", user_id="alice", occurred_at=MOVED_IN)
    second = memory.put_item(
        "home", "Alice lives in Chicago.", user_id="alice", occurred_at=MOVED_ON
    )

    [old] = memory.get_event_nodes(first.event_id, user_id="alice")
    [new] = memory.get_event_nodes(second.event_id, user_id="alice")
    assert (old.occurred_at, old.valid_to) == (MOVED_IN, MOVED_ON)
    assert (new.occurred_at, new.valid_to) == (MOVED_ON, None)
    item = memory.get_item("home", user_id="alice")
    assert item is not None
    assert item.current.occurred_at == MOVED_ON


def test_recency_decays_from_the_effective_time(memory: MemoryClient) -> None:
    now = memory.context.clock()
    stored_node(memory, "Alice's badminton club meets on Tuesdays.", occurred_at=now)
    stored_node(
        memory,
        "Alice's chess club meets on Tuesdays.",
        occurred_at=now - timedelta(days=60),
    )

    results = {
        r.node.content: r.components.recency
        for r in memory.retrieve("club meets on Tuesdays", user_id="alice").results
    }

    fresh = results["Alice's badminton club meets on Tuesdays."]
    backdated = results["Alice's chess club meets on Tuesdays."]
    assert fresh == pytest.approx(1.0, abs=1e-3)
    # 60 days at a 30-day half-life stretched 1.5 times by the default salience.
    assert backdated == pytest.approx(2 ** (-60 / 45), rel=1e-3)


def test_replay_gives_the_live_state_with_both_times(memory: MemoryClient) -> None:
    _, chicago = stored_node(memory, "Alice lives in Chicago.", occurred_at=MOVED_ON)
    _, boston = stored_node(memory, "Alice lives in Boston.", occurred_at=MOVED_IN)
    memory.supersede(boston.id, chicago.id, user_id="alice")
    memory.put_item("car", "Alice drives a hatchback.", user_id="alice", occurred_at=MOVED_IN)
    memory.put_item("car", "Alice drives an estate.", user_id="alice", occurred_at=MOVED_ON)

    digests = memory.replay_comparison(user_id="alice")

    assert digests
    assert all(live == replayed for live, replayed in digests.values())


def test_a_subject_export_carries_both_times(memory: MemoryClient) -> None:
    event_id, _ = stored_node(memory, "Alice lives in Boston.", occurred_at=MOVED_IN)

    exported = memory.export_subject(user_id="alice")

    [event] = [e for e in exported["events"] if e["event_id"] == str(event_id)]
    assert event["occurred_at"] == "2022-03-01T00:00:00Z"
    assert event["recorded_at"] != event["occurred_at"]
    [node] = exported["nodes"]
    assert node["occurred_at"] == "2022-03-01T00:00:00Z"


def test_retention_sweeps_count_from_the_recorded_time(memory: MemoryClient) -> None:
    """History imported today with an old effective time is not erased on arrival:
    storage limitation counts from when the store received it."""
    ctx = memory.context
    imported = memory.store(
        "Alice's session note from last year.",
        user_id="alice",
        scope=Scope.SESSION,
        occurred_at=ctx.clock() - timedelta(days=365),
    )
    policy = RetentionPolicy(ctx.namespace, Scope.SESSION, timedelta(days=30))

    assert sweep_retention(ctx.store, ctx.eraser, [policy], ctx.clock) == 0
    assert memory.get_event(imported, user_id="alice") is not None
    later = ctx.clock() + timedelta(days=31)
    assert sweep_retention(ctx.store, ctx.eraser, [policy], lambda: later) == 1
    assert memory.get_event(imported, user_id="alice") is None


def test_erasure_certificates_state_both_times(memory: MemoryClient) -> None:
    boston, _ = stored_node(memory, "Alice lives in Boston.", occurred_at=MOVED_IN)
    stored_node(memory, "Alice lives in Chicago.", occurred_at=MOVED_ON)
    recorded = memory.get_event(boston, user_id="alice")
    assert recorded is not None

    deleted = memory.delete_event(boston, user_id="alice", wait=True)
    claims = memory.verify_certificate(deleted.certificate)

    assert claims["erasure"]["occurred_between"] == ["2022-03-01T00:00:00Z"] * 2
    [first, last] = claims["erasure"]["recorded_between"]
    assert first == last == recorded.recorded_at.isoformat().replace("+00:00", "Z")

    forgotten = memory.verify_certificate(memory.forget("alice", wait=True).certificate)
    assert forgotten["erasure"]["occurred_between"] == ["2024-03-15T00:00:00Z"] * 2


def test_archiving_ranks_retention_from_the_effective_time(fresh_memory: MemoryClient) -> None:
    """Of two untouched memories, the one that took effect long ago leaves the tier,
    though it was stored last.  A database of its own: the job passes over every subject."""
    memory = fresh_memory
    ctx = memory.context
    _, fresh = stored_node(memory, "Alice's bike is blue.")
    _, backdated = stored_node(
        memory, "Alice's first bike was red.", occurred_at=ctx.clock() - timedelta(days=300)
    )

    report = Archiver(ctx.store, ctx.graph, ctx.scoring, 1, lambda: ctx.clock()).run()

    assert report.nodes == 1
    archived = memory.get_node(backdated.id, user_id="alice")
    assert archived is not None
    assert archived.archived_at is not None
    kept = memory.get_node(fresh.id, user_id="alice")
    assert kept is not None
    assert kept.archived_at is None
