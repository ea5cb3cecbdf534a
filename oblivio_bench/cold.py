"""``oblivio bench memory --section cold``: the first ``retrieve`` of a fresh process.

One subject grows to 10,000, 30,000 and 100,000 memories (times ``--scale``;
loaded through the batched command path, untimed), its vectors are caught up
(timed: the vector catch-up figure of that many memories on this backend) and
the likely-update detector judges them (untimed; a consistent ``retrieve``
waits for it).  At each size ``--rounds`` pairs of fresh processes
(``python -m oblivio_bench.cold``) each open a client on the store and report,
apart: their imports, opening the client, loading the embedding model (one
embedding), the first ``retrieve`` (which loads the subject's retrieval index)
and a second one (warm).  The two processes of a pair alternate: one finds the
subject's index image (projections.index_image) that the bench process or the
previous probe left, the other finds none (the bench deletes it first), so it
builds the index from the rows as a store without images does, and its close
writes the image again.  The figures are the medians over the processes of
each kind.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from oblivio_bench.figures import Figure, Section

Progress = Callable[[str], None]

#: Subject sizes at --scale 1.
COLD_SIZES = (10_000, 30_000, 100_000)
COLD_SUBJECT = "cold-subject"
QUERY = "kalo mine ruza vo"
PARTS = ("imports_s", "open_s", "model_s", "first_retrieve_s", "second_retrieve_s")


@dataclass(frozen=True)
class ColdResult:
    nodes: int
    catch_up_seconds: float
    #: One dict of PARTS per fresh process that found the subject's index image.
    probes: Sequence[dict[str, float]]
    #: The same for the processes that found none (built the index from the rows).
    built: Sequence[dict[str, float]]

    def median(self, part: str, *, built: bool = False) -> float:
        return statistics.median(p[part] for p in (self.built if built else self.probes))

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "catch_up_seconds": self.catch_up_seconds,
            "probes": list(self.probes),
            "built": list(self.built),
            **{f"median_{part}": self.median(part) for part in PARTS},
            **{f"median_built_{part}": self.median(part, built=True) for part in PARTS},
        }


def measure_cold(
    client: Any, settings: Any, sizes: Sequence[int], rounds: int, progress: Progress
) -> list[ColdResult]:
    """Grow one subject to each size and probe its cold start there."""
    from oblivio_bench.loading import check_applied, load_subject, wait_until_visible

    rng = random.Random(4242)
    results, loaded = [], 0
    for size in sizes:
        progress(f"cold {size:,}: storing {size - loaded:,} more memories (batched, untimed)")
        load_subject(client.context, COLD_SUBJECT, size - loaded, rng)
        wait_until_visible(client.context, size - loaded)
        started = time.perf_counter()
        applied = client.context.runner.run_pending()
        catch_up = time.perf_counter() - started
        check_applied(applied, size - loaded)
        client.context.updates.run_pending()
        client.retrieve(QUERY, user_id=COLD_SUBJECT)  # the subject in this process's cache
        client.context.retrieval.save_images()  # what its close leaves
        loaded = size
        progress(f"cold {size:,}: vectors caught up in {catch_up:,.1f} s; probing")
        probes, built = [], []
        for _ in range(rounds):
            probes.append(probe(settings))
            drop_image(client)
            built.append(probe(settings))  # its close writes the image again
        result = ColdResult(size, catch_up, probes, built)
        first, model = result.median("first_retrieve_s"), result.median("model_s")
        rows = result.median("first_retrieve_s", built=True)
        progress(
            f"cold {size:,}: first retrieve {first:,.2f} s from the image, "
            f"{rows:,.2f} s from the rows (model apart: {model:,.2f} s)"
        )
        results.append(result)
    return results


def drop_image(client: Any) -> None:
    """Delete the cold subject's index image: the next probe builds from the rows."""
    head = client.context.store.head(client.context.namespace, COLD_SUBJECT)
    with client.context.store.transaction() as tx:
        client.context.retrieval.images.purge(tx.connection, head.stream.stream_id)


def probe(settings: Any) -> dict[str, float]:
    """Run one fresh process on the store of ``settings``; what it measured."""
    # The child's imports are timed from here (wall clock, shared by both processes):
    # the interpreter's start is part of what a cold process pays.
    done = subprocess.run(  # noqa: S603 (this interpreter, our own module)
        [sys.executable, "-m", "oblivio_bench.cold", repr(time.time())],
        input=settings.model_dump_json(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        from oblivio_bench.systems import BenchError

        raise BenchError(f"the cold-start probe failed: {done.stderr.strip()[-2000:]}")
    measured: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def cold_section(results: Sequence[ColdResult], backend: str) -> Section:
    figures: list[Figure] = []
    for r in results:
        nodes = f"{r.nodes:,} nodes"
        figures += [
            Figure(
                f"cold_first_retrieve_{r.nodes}_s",
                f"first retrieve of a fresh process, {nodes} (median)",
                r.median("first_retrieve_s"),
                "s",
            ),
            Figure(
                f"cold_built_first_retrieve_{r.nodes}_s",
                "  without an image (built from the rows, median)",
                r.median("first_retrieve_s", built=True),
                "s",
            ),
            Figure(
                f"cold_image_ratio_{r.nodes}",
                "  from the image / from the rows (medians, same run)",
                r.median("first_retrieve_s") / r.median("first_retrieve_s", built=True),
                "×",
            ),
            Figure(
                f"cold_second_retrieve_{r.nodes}_s",
                "  the second",
                r.median("second_retrieve_s"),
                "s",
            ),
            Figure(
                f"cold_imports_{r.nodes}_s", "  interpreter and imports", r.median("imports_s"), "s"
            ),
            Figure(f"cold_open_{r.nodes}_s", "  opening the client", r.median("open_s"), "s"),
            Figure(
                f"cold_model_{r.nodes}_s",
                "  one embedding (the open loads the model)",
                r.median("model_s"),
                "s",
            ),
            Figure(
                f"cold_catch_up_{r.nodes}_s",
                f"  vector catch-up on {backend} of the memories added up to {nodes}",
                r.catch_up_seconds,
                "s",
            ),
        ]
    return Section(
        "cold start",
        figures,
        [
            "each probe is a fresh process: python -m oblivio_bench.cold",
            "the first retrieve loads the subject's retrieval index (docs/retrieval.md):"
            " from its image, or (alternate probes, the image deleted) from the rows",
        ],
    )


def _probe_main() -> None:
    """In the child: open a client on the store given on stdin and time its first steps."""
    from oblivio.client import MemoryClient
    from oblivio.settings import Settings

    imported = time.perf_counter()
    imports = time.time() - float(sys.argv[1])
    settings = Settings.model_validate_json(sys.stdin.read())
    with MemoryClient(settings=settings) as client:
        opened = time.perf_counter()
        client.context.embedder.embed(["load the model"])
        model = time.perf_counter()
        client.retrieve(QUERY, user_id=COLD_SUBJECT)
        first = time.perf_counter()
        client.retrieve(QUERY, user_id=COLD_SUBJECT)
        second = time.perf_counter()
    print(
        json.dumps(
            {
                "imports_s": imports,
                "open_s": opened - imported,
                "model_s": model - opened,
                "first_retrieve_s": first - model,
                "second_retrieve_s": second - first,
            }
        )
    )


if __name__ == "__main__":
    _probe_main()
