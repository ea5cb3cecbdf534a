"""``oblivio bench memory --section reembed``: how fast a re-embedding job moves a store.

A store of its own, made with the ``hashing`` embedder, is loaded with many
subjects' memories (batched, their vectors written by the projection; not
timed).  Each round then starts a job that moves the whole store to another
wordllama size (``wordllama`` then ``wordllama:128``, in turn, so every
round embeds every node with wordllama) and times
``VectorRebuilder.run_pending`` working it to its end: reading and
decrypting the nodes, embedding them, sealing and writing the new vectors,
switching each subject and purging its old vectors.  The figure is nodes
per second of wall time; the process's CPU time is shown beside it, because
on a shared machine the two differ most.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from oblivio.client import MemoryClient
from oblivio_bench.figures import Figure, Section, at_least
from oblivio_bench.loading import check_applied, load_subject, wait_until_visible
from oblivio_bench.systems import BenchError
from workers.reembed import RebuildRequest

Progress = Callable[[str], None]

#: At --scale 1: nodes in all, over this many subjects.
REEMBED_NODES, REEMBED_SUBJECTS = 20_000, 20
#: The store's first embedder: cheap to load with, and not the one any round moves to.
REEMBED_FROM = "hashing"
#: Each round's target, in turn: wordllama at two sizes (the same work per node).
REEMBED_TARGETS = ("wordllama", "wordllama:128")
TARGET_NODES_PER_S = 2_000.0
SEED = 1618


@dataclass(frozen=True)
class ReembedRound:
    """One job: what it embedded, in how much wall and CPU time."""

    embedder: str
    nodes: int
    seconds: float
    cpu_seconds: float

    @property
    def nodes_per_s(self) -> float:
        return self.nodes / self.seconds

    @property
    def cpu_nodes_per_s(self) -> float:
        return self.nodes / self.cpu_seconds

    def to_json(self) -> dict[str, float | str]:
        return {**asdict(self), "nodes_per_s": self.nodes_per_s}


def load_store(client: MemoryClient, nodes: int, subjects: int) -> None:
    """Give ``subjects`` subjects ``nodes`` memories in all, with their vectors (untimed)."""
    rng = random.Random(SEED)
    per_subject, extra = divmod(nodes, subjects)
    for i in range(subjects):
        load_subject(client.context, f"reembed-{i}", per_subject + (1 if i < extra else 0), rng)
    wait_until_visible(client.context, nodes)
    check_applied(client.context.runner.run_pending(), nodes)


def measure_reembed(
    client: MemoryClient, nodes: int, subjects: int, rounds: int, progress: Progress
) -> list[ReembedRound]:
    """Load the store, then time one whole-store re-embedding job per round."""
    progress(f"reembed   loading {nodes:,} memories of {subjects} subjects ({REEMBED_FROM})")
    load_store(client, nodes, subjects)
    results = []
    for round_no in range(1, rounds + 1):
        target = REEMBED_TARGETS[(round_no - 1) % len(REEMBED_TARGETS)]
        result = time_job(client, target, nodes)
        results.append(result)
        progress(
            f"reembed   round {round_no}/{rounds}  to {target}: {result.nodes:,} nodes "
            f"{result.nodes_per_s:8,.0f} nodes/s (CPU {result.cpu_nodes_per_s:,.0f}/s)"
        )
    return results


def time_job(client: MemoryClient, target: str, nodes: int) -> ReembedRound:
    """Start a job to ``target`` and time working it to its end; check it embedded all."""
    rebuilder = client.context.reembedder
    rebuild_id = rebuilder.start(RebuildRequest(embedder=target))
    cpu, wall = time.process_time(), time.perf_counter()
    rebuilder.run_pending()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done = rebuilder.progress(rebuild_id)
    if done.status != "done" or done.nodes_embedded != nodes:
        raise BenchError(
            f"the re-embedding job ended {done.status!r} with {done.nodes_embedded:,} "
            f"of {nodes:,} nodes embedded"
        )
    return ReembedRound(target, done.nodes_embedded, wall, cpu)


def reembed_section(rounds: Sequence[ReembedRound]) -> Section:
    return Section(
        "re-embedding job (oblivio rebuild vectors --all --embedder …)",
        [
            Figure(
                "reembed_nodes_per_s",
                "re-embedded nodes/s (wall)",
                statistics.median(r.nodes_per_s for r in rounds),
                "nodes/s",
                at_least(TARGET_NODES_PER_S),
            ),
            Figure(
                "reembed_cpu_nodes_per_s",
                "  per CPU second of this process",
                statistics.median(r.cpu_nodes_per_s for r in rounds),
                "nodes/s",
            ),
        ],
        [
            f"from {REEMBED_FROM} to wordllama (256 and 128 dimensions in turn), one "
            "worker, the whole store per round; median over rounds",
        ],
    )
