"""What ``as_of``, filters and a named day add to ``rank()``: run under callgrind, subtract a
run of none.

One subject index of 10,000 nodes (the time section's memories, effective over ten
years, two metadata keys; random unit vectors of 256 dimensions), then ``N`` ranks of
one kind (plain, as_of or filters, as ``oblivio bench memory --section time`` asks
them; dated: a plain query naming a day of those ten years, which ranking holds as a
term, see projections.dates).  The index is the same in every run, so
``(instructions(N) - instructions(0)) / N`` is one rank's cost, repeatable on a loaded
machine::

    valgrind --tool=callgrind python benchmarks/time_filter_rank.py plain 0
    valgrind --tool=callgrind python benchmarks/time_filter_rank.py plain 30
    valgrind --tool=callgrind python benchmarks/time_filter_rank.py as_of 30
    valgrind --tool=callgrind python benchmarks/time_filter_rank.py filters 30
    valgrind --tool=callgrind python benchmarks/time_filter_rank.py dated 30

Without callgrind, a third argument ``cpu`` prints the p50 and p99 of each rank's CPU
time in the ranking thread (time spent waiting for a core is not in it)::

    python benchmarks/time_filter_rank.py dated 300 cpu
"""

from __future__ import annotations

import random
import sys
import time
import uuid
from datetime import UTC, datetime

import numpy as np

from oblivio_bench import time_filters as tf
from oblivio_bench.figures import percentile
from oblivio_bench.loading import memory_text, query_text
from projections.model import Node, NodeType, Scope, SourceType, new_node
from projections.retrieval_index import NodeFilter, SubjectIndex, rank
from projections.scoring import ScoringConfig

NODES, DIMENSIONS = 10_000, 256


def node(rng: random.Random, i: int) -> Node:
    return new_node(
        id=uuid.UUID(int=i + 1),
        event_id=uuid.UUID(int=NODES + i + 1),
        content=memory_text(rng),
        node_type=NodeType.FACT,
        scope=Scope.PERSONAL,
        source_type=SourceType.USER_STATED,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        occurred_at=tf._moment(rng),
        meta={"topic": rng.choice(tf.TOPICS), "source": rng.choice(tf.SOURCES)},
    )


def main(kind: str, queries: int, timed: bool = False) -> None:
    rng = random.Random(5)
    nodes = [node(rng, i) for i in range(NODES)]
    vectors = np.random.default_rng(5).standard_normal((NODES, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = SubjectIndex(ScoringConfig())
    index.add(nodes, vectors)
    now, probe = datetime(2026, 6, 1, tzinfo=UTC), vectors[0].tolist()
    cpu_ms = []
    for _ in range(queries):
        asked = tf._filters(rng, "plain" if kind == "dated" else kind)
        wanted = NodeFilter(
            as_of=asked.get("as_of"),
            occurred_since=asked.get("occurred_since"),
            occurred_until=asked.get("occurred_until"),
            meta=asked.get("meta"),
        )
        query = query_text(rng)
        if kind == "dated":
            query += f" on {tf._moment(rng):%d %B %Y}"
        started = time.thread_time_ns()
        if not rank(index, query, probe, now, wanted, tf.TIME_LIMIT):
            raise SystemExit("a rank returned nothing")
        cpu_ms.append((time.thread_time_ns() - started) / 1e6)
    if timed:
        p50, p99 = percentile(cpu_ms, 50), percentile(cpu_ms, 99)
        print(f"{kind}: CPU p50 {p50:.2f} ms, p99 {p99:.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["cpu"])
