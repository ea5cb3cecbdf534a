"""Stores written before effective times get them back in bulk: ``oblivio rebuild graphs``.

A store is written with back-dated memories, then taken back to the schema
before migration pj0010 and upgraded again, as a store of that age would be:
its nodes count from when they were derived, and every stream is marked for a
rebuild of its graph.  The bulk rebuild gives every marked person's graph its
effective times and their items their effective order at once, and points in
time answer again; a second run does nothing, and a run interrupted midway is
finished by the next one.  Both backends.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alembic import command
from click.testing import CliRunner

from eventstore.migrate import _config
from oblivio import MemoryClient
from oblivio.bootstrap import migration_locations, upgrade_schema
from oblivio.cli import main
from oblivio.memory.backfills import backfill_marked, marked_count
from oblivio.settings import Settings

PEOPLE = ("ana", "ben", "cai")
HOMES = (
    (datetime(2016, 4, 1, tzinfo=UTC), "lives by the old canal."),
    (datetime(2021, 9, 1, tzinfo=UTC), "lives in a flat near the stadium."),
)


def home_now(memory: MemoryClient, person: str, moment: datetime) -> str:
    found = memory.retrieve("Where does the person live?", user_id=person, as_of=moment, limit=1)
    return found.results[0].node.content if found.results else "(nothing)"


@pytest.fixture
def aged(fresh_settings: Settings) -> Settings:
    """A store written now, then brought to the state of one upgraded from before
    effective times: every stream marked, every node effective when derived."""
    with MemoryClient(settings=fresh_settings) as memory:
        for person in PEOPLE:  # told out of order: the later home first
            for when, text in reversed(HOMES):
                memory.put_item("home", f"{person} {text}", user_id=person, occurred_at=when)
        engine = memory.context.store.engine
        with engine.begin() as conn:
            command.downgrade(_config(conn, migration_locations(), []), "pj0009")
        upgrade_schema(engine)
    return fresh_settings


def test_a_bulk_rebuild_gives_every_marked_graph_its_effective_times(aged: Settings) -> None:
    between = datetime(2019, 1, 1, tzinfo=UTC)
    with MemoryClient(settings=aged) as memory:
        assert marked_count(memory.context) == len(PEOPLE)
        # Before the rebuild the old homes count from when they were stored.
        assert memory.get_events(user_id="ana")  # the log is whole
        assert home_now(memory, "ana", between) == "(nothing)"

        interrupted: list[int] = []

        def stop_after_one(stream_id: int) -> None:
            interrupted.append(stream_id)
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            backfill_marked(memory.context, stop_after_one)
        assert marked_count(memory.context) == len(PEOPLE) - 1  # the first one is done

        assert backfill_marked(memory.context) == len(PEOPLE) - 1
        assert marked_count(memory.context) == 0
        assert backfill_marked(memory.context) == 0  # idempotent
        for person in PEOPLE:
            assert home_now(memory, person, between) == f"{person} {HOMES[0][1]}"
            assert home_now(memory, person, datetime.now(UTC)) == f"{person} {HOMES[1][1]}"
            item = memory.get_item("home", user_id=person)
            assert item is not None
            assert item.current.content == f"{person} {HOMES[1][1]}"
            for name, (live, fresh) in memory.replay_comparison(user_id=person).items():
                assert live == fresh, name


def test_the_command_rebuilds_what_is_marked_and_says_so(aged: Settings) -> None:
    runner, args = CliRunner(), ["--data-dir", str(aged.data_dir)]
    if aged.database_url is not None:  # the keyring the test's settings name
        runner = CliRunner(env={"OBLIVIO_KEYRING": str(aged.keyring_path)})
        args += ["--database-url", aged.database_url]

    first = runner.invoke(main, [*args, "rebuild", "graphs"])
    assert first.exit_code == 0, first.output
    assert f"{len(PEOPLE)} node graphs rebuilt; 0 still marked" in first.output
    again = runner.invoke(main, [*args, "rebuild", "graphs"])
    assert again.exit_code == 0, again.output
    assert "0 node graphs rebuilt; 0 still marked" in again.output
