"""Filters apply before ranking: a filtered retrieve is the brute-force filter of every
candidate, in the unfiltered ranking's order, cut at ``limit`` (no false negatives),
and never a memory of another owner, scope or namespace (issue 30's property)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oblivio import MemoryClient, Node
from projections.scoring import ScoringConfig
from tests.memory.conftest import Opener

START = datetime(2020, 1, 1, tzinfo=UTC)
WORDS = ("tea", "garden", "train", "violin", "harbour", "letter")
TOPICS = ("home", "work", None)
SCOPES = ("personal", "project")
PREFIXES = ({"$prefix": "ho"}, {"$prefix": "w"}, {"$prefix": ""}, {"$prefix": "homes"})
#: Unique subjects per example: one store serves every example of a test.
EXAMPLES = itertools.count()


@dataclass(frozen=True)
class Told:
    owner: str  # "a" (the one asking) or "b" (someone else)
    scope: str
    words: tuple[str, ...]
    day: int
    topic: str | None
    rank: int


told = st.builds(
    Told,
    owner=st.sampled_from(("a", "a", "b")),
    scope=st.sampled_from(SCOPES),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(tuple),
    day=st.integers(0, 40),
    topic=st.sampled_from(TOPICS),
    rank=st.integers(1, 3),
)


@dataclass(frozen=True)
class Query:
    words: tuple[str, ...]
    scopes: tuple[str, ...] | None
    since: int | None
    until: int | None
    meta: dict[str, Any] | None
    limit: int

    def fields(self) -> dict[str, Any]:
        return {
            "scopes": self.scopes,
            "occurred_since": None if self.since is None else START + timedelta(days=self.since),
            "occurred_until": None if self.until is None else START + timedelta(days=self.until),
            "meta": self.meta,
        }

    def admits(self, node: Node) -> bool:
        effective = (node.occurred_at - START).days
        return (
            (self.scopes is None or node.scope.value in self.scopes)
            and (self.since is None or effective >= self.since)
            and (self.until is None or effective < self.until)
            and all(_meets(node.meta.get(k, object()), v) for k, v in (self.meta or {}).items())
        )


def _meets(value: object, wanted: Any) -> bool:
    if isinstance(wanted, dict):  # {"$prefix": text}
        return isinstance(value, str) and value.startswith(wanted["$prefix"])
    return value == wanted


def _window(bounds: tuple[int | None, int | None]) -> bool:
    since, until = bounds
    return since is None or until is None or since < until


queries = st.builds(
    lambda words, scopes, bounds, meta, limit: Query(words, scopes, *bounds, meta, limit),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=2).map(tuple),
    scopes=st.none() | st.lists(st.sampled_from(SCOPES), min_size=1, max_size=2).map(tuple),
    bounds=st.tuples(st.none() | st.integers(0, 40), st.none() | st.integers(1, 41)).filter(
        _window
    ),
    meta=st.none()
    | st.fixed_dictionaries({"topic": st.sampled_from(TOPICS)})
    | st.fixed_dictionaries({"rank": st.integers(1, 3)})
    | st.fixed_dictionaries({"rank": st.just(2.0), "topic": st.sampled_from(TOPICS)})
    | st.fixed_dictionaries({"topic": st.sampled_from(PREFIXES)}),
    limit=st.integers(1, 6),
)


def _store(client: MemoryClient, user: str, memory: Told) -> None:
    client.store(
        " ".join(memory.words) + f" {memory.scope}",
        user_id=user,
        scope=memory.scope,
        occurred_at=START + timedelta(days=memory.day),
        meta={"topic": memory.topic, "rank": memory.rank},
    )


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(memories=st.lists(told, min_size=1, max_size=12), query=queries)
def test_a_filtered_retrieve_is_the_filtered_ranking(
    reopen: Opener, memories: list[Told], query: Query
) -> None:
    # No access counting in the score: every retrieve would change the next one's.
    flat = ScoringConfig(access_weight=0.0)
    client = reopen(scoring=flat)
    elsewhere = reopen(scoring=flat, namespace=f"{client.context.namespace}-x")
    fixed = client.context.clock()
    client.context.clock = lambda: fixed
    n = next(EXAMPLES)
    asker, other = f"asker-{n}", f"other-{n}"
    for memory in memories:
        _store(client, asker if memory.owner == "a" else other, memory)
        _store(elsewhere, asker, memory)  # the same person in another namespace
    text = " ".join(query.words)

    filtered = client.retrieve(text, user_id=asker, limit=query.limit, **query.fields())
    everything = client.retrieve(text, user_id=asker, limit=1000, include_superseded=True)

    expected = [r for r in everything.results if query.admits(r.node)][: query.limit]
    assert [r.node.id for r in filtered.results] == [r.node.id for r in expected]
    assert [r.score for r in filtered.results] == [r.score for r in expected]
    own = {
        n.id
        for e in client.get_events(user_id=asker, limit=1000)
        for n in client.get_event_nodes(e.id, user_id=asker)
    }
    assert {r.node.id for r in filtered.results} <= own
