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
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

_TOKEN = re.compile(r"[\w']+", re.UNICODE)


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
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector] if norm else list(vector)


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
        vector = [0.0] * self._dimension
        words = [w.lower() for w in _TOKEN.findall(text)]
        features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
        for feature in features:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "big") % self._dimension
            sign = 1.0 if digest[4] & 1 else -1.0
            # Bigrams weigh less: they sharpen matches without drowning words.
            vector[bucket] += sign * (1.0 if " " not in feature else 0.5)
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
