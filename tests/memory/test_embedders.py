"""The default embedder's vectors never change between releases.

Stored vectors and the query vectors of later releases must come from the
same function, or retrieval quietly degrades; the digests below were taken
from the first release's implementation (float64 values, little-endian).
"""

from __future__ import annotations

import hashlib
import struct

import pytest

from projections.embedders import HashingEmbedder

TEXTS = ["Alice lives in Berlin", "İstanbul ΣΑΣ straße, it's 42", "", "ka lo mi ka lo mi"]
FIRST_RELEASE_DIGESTS = {
    256: "758de6257dff5f80c83aa262fa3961e2bb1daafb8548c72e0ebaf48495fcd020",
    384: "def210cb66e726cd85ac7bad9bdc49bb0fa4705bb14a3767ac4c9ca93805e403",
}


@pytest.mark.parametrize("dimension", sorted(FIRST_RELEASE_DIGESTS))
def test_hashing_embedder_gives_the_first_release_vectors(dimension: int) -> None:
    vectors = HashingEmbedder(dimension).embed(TEXTS)
    blob = b"".join(struct.pack(f"<{dimension}d", *v) for v in vectors)
    assert hashlib.sha256(blob).hexdigest() == FIRST_RELEASE_DIGESTS[dimension]


def test_hashing_embedder_vectors_are_unit_length_or_zero() -> None:
    [text, empty] = HashingEmbedder().embed(["Bob works in Paris", ""])
    assert abs(sum(v * v for v in text) - 1.0) < 1e-9
    assert empty == [0.0] * 256
