"""The retrieval index follows writes instead of reloading, and stays exact:
after any sequence of writes (by another client, as another process would),
a query on the refreshed index returns what a fresh load returns."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore import OblivioError
from oblivio import MemoryClient
from oblivio.memory import queries
from projections.scoring import ScoringConfig
from tests.memory.conftest import Opener

WORDS = ("coffee", "tea", "train", "paris", "doctor", "monday", "invoice", "garden")
QUERIES = ("coffee in paris", "doctor on monday", "garden tea")

text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
node_pick = st.integers(min_value=0, max_value=30)
operation = st.one_of(
    st.tuples(st.just("store"), text, st.sampled_from([None, "s1", "s2"])),
    st.tuples(st.just("supersede"), node_pick, node_pick),
    st.tuples(st.just("reinforce"), node_pick),
    st.tuples(st.just("contradict"), node_pick, node_pick),
    st.tuples(st.just("trigger"), st.sampled_from(WORDS)),
    st.tuples(st.just("untrigger")),
    st.tuples(st.just("attractor"), text),
    st.tuples(st.just("clear attractors")),
    st.tuples(st.just("delete"), node_pick),
)


class Writer:
    """Applies operations through one client, remembering what it stored."""

    def __init__(self, client: MemoryClient, user: str) -> None:
        self.client, self.user = client, user
        self.events: list[uuid.UUID] = []
        self.nodes: list[uuid.UUID] = []
        self.triggers: list[uuid.UUID] = []

    def apply(self, op: tuple[Any, ...]) -> None:
        c, user = self.client, self.user
        kind, *args = op
        if kind == "store":
            self.events.append(c.store(args[0], user_id=user, session_id=args[1]))
            self.nodes += [n.id for n in c.get_event_nodes(self.events[-1], user_id=user)]
        elif kind == "trigger":
            self.triggers.append(c.add_resonance_trigger(user_id=user, keyword=args[0]))
        elif kind == "untrigger" and self.triggers:
            c.remove_resonance_trigger(self.triggers.pop(), user_id=user)
        elif kind == "attractor":
            c.add_negative_attractor(args[0], user_id=user, severity=0.8)
        elif kind == "clear attractors":
            c.clear_negative_attractors(user_id=user)
        elif self.nodes:
            self._on_nodes(kind, [self.nodes[i % len(self.nodes)] for i in args], args)

    def _on_nodes(self, kind: str, nodes: list[uuid.UUID], args: list[int]) -> None:
        c, user = self.client, self.user
        try:
            if kind == "supersede":
                c.supersede(nodes[0], nodes[1], user_id=user)
            elif kind == "reinforce":
                c.reinforce(nodes[0], user_id=user)
            elif kind == "contradict":
                c.contradict(nodes[0], nodes[1], user_id=user)
            elif kind == "delete":
                c.delete_event(self.events[args[0] % len(self.events)], user_id=user)
        except OblivioError:
            pass  # refused (same node, already retired, erased …): nothing was written


def ranking(client: MemoryClient, user: str, query: str, **options: Any) -> list[tuple[Any, ...]]:
    found = client.retrieve(query, user_id=user, limit=1000, **options).results
    # Access counts are each process's own until written (projections.access): the
    # two readers count their own retrievals, so they are left out of the comparison.
    parts = [{k: v for k, v in vars(r.components).items() if k != "accesses"} for r in found]
    return [(r.node.id, r.node.lifecycle, r.score, p) for r, p in zip(found, parts, strict=True)]


def assert_same(refreshed: list[tuple[Any, ...]], fresh: list[tuple[Any, ...]]) -> None:
    assert [r[:2] for r in refreshed] == [f[:2] for f in fresh]
    for (*_, score, parts), (*_, fresh_score, fresh_parts) in zip(refreshed, fresh, strict=True):
        assert score == pytest.approx(fresh_score, rel=1e-9, abs=1e-12)
        assert parts == pytest.approx(fresh_parts, rel=1e-9, abs=1e-12)


@pytest.fixture
def clients(reopen: Opener) -> tuple[MemoryClient, MemoryClient, MemoryClient]:
    """A writer, a reader whose index follows the writes, and a reader that loads
    afresh every time; the two readers share one "now"."""
    # Without the access term: each reader counts only its own retrievals (see ranking).
    no_access = ScoringConfig(access_weight=0.0)
    writer, reader, cold = reopen(), reopen(scoring=no_access), reopen(scoring=no_access)
    later = datetime.now(UTC) + timedelta(days=3)
    reader.context.clock = cold.context.clock = lambda: later
    return writer, reader, cold


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(operation, min_size=1, max_size=8))
def test_a_refreshed_index_answers_like_a_fresh_load(
    clients: tuple[MemoryClient, MemoryClient, MemoryClient], operations: list[tuple[Any, ...]]
) -> None:
    user = f"u-{uuid.uuid4().hex[:12]}"  # every example on a subject of its own
    client, reader, cold = clients
    writer = Writer(client, user)
    writer.apply(("store", "coffee and tea", "s1"))
    ranking(reader, user, QUERIES[0])  # warm the reader's index
    for op in operations:
        writer.apply(op)
        for query, options in zip(QUERIES, ({}, {"include_superseded": True}, {}), strict=True):
            cold.context.retrieval_cache.drop(queries.cache_key(cold.context, user))
            assert_same(
                ranking(reader, user, query, **options), ranking(cold, user, query, **options)
            )


def test_a_store_is_applied_to_the_cached_index_not_reloaded(reopen: Opener) -> None:
    writer, reader = reopen(), reopen()
    writer.store("I drink coffee in Paris.", user_id="alice", session_id="s")
    assert len(reader.retrieve("coffee", user_id="alice").results) == 1
    entry = reader.context.retrieval_cache.entry(queries.cache_key(reader.context, "alice"))
    assert entry is not None
    writer.store("Tea on Mondays.", user_id="alice", session_id="s")
    [first, second] = reader.retrieve("tea", user_id="alice").results
    after = reader.context.retrieval_cache.entry(queries.cache_key(reader.context, "alice"))
    assert after is not None
    assert after[1] is entry[1]  # the same index object, grown by one node
    assert len(after[1]) == 2
    assert reader.context.retrieval_cache.cached_nodes == 2
    assert first.node.content == "Tea on Mondays."
    assert second.components.context > 0  # the session neighbour link was made


def test_an_erasure_reloads_the_index(reopen: Opener) -> None:
    writer, reader = reopen(), reopen()
    gone = writer.store("My old address is 12 Elm Street.", user_id="alice")
    writer.store("My new address is 48 Oak Avenue.", user_id="alice")
    assert len(reader.retrieve("address", user_id="alice").results) == 2
    entry = reader.context.retrieval_cache.entry(queries.cache_key(reader.context, "alice"))
    writer.delete_event(gone, user_id="alice")
    [left] = reader.retrieve("address", user_id="alice").nodes
    assert left.content == "My new address is 48 Oak Avenue."
    after = reader.context.retrieval_cache.entry(queries.cache_key(reader.context, "alice"))
    assert entry is not None
    assert after is not None
    assert after[1] is not entry[1]


def test_threads_refreshing_one_index_apply_each_write_once(reopen: Opener) -> None:
    writer, reader = reopen(), reopen()
    writer.store("coffee in Paris", user_id="alice")
    reader.retrieve("coffee", user_id="alice")
    for i in range(5):
        writer.store(f"tea number {i}", user_id="alice")
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda _: reader.retrieve("tea", user_id="alice"), range(8)))
    assert all(len(f.results) == 6 for f in found)
    entry = reader.context.retrieval_cache.entry(queries.cache_key(reader.context, "alice"))
    assert entry is not None
    assert len(entry[1]) == 6
    assert len({n.id for n in entry[1].nodes}) == 6
