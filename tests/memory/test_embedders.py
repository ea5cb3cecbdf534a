"""The default embedder's vectors never change between releases.

Stored vectors and the query vectors of later releases must come from the
same function, or retrieval quietly degrades; the digests below were taken
from the first release's implementation (float64 values, little-endian).
"""

from __future__ import annotations

import hashlib
import logging
import socket
import struct
from pathlib import Path

import pytest

from projections.embedders import (
    HashingEmbedder,
    UnknownEmbedderError,
    WordLlamaEmbedder,
    cosine,
    resolve_embedder,
)

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


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every attempt to resolve a host or open a connection fails (and is recorded)."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def test_wordllama_loads_and_embeds_from_the_wheel_with_the_network_blocked(
    no_network: list[object], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # An empty home: no download cache to fall back on either.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    embedder = resolve_embedder("wordllama")
    nurse, profession, pizza, empty = embedder.embed(
        ["I work as a nurse", "What is my profession?", "I love pizza with olives", ""]
    )
    assert embedder.name == "wordllama-l2_supercat-256"
    assert embedder.dimension == len(nurse) == 256
    assert abs(sum(v * v for v in nurse) - 1.0) < 1e-5
    assert empty == [0.0] * 256
    # A paraphrase beats an unrelated text that the hashing embedder cannot tell apart.
    assert cosine(profession, nurse) > cosine(profession, pizza) + 0.1
    assert no_network == []


def test_wordllama_does_not_configure_the_root_logger() -> None:
    handlers = list(logging.getLogger().handlers)
    WordLlamaEmbedder(64)
    assert logging.getLogger().handlers == handlers


@pytest.mark.parametrize(
    ("spec", "name", "dimension"),
    [
        ("wordllama", "wordllama-l2_supercat-256", 256),
        ("wordllama:128", "wordllama-l2_supercat-128", 128),
        (" WordLlama : 64 ", "wordllama-l2_supercat-64", 64),
        ("hashing", "hashing-v1-256", 256),
        ("hashing:384", "hashing-v1-384", 384),
    ],
)
def test_embedders_resolve_by_name(spec: str, name: str, dimension: int) -> None:
    embedder = resolve_embedder(spec)
    assert (embedder.name, embedder.dimension) == (name, dimension)
    assert len(embedder.embed(["a few words"])[0]) == dimension


@pytest.mark.parametrize("spec", ["word2vec", "", "hashing:0", "hashing:wide", "wordllama:100"])
def test_a_bad_embedder_name_is_a_clear_error(spec: str) -> None:
    with pytest.raises(UnknownEmbedderError) as raised:
        resolve_embedder(spec)
    assert isinstance(raised.value, ValueError)
