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
import struct
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

_TOKEN = re.compile(r"[\w']+", re.UNICODE)
# Copying a hash state set up once is about twice as fast as constructing one.
_FEATURE_HASH = hashlib.blake2b(digest_size=8)
# A feature's bucket is the digest's first 4 bytes (big-endian) modulo the
# dimension; its sign is the low bit of the 5th byte.
_BUCKET_AND_SIGN = struct.Struct(">IB")


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
    return normalise_sparse(vector, range(len(vector)))


def normalise_sparse(vector: Sequence[float], touched: Iterable[int]) -> list[float]:
    """``vector`` scaled to unit length, where only the ``touched`` indexes may be non-zero.

    The result is bit for bit the dense one: adding 0.0 to a sum and dividing
    0.0 change nothing, so the zeros can be skipped as long as the rest are
    summed in index order.
    """
    indexes = sorted(set(touched))
    norm = math.sqrt(sum([vector[i] * vector[i] for i in indexes]))
    if not norm:
        return list(vector)
    unit = [0.0] * len(vector)
    for i in indexes:
        unit[i] = vector[i] / norm
    return unit


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
        touched: list[int] = []
        # Bigrams weigh less: they sharpen matches without drowning words.
        for weight, features in ((1.0, words), (0.5, pairs)):
            for feature in features:
                state = _FEATURE_HASH.copy()
                state.update(feature.encode())
                bucket, sign = _BUCKET_AND_SIGN.unpack_from(state.digest())
                bucket %= dimension
                vector[bucket] += weight if sign & 1 else -weight
                touched.append(bucket)
        return normalise_sparse(vector, touched)


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
