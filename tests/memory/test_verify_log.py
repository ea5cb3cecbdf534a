"""``verify_log`` on the facade: the log's integrity chains, sync and awaited."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

from eventstore.schema import events
from oblivio import MemoryClient, MemoryEngine
from oblivio.settings import Settings


def _break_first_chain_hash(client: MemoryClient) -> None:
    with client.context.store.backend.engine.begin() as conn:
        first = conn.execute(sa.select(sa.func.min(events.c.position))).scalar_one()
        conn.execute(
            events.update().where(events.c.position == first).values(chain_hash=b"\x00" * 32)
        )


def test_verify_log_reports_intact_and_broken_chains(fresh_memory: MemoryClient) -> None:
    fresh_memory.store("I live in Lyon.", user_id="ana")
    fresh_memory.store("I work nights.", user_id="ana")
    fresh_memory.store("I like chess.", user_id="ben")

    report = fresh_memory.verify_log()
    assert report.ok
    assert report.events_checked >= 3
    only_ana = fresh_memory.verify_log(user_id="ana")
    assert (only_ana.ok, only_ana.streams_checked, only_ana.events_checked) == (True, 1, 2)

    _break_first_chain_hash(fresh_memory)
    broken = fresh_memory.verify_log()
    assert not broken.ok
    assert broken.first_break is not None
    assert broken.first_break.version == 1


def test_memory_engine_awaits_verify_log(fresh_settings: Settings) -> None:
    async def run() -> tuple[bool, int]:
        async with MemoryEngine(settings=fresh_settings) as engine:
            await engine.store("I live in Lyon.", user_id="ana")
            report = await engine.verify_log(user_id="ana")
            return report.ok, report.events_checked

    assert asyncio.run(run()) == (True, 1)
