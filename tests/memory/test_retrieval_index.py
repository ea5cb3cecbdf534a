"""The in-memory retrieval index: it ranks exactly as the documented formula says
(checked against a plain-Python reading of docs/retrieval.md), and it never
serves a state the database no longer holds, also when another client (another
process, in production) changes the subject."""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from oblivio import MemoryClient, NodeType, Scope, SourceType
from oblivio.errors import NotCaughtUpError
from oblivio.memory import queries
from projections import events as ev
from projections.lexical import tokenize
from projections.model import REINFORCEMENT_CAP, LifecycleState, Node
from projections.retrieval_index import stream_probes
from projections.scoring import AttractorProbe, ScoringConfig, TriggerProbe
from projections.storage.graph_store import node_from_row
from projections.storage.vector_store import VectorStore, _stream_node_vectors, unpack_vector
from tests.memory._support import events_of_type, remember
from tests.memory.conftest import Opener

WORDS = [
    *("balance", "account", "invoice", "address", "street", "delivery", "coffee"),
    *("tea", "meeting", "monday", "friday", "doctor", "appointment", "password"),
    *("travel", "berlin", "paris", "train", "flight", "hotel"),
]
# Low thresholds so that attractors and text triggers touch many nodes.
CONFIG = ScoringConfig(negative_attractor_threshold=0.05, negative_attractor_penalty=0.8)
QUERIES = ("What is my account balance?", "delivery address street", "train to paris on friday")

Reference = list[tuple[uuid.UUID, float, dict[str, float]]]


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


K1, B = 1.2, 0.5


def _idf(documents: list[list[str]], term: str) -> float:
    df = sum(term in d for d in documents)
    return math.log(1 + (len(documents) - df + 0.5) / (df + 0.5))


def _attainable(documents: list[list[str]], query: list[str]) -> float:
    """The most a document could score: idf · (k1 + 1) over the distinct query terms."""
    return sum(_idf(documents, term) * (K1 + 1) for term in dict.fromkeys(query))


def _bm25(documents: list[list[str]], query: list[str]) -> list[float]:
    """Lucene's BM25 (k1 = 1.2, b = 0.5), each distinct query term once."""
    average = sum(map(len, documents)) / len(documents) or 1.0
    counts = [Counter(d) for d in documents]
    scores = [0.0] * len(documents)
    for term in dict.fromkeys(query):
        df = sum(term in c for c in counts)
        idf = math.log(1 + (len(documents) - df + 0.5) / (df + 0.5))
        for i, c in enumerate(counts):
            if c[term]:
                norm = K1 * (1 - B + B * len(documents[i]) / average)
                scores[i] += idf * c[term] * (K1 + 1) / (c[term] + norm)
    return scores


def _boost(c: ScoringConfig, node: Node, vector: list[float], ts: list[TriggerProbe]) -> float:
    strengths = [0.0]
    for t in ts:
        if t.keyword is not None:
            strengths.append(t.weight * (t.keyword.casefold() in node.content.casefold()))
        elif t.vector is not None and (cos := _cos(t.vector, vector)) >= t.threshold:
            strengths.append(t.weight * cos)
    return c.trigger_retrieval_boost * max(strengths)


def _penalty(c: ScoringConfig, vector: list[float], attractors: list[AttractorProbe]) -> float:
    near = [
        a.severity * cos
        for a in attractors
        if (cos := _cos(a.vector, vector)) >= c.negative_attractor_threshold
    ]
    return min(c.negative_attractor_penalty * max(near), 1.0) if near else 0.0


def _query_lexical_weight(c: ScoringConfig, cosines: list[float]) -> float:
    """λ / (1 + μ · (best − second best cosine) / their standard deviation)."""
    if len(cosines) < 2:
        return c.lexical_weight
    mean = sum(cosines) / len(cosines)
    spread = math.sqrt(sum((x - mean) ** 2 for x in cosines) / len(cosines))
    if spread == 0:
        return c.lexical_weight
    second, first = sorted(cosines)[-2:]
    return c.lexical_weight / (1 + c.dense_margin_weight * (first - second) / spread)


def reference_ranking(
    client: MemoryClient,
    user: str,
    query: str,
    admits: Callable[[Node], bool],
    accesses: Counter[uuid.UUID],
) -> Reference:
    """Every admitted node scored by the documented formula, in plain Python;
    ``accesses`` counts how often earlier retrievals returned each node."""
    ctx, c = client.context, client.context.scoring
    head = ctx.store.head(ctx.namespace, user)
    assert head is not None
    [query_vector] = ctx.embedder.embed([query])
    now = ctx.clock()
    with ctx.store.reading() as view:
        cipher = view.cipher(head.stream.stream_id)
        assert cipher is not None
        store = VectorStore(view.connection)
        triggers, attractors = stream_probes(store, cipher)
        rows = sorted(
            store.node_vectors(head.stream.stream_id),
            key=lambda r: (r.created_at, r.event_id, r.ordinal),
        )
        nodes = [node_from_row(cipher, row) for row in rows]
        vectors = [unpack_vector(cipher.open("vector", r.node_id.bytes, r.embedding)) for r in rows]
    documents = [tokenize(n.content) for n in nodes]
    bm25 = _bm25(documents, tokenize(query))
    admitted = [admits(n) for n in nodes]
    # The lexical channel: BM25 against half of what the query could attain, at most 1.
    scale = c.lexical_scale * _attainable(documents, tokenize(query))
    lexical = [min(b / scale, 1.0) if scale > 0 else 0.0 for b in bm25]
    cosines = [_cos(query_vector, v) for v in vectors]
    weight = _query_lexical_weight(c, cosines)  # every node: filters do not change scores
    fused = [
        (1 - weight) * max(cosine, 0.0) + weight * x
        for cosine, x in zip(cosines, lexical, strict=True)
    ]
    scored = []
    for i, node in enumerate(nodes):
        session = [
            j
            for j in range(len(nodes))
            if node.session_id is not None and nodes[j].session_id == node.session_id
        ]
        context = _context(c, session, i, fused, admitted, nodes)
        age = (now - (node.last_reinforced_at or node.created_at)).total_seconds() / 86_400
        stretch = (1 + node.salience_base) * (1 + math.log1p(node.reinforcement_count))
        used = accesses.get(node.id, 0)
        stretch *= 1 + c.access_weight * math.log1p(used)
        confidence = node.meta.get("confidence", 1.0)
        components = {
            "similarity": max(_cos(query_vector, vectors[i]), 0.0),
            "lexical": lexical[i],
            "lexical_weight": weight,
            "context": context,
            "recency": 0.5 ** (age / (c.recency_half_life_days * stretch)),
            "salience": node.salience_base,
            "reinforcement": node.reinforcement_boost / REINFORCEMENT_CAP,
            "confidence": node.confidence_base,
            "source_confidence": min(max(float(confidence), 0.0), 1.0),
            "trigger_boost": _boost(c, node, vectors[i], triggers),
            "attractor_penalty": _penalty(c, vectors[i], attractors),
            "accesses": used,
        }
        relevance = (
            c.similarity_weight * (fused[i] + context)
            + c.recency_weight * components["recency"]
            + c.salience_weight * components["salience"]
            + c.reinforcement_weight * components["reinforcement"]
            + c.confidence_weight * components["confidence"] * components["source_confidence"]
        )
        total = relevance * (1 + components["trigger_boost"])
        total *= 1 - components["attractor_penalty"]
        scored.append((node.id, total, components))
    _follow_successors(nodes, scored)
    scored = [s for s, a in zip(scored, admitted, strict=True) if a]
    scored.sort(key=lambda s: (-s[1], str(s[0])))
    return scored


def _follow_successors(nodes: list[Node], scored: Reference) -> None:
    """Each successor scores a hair (1e-9) above the node it superseded, at least;
    a chain passes it on.  ``components["succession"]`` is what that added."""
    place = {n.id: i for i, n in enumerate(nodes)}
    own = [total for _, total, _ in scored]
    totals = list(own)
    changed = True
    while changed:
        changed = False
        for i, node in enumerate(nodes):
            j = place.get(node.superseded_by) if node.superseded_by else None
            if j is not None and totals[i] + 1e-9 > totals[j]:
                totals[j], changed = totals[i] + 1e-9, True
    for i, (node_id, _, components) in enumerate(scored):
        components["succession"] = totals[i] - own[i]
        scored[i] = (node_id, totals[i], components)


def _context(
    c: ScoringConfig,
    session: list[int],
    i: int,
    fused: list[float],
    admitted: list[bool],
    nodes: list[Node],
) -> float:
    """What a node's session lends it: κ times its neighbours' fused match (κ_reply for
    the turn before it when that turn asked a question), κ_distant two turns away."""
    if not session:
        return 0.0
    place = session.index(i)

    def lent(offset: int) -> float:
        k = place + offset
        return fused[session[k]] if 0 <= k < len(session) and admitted[session[k]] else 0.0

    asked = place > 0 and "?" in nodes[session[place - 1]].content
    return max(
        (c.reply_context_weight if asked else c.session_context_weight) * lent(-1),
        c.session_context_weight * lent(1),
        c.distant_context_weight * lent(-2),
        c.distant_context_weight * lent(2),
    )


def varied_subject(client: MemoryClient, user: str) -> None:
    """Nodes of every scope, type and source, with meta confidence, reinforcements,
    supersessions, a contradiction, keyword and text triggers and attractors."""
    scopes, types, sources = list(Scope), list(NodeType), list(SourceType)
    nodes = []
    for i in range(48):
        words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(2 + i % 4)]
        meta: dict[str, Any] = {"n": i}
        if i % 3 == 0:
            meta["confidence"] = round(0.1 + (i % 9) / 10, 2)
        _, node = remember(
            client,
            f"memory {i}: " + " ".join(words) + ("?" if i % 5 == 1 else ""),
            user_id=user,
            scope=scopes[i % len(scopes)],
            node_type=types[i % len(types)],
            source_type=sources[i % len(sources)],
            meta=meta,
            session_id=None if i % 4 == 3 else f"session {i % 3}",
        )
        nodes.append(node)
    for node in nodes[::5]:
        client.reinforce(node.id, user_id=user)
    for node in nodes[::10]:
        client.reinforce(node.id, user_id=user)
    for old, new in ((nodes[0], nodes[4]), (nodes[8], nodes[12]), (nodes[17], nodes[21])):
        if old.scope == new.scope:
            client.supersede(old.id, new.id, user_id=user)
    client.contradict(nodes[2].id, nodes[6].id, user_id=user)
    client.add_resonance_trigger(user_id=user, keyword="PARIS", weight=3.0)
    client.add_resonance_trigger(user_id=user, keyword="coffee", weight=0.0)
    client.add_resonance_trigger(user_id=user, text="delivery address", threshold=0.1)
    client.add_negative_attractor("account balance invoice", user_id=user, severity=0.7)
    client.add_negative_attractor("doctor appointment monday", user_id=user)


FILTERS: list[tuple[dict[str, Any], Callable[[Node], bool]]] = [
    ({}, lambda n: n.lifecycle != LifecycleState.SUPERSEDED),
    ({"include_superseded": True}, lambda n: True),
    (
        {"scopes": [Scope.PERSONAL, "project"]},
        lambda n: (
            n.scope in (Scope.PERSONAL, Scope.PROJECT) and n.lifecycle != LifecycleState.SUPERSEDED
        ),
    ),
    (
        {"node_types": ["fact", NodeType.NOTE], "include_superseded": True},
        lambda n: n.node_type in (NodeType.FACT, NodeType.NOTE),
    ),
    (
        {"exclude_node_types": [NodeType.FACT, NodeType.EVENT]},
        lambda n: (
            n.node_type not in (NodeType.FACT, NodeType.EVENT)
            and n.lifecycle != LifecycleState.SUPERSEDED
        ),
    ),
    (
        {"source_types": [SourceType.IMPORTED]},
        lambda n: n.source_type is SourceType.IMPORTED and n.lifecycle != LifecycleState.SUPERSEDED,
    ),
    (
        {
            "scopes": [Scope.SESSION, Scope.ORGANISATION, Scope.PERSONAL],
            "exclude_node_types": [NodeType.PREFERENCE],
            "source_types": ["user_stated", "observed", "system"],
            "include_superseded": True,
        },
        lambda n: (
            n.scope in (Scope.SESSION, Scope.ORGANISATION, Scope.PERSONAL)
            and n.node_type is not NodeType.PREFERENCE
            and n.source_type in (SourceType.USER_STATED, SourceType.OBSERVED, SourceType.SYSTEM)
        ),
    ),
    ({"scopes": []}, lambda n: False),
]


def _same(found: Any, expected: Reference) -> None:
    """Equal up to float32 rounding: the index takes cosines in float32, like its vectors."""
    assert [r.node.id for r in found.results] == [e[0] for e in expected]
    for result, (_, total, components) in zip(found.results, expected, strict=True):
        assert result.score == pytest.approx(total, rel=1e-6, abs=1e-7)
        for name, value in components.items():
            assert getattr(result.components, name) == pytest.approx(value, rel=1e-6, abs=1e-7)


def test_the_index_ranks_by_the_documented_formula(reopen: Opener) -> None:
    memory = reopen(scoring=CONFIG)
    varied_subject(memory, "alice")
    # A later "now" gives every node a different, non-trivial recency.
    later = datetime.now().astimezone() + timedelta(days=45)
    memory.context.clock = lambda: later
    queries.wait_for_vectors(memory.context, "alice")  # the reference reads the vectors
    returned: Counter[uuid.UUID] = Counter()
    checked = 0
    for query in QUERIES:
        for filters, admits in FILTERS:
            # Each retrieval counts an access of every node it returns.
            for limit in (1000, 3):
                expected = reference_ranking(memory, "alice", query, admits, returned)
                found = memory.retrieve(query, user_id="alice", limit=limit, **filters)
                _same(found, expected[:limit])
                returned.update(found_node.id for found_node in found.nodes)
            checked += len(expected)
    assert checked > 200
    boosts = {
        r.components.trigger_boost
        for r in memory.retrieve(QUERIES[2], user_id="alice", limit=1000).results
    }
    assert {0.0, 1.5} <= boosts  # no trigger, and the keyword at weight 3
    assert len(boosts) > 2  # and text-trigger strengths
    everything = memory.retrieve(QUERIES[0], user_id="alice", limit=1000).results
    penalties = [r.components.attractor_penalty for r in everything]
    assert any(0 < p < 0.8 for p in penalties)
    # Both channels and the session context take part.
    assert any(r.components.lexical == 0 for r in everything)
    assert any(0 < r.components.lexical < 1 for r in everything)
    assert any(r.components.context > 0 for r in everything)
    assert any(r.components.context == 0 for r in everything)


# -- the cache follows the database, whoever changes it -----------------------------------


def contents(client: MemoryClient, user: str = "alice", **options: Any) -> list[str]:
    found = client.retrieve("account balance", user_id=user, limit=100, **options)
    return [n.content for n in found.nodes]


def warmed(reopen: Opener) -> tuple[MemoryClient, MemoryClient]:
    """A reader whose index holds alice, and a second client on the same store."""
    reader, writer = reopen(), reopen()
    remember(writer, "Account balance: 850 EUR")
    remember(writer, "Account balance: 1,247.38 EUR")
    assert len(contents(reader)) == 2
    assert reader.context.retrieval_cache.cached_nodes == 2
    return reader, writer


def test_another_clients_store_is_seen(reopen: Opener) -> None:
    reader, writer = warmed(reopen)
    remember(writer, "Account balance: 2,000 EUR")
    assert "Account balance: 2,000 EUR" in contents(reader)


def test_vector_catch_up_by_another_client_is_seen_without_waiting(reopen: Opener) -> None:
    reader, writer = warmed(reopen)
    writer.store("Account balance: 3,000 EUR", user_id="alice")
    assert "Account balance: 3,000 EUR" not in contents(reader, consistent=False)
    ctx = writer.context
    head = ctx.store.head(ctx.namespace, "alice")
    cursor = ctx.store.last_cursor(ctx.namespace, "alice")
    assert head is not None
    assert cursor is not None
    assert ctx.runner.catch_up(cursor, head.stream.stream_id, timeout=30)
    assert "Account balance: 3,000 EUR" in contents(reader, consistent=False)


def test_a_consistent_read_that_cannot_catch_up_fails(reopen: Opener) -> None:
    reader, writer = warmed(reopen)
    writer.store("Account balance: 4,000 EUR", user_id="alice")
    reader.context.consistency_timeout = 0.0
    with pytest.raises(NotCaughtUpError):
        reader.retrieve("balance", user_id="alice")
    assert len(contents(reader, consistent=False)) == 2  # what is embedded so far


def test_a_deleted_event_is_never_served_from_the_index(reopen: Opener) -> None:
    reader, writer = warmed(reopen)
    [stored, _] = events_of_type(writer, "alice", ev.STORED)
    writer.delete_event(stored.event_id, user_id="alice")
    for options in ({}, {"consistent": False}, {"include_superseded": True}):
        assert contents(reader, **options) == ["Account balance: 1,247.38 EUR"]


def test_forget_empties_the_index(reopen: Opener) -> None:
    reader, writer = warmed(reopen)
    writer.forget("alice")
    assert contents(reader) == []
    assert contents(reader, consistent=False) == []
    assert reader.context.retrieval_cache.cached_nodes == 0
    remember(writer, "Account balance: 5 EUR")
    assert contents(reader) == ["Account balance: 5 EUR"]


def test_changes_by_a_rebuild_job_are_seen(reopen: Opener) -> None:
    reader, writer = warmed(reopen)
    trigger = writer.add_resonance_trigger(user_id="alice", keyword="850", weight=4.0)
    writer.remove_resonance_trigger(trigger, user_id="alice")
    assert contents(reader)[0] == "Account balance: 850 EUR"  # similarity alone
    boosts = [
        r.components.trigger_boost for r in reader.retrieve("balance", user_id="alice").results
    ]
    assert boosts == [0.0, 0.0]
    # Erasing the removal leaves the trigger removed until the rebuild job
    # replays the stream, which brings the trigger back.
    [removal] = events_of_type(writer, "alice", ev.TRIGGER_REMOVED)
    writer.delete_event(removal.event_id, user_id="alice")
    assert reader.retrieve("balance", user_id="alice").results[0].components.trigger_boost == 0.0
    assert writer.context.rebuilder.run_pending() > 0
    best = reader.retrieve("balance", user_id="alice").results[0]
    assert best.node.content == "Account balance: 850 EUR"
    assert best.components.trigger_boost == 2.0


def test_corrections_by_another_client_are_seen(reopen: Opener) -> None:
    reader, writer = warmed(reopen)
    old, new = (n for n in writer.retrieve("balance", user_id="alice").nodes)
    writer.supersede(old.id, new.id, user_id="alice")
    assert contents(reader) == [new.content]
    writer.add_negative_attractor(new.content, user_id="alice")
    [result] = reader.retrieve("balance", user_id="alice").results
    assert result.components.attractor_penalty == pytest.approx(0.5)


def test_a_subject_without_embedded_nodes_gets_nothing(reopen: Opener) -> None:
    memory = reopen()
    memory.add_resonance_trigger(user_id="alice", keyword="balance")
    assert contents(memory) == []
    memory.store("Account balance: 1 EUR", user_id="alice")
    assert contents(memory, consistent=False) == []  # not embedded yet
    assert contents(memory) == ["Account balance: 1 EUR"]


def test_changing_a_returned_node_does_not_change_the_index(reopen: Opener) -> None:
    memory = reopen()
    remember(memory, "Account balance: 850 EUR", meta={"confidence": 0.5})
    [first] = memory.retrieve("balance", user_id="alice").nodes
    first.meta["confidence"] = 0.0
    [again] = memory.retrieve("balance", user_id="alice").nodes
    assert again.meta == {"confidence": 0.5}


def test_callers_see_only_their_own_nodes_through_the_index(reopen: Opener) -> None:
    reader, writer = warmed(reopen)
    remember(writer, "Account balance: 99 EUR", user_id="bob")
    assert contents(reader, user="bob") == ["Account balance: 99 EUR"]
    assert "Account balance: 99 EUR" not in contents(reader)


# -- the bound ------------------------------------------------------------------------------


def test_the_cache_keeps_at_most_its_node_budget(reopen: Opener) -> None:
    memory = reopen()
    memory.context.retrieval_cache.max_nodes = 3
    for user, count in (("alice", 2), ("bob", 1), ("carol", 2), ("dave", 4)):
        for i in range(count):
            remember(memory, f"{user} balance {i}", user_id=user)
    cache = memory.context.retrieval_cache
    sizes = []
    for user in ("alice", "bob", "carol", "alice", "dave"):
        assert (
            len(contents(memory, user=user)) == {"alice": 2, "bob": 1, "carol": 2, "dave": 4}[user]
        )
        sizes.append(cache.cached_nodes)
    # alice and bob fit; carol evicts alice; alice needs bob and carol gone;
    # dave (4 > 3) is scored but never kept.
    assert sizes == [2, 3, 3, 2, 2]
    assert cache.subjects == [queries.cache_key(memory.context, "alice")]


def test_a_subjects_nodes_and_vectors_are_read_in_store_order_by_key_lookups(
    memory: MemoryClient,
) -> None:
    """The index's load reads the stream's nodes by their key and finds each one's event
    and vector by key: its cost is linear in the nodes whatever the planner knows (on
    SQLite, without table statistics, a join of nodes to vectors alone read the stream's
    nodes once per vector)."""
    events = [memory.store(f"Memory number {i}", user_id="order") for i in range(6)]
    memory.retrieve("memory", user_id="order")  # vectors caught up
    ctx = memory.context
    head = ctx.store.head(ctx.namespace, "order")
    assert head is not None
    with ctx.store.reading() as view:
        rows = VectorStore(view.connection).node_vectors(head.stream.stream_id)
        if view.connection.dialect.name == "sqlite":
            statement = _stream_node_vectors.compile(view.connection)
            plan = " | ".join(
                str(step[-1])
                for step in view.connection.exec_driver_sql(
                    f"EXPLAIN QUERY PLAN {statement}",
                    tuple(statement.construct_params({"stream_id": 1}).values()),
                )
            )
            # The first table is read by the stream; every later one by a whole key.
            later = plan.split(" | ")[1:]
            assert all(
                "(stream_id=?)" not in step for step in later if step.startswith("SEARCH")
            ), plan
            assert not any(step.startswith("SCAN") for step in later), plan
    assert [r.event_id for r in rows] == events
