"""``GET /v1/health``: public, so one process computes its lag figure at most once a second."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from oblivio.memory.health import LagReport, projection_lag
from tests.http.conftest import World, settled


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def statements(world: World) -> Iterator[list[str]]:
    """Every SQL statement sent inside the block (by any engine: on PostgreSQL the
    store reads through a second, autocommit pool)."""
    seen: list[str] = []
    engine = sa.engine.Engine

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def test_a_second_probe_within_the_second_reads_nothing(world: World) -> None:
    world.seed("alice")
    settled(world, "alice")
    with statements(world) as first:
        body = world.client.get("/v1/health").json()
    assert body["status"] == "ok"
    assert body["projection_lag"]["vector_state"] >= 1
    assert first  # the first probe reads the checkpoints and counts
    with statements(world) as second:
        assert world.client.get("/v1/health").json() == body
    assert second == []


def test_the_figure_is_shared_for_ttl_then_computed_again(world: World) -> None:
    clock = Clock()
    report = LagReport(ttl=1.0, clock=clock)
    world.seed("alice")
    settled(world, "alice")
    before = report(world.ctx)
    assert before == projection_lag(world.ctx)
    world.seed("bob")
    settled(world, "bob")
    clock.now += 0.9
    assert report(world.ctx) == before  # still the shared figure
    clock.now += 0.1
    after = report(world.ctx)
    assert after == projection_lag(world.ctx)
    assert after["vector_state"] == before["vector_state"] + 1


def test_a_failure_is_not_kept(world: World) -> None:
    clock = Clock()
    report = LagReport(ttl=1.0, clock=clock)

    class Broken:
        @property
        def runner(self) -> object:
            raise RuntimeError("database unreachable")

    with pytest.raises(RuntimeError, match="unreachable"):
        report(Broken())  # type: ignore[arg-type]
    assert report(world.ctx) == projection_lag(world.ctx)  # tried again at once
