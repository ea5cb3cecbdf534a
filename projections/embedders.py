"""Embedders: text to unit vectors.

The default needs no download: it hashes word unigrams and bigrams into a
fixed number of signed buckets (the "hashing trick"), so equal texts always
get equal vectors and texts sharing words get similar ones.  A
sentence-transformers model can be used instead when the optional extra is
installed and the model is already on disk.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import operator
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

_TOKEN = re.compile(r"[\w']+", re.UNICODE)
_blake2b = hashlib.blake2b
_SIGN_BIT = 1 << 24  # the low bit of the digest's 5th byte (of 8, big-endian)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one fixed dimension."""

    @property
    def name(self) -> str:
        """Identifies model and parameters; stored next to each vector."""
        ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def normalise(vector: Sequence[float]) -> list[float]:
    # map() with operator functions runs the same float operations, in the
    # same order, as the obvious comprehensions, at a fraction of the cost.
    norm = math.sqrt(sum(map(operator.mul, vector, vector)))
    if not norm:
        return list(vector)
    return list(map(operator.truediv, vector, itertools.repeat(norm, len(vector))))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine of two vectors (both assumed unit length, as embedders return)."""
    return sum(x * y for x, y in zip(a, b, strict=True))


class HashingEmbedder:
    """Deterministic feature-hashing embedder over lower-cased words and word pairs."""

    def __init__(self, dimension: int = 256) -> None:
        self._dimension = dimension

    @property
    def name(self) -> str:
        return f"hashing-v1-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed_one(text) for text in texts]

    def _embed_one(self, text: str) -> list[float]:
        dimension, vector = self._dimension, [0.0] * self._dimension
        words = [w.lower() for w in _TOKEN.findall(text)]
        pairs = [f"{a} {b}" for a, b in itertools.pairwise(words)]
        # Bigrams weigh less: they sharpen matches without drowning words.
        for weight, features in ((1.0, words), (0.5, pairs)):
            for feature in features:
                # Bucket: the digest's first 4 bytes; sign: the low bit of the 5th.
                digest = int.from_bytes(_blake2b(feature.encode(), digest_size=8).digest(), "big")
                vector[(digest >> 32) % dimension] += weight if digest & _SIGN_BIT else -weight
        return normalise(vector)


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from local files only (optional extra)."""

    def __init__(self, model_name_or_path: str) -> None:
        from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]

        # local_files_only: oblivio never downloads models at run time.
        self._model = SentenceTransformer(model_name_or_path, local_files_only=True)
        self._name = f"st:{model_name_or_path}"

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return int(self._model.get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._model.encode(list(texts), normalize_embeddings=True)
        return [list(map(float, v)) for v in vectors]
