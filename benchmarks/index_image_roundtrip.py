"""The floor of a cold start from an index image, without a database (not a benchmark command).

``python benchmarks/index_image_roundtrip.py NODES [ROUNDS]`` builds a retrieval index
of NODES synthetic memories (invented words, 256-dimensional random unit vectors,
sessions of 20, a small metadata dict each), then times, ROUNDS times: encoding and
sealing its image (what the writer thread does) and unsealing, decoding and
restoring it (what a cold process does after the one statement that reads the
chunks).  Prints the median of each step and the image's size.

    python benchmarks/index_image_roundtrip.py 100000 3
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np

from eventstore import SubjectCipher
from projections import index_image
from projections.model import LifecycleState, Node, NodeType, Scope, SourceType
from projections.retrieval_index import SubjectIndex
from projections.scoring import ScoringConfig
from projections.storage.image_store import StoredImage

WORDS = [f"w{i}" for i in range(20_000)]


def synthetic_index(count: int) -> SubjectIndex:
    rng, start = random.Random(1), datetime(2024, 1, 1, tzinfo=UTC)
    nodes = [
        Node(
            id=uuid.uuid4(),
            event_id=uuid.uuid4(),
            content=" ".join(rng.choice(WORDS) for _ in range(15)),
            node_type=NodeType.NOTE,
            scope=Scope.PERSONAL,
            source_type=SourceType.USER_STATED,
            lifecycle=LifecycleState.ACTIVE,
            confidence_base=0.7,
            salience_base=0.5,
            reinforcement_boost=0.0,
            reinforcement_count=0,
            created_at=start + timedelta(seconds=i),
            updated_at=start + timedelta(seconds=i),
            occurred_at=start + timedelta(seconds=i),
            session_id=f"s{i // 20}",
            meta={"n": i},
        )
        for i in range(count)
    ]
    vectors = np.random.default_rng(1).standard_normal((count, 256)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = SubjectIndex(ScoringConfig())
    index.add(nodes, vectors)
    return index


def main(count: int, rounds: int) -> None:
    index = synthetic_index(count)
    cipher, bound, image_id = SubjectCipher(os.urandom(32), 1), os.urandom(32), uuid.uuid4()
    writes, reads, size = [], [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        plain = index_image.encode(index.parts())
        sealed = index_image.seal(cipher, bound, image_id, plain)
        writes.append(time.perf_counter() - started)
        size = sum(len(chunk) for chunk in sealed)
        stored = StoredImage(1, image_id, sealed, len(sealed))
        started = time.perf_counter()
        opened = index_image.unseal(cipher, bound, stored)
        assert opened is not None
        with index_image._collection_paused():  # as IndexImages.load does
            SubjectIndex.restore(index_image.decode(opened), ScoringConfig())
        reads.append(time.perf_counter() - started)
    print(f"{count:,} nodes, image {size / 1e6:.0f} MB in {len(sealed)} chunks")
    print(f"encode + seal: median {statistics.median(writes):.2f} s over {rounds}")
    print(f"unseal + decode + restore: median {statistics.median(reads):.2f} s over {rounds}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3)
