"""The OpenAI-compatible embedder against a small server speaking ``/v1/embeddings``.

The server embeds with the hashing embedder (so answers are checkable), insists on
its API key and model, and can be told to answer 429 (with ``Retry-After``) or 503
for a number of requests: what OpenAI, Ollama, vLLM or TEI do when busy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from oblivio import MemoryClient
from oblivio.settings import Settings
from projections.embedders import (
    EmbedderOptions,
    EmbedderUnavailableError,
    EndpointNotConfiguredError,
    EndpointOptions,
    HashingEmbedder,
    resolve_embedder,
)
from tests._json_server import json_server

KEY = "sk-test-123"
MODEL = "nomic-embed-text"
REFERENCE = HashingEmbedder(48)


@dataclass
class Endpoint:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    failures: list[tuple[int, dict[str, str]]] = field(default_factory=list)  # answered first


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    state = Endpoint("")

    def respond(path: str, headers: Any, body: Any) -> tuple[int, object, dict[str, str]]:
        state.requests.append(body)
        if path != "/v1/embeddings":
            return 404, {"error": {"message": "no such route"}}, {}
        if headers.get("Authorization") != f"Bearer {KEY}":
            return 401, {"error": {"message": "Incorrect API key provided"}}, {}
        if state.failures:
            status, extra = state.failures.pop(0)
            return status, {"error": {"message": "busy"}}, extra
        if body.get("model") != MODEL:
            return 404, {"error": {"message": f"model {body.get('model')}"}}, {}
        vectors = REFERENCE.embed(body["input"])
        data = [
            {"object": "embedding", "index": i, "embedding": [3.0 * x for x in v]}
            for i, v in reversed(list(enumerate(vectors)))  # any order: index says
        ]
        return 200, {"object": "list", "data": data, "model": MODEL}, {}

    with json_server(respond) as url:
        state.url = url
        yield state


def options(endpoint: Endpoint, **overrides: Any) -> EmbedderOptions:
    values = {"base_url": endpoint.url, "api_key": KEY, "batch_size": 4, "backoff": 0.01}
    return EmbedderOptions(endpoint=EndpointOptions(**{**values, **overrides}))


def same_vectors(got: list[list[float]], expected: list[list[float]]) -> bool:
    return len(got) == len(expected) and all(
        g == pytest.approx(e) for g, e in zip(got, expected, strict=True)
    )


def test_batches_keep_order_and_come_back_unit_length(endpoint: Endpoint) -> None:
    embedder = resolve_embedder(f"openai:{MODEL}", options(endpoint))
    texts = [f"text number {i}" for i in range(10)]
    vectors = embedder.embed(texts)
    assert (embedder.name, embedder.dimension) == (f"openai-{MODEL}-48", 48)
    assert same_vectors(vectors, REFERENCE.embed(texts))
    # One probe at start, then ceil(10 / 4) batches.
    assert [len(r["input"]) for r in endpoint.requests] == [1, 4, 4, 2]


def test_rate_limits_and_server_errors_are_retried_with_backoff(endpoint: Endpoint) -> None:
    embedder = resolve_embedder(f"openai:{MODEL}", options(endpoint))
    endpoint.failures += [(429, {"Retry-After": "0"}), (503, {}), (429, {})]
    assert same_vectors(embedder.embed(["a", "b"]), REFERENCE.embed(["a", "b"]))
    assert len(endpoint.requests) == 1 + 4


def test_an_endpoint_that_stays_busy_fails_clearly(endpoint: Endpoint) -> None:
    embedder = resolve_embedder(f"openai:{MODEL}", options(endpoint, retries=2))
    endpoint.failures += [(429, {"Retry-After": "0"})] * 3
    with pytest.raises(EmbedderUnavailableError, match="HTTP 429: busy"):
        embedder.embed(["a"])
    assert len(endpoint.requests) == 1 + 3


@pytest.mark.parametrize(
    ("spec", "overrides", "message"),
    [
        (f"openai:{MODEL}", {"api_key": "wrong"}, "HTTP 401: Incorrect API key"),
        ("openai:no-such-model", {}, "HTTP 404: model no-such-model"),
        (f"openai:{MODEL}", {"base_url": "http://127.0.0.1:9/v1", "retries": 1}, "ConnectError"),
    ],
)
def test_a_bad_key_model_or_address_fails_at_start(
    endpoint: Endpoint, spec: str, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(EmbedderUnavailableError, match=message):
        resolve_embedder(spec, options(endpoint, **overrides))


def test_a_store_served_by_an_endpoint_end_to_end(endpoint: Endpoint, tmp_path: Path) -> None:
    """Settings name the model and the endpoint; store, retrieve and a later process agree."""
    settings = Settings.from_env(
        {
            "OBLIVIO_DATA_DIR": str(tmp_path / "data"),
            "OBLIVIO_EMBEDDER": f"openai:{MODEL}",
            "OBLIVIO_OPENAI_BASE_URL": endpoint.url,
            "OBLIVIO_OPENAI_API_KEY": KEY,
        }
    )
    with MemoryClient(settings=settings) as client:
        client.store("Alice works as a nurse in Lyon", user_id="alice")
        client.store("Alice loves olives", user_id="alice")
        [top, *_] = client.retrieve("nurse Lyon", user_id="alice").results
        assert top.node.content == "Alice works as a nurse in Lyon"
    sent = [text for r in endpoint.requests for text in r["input"]]
    assert "Alice works as a nurse in Lyon" in sent  # the endpoint sees the plaintext
    with MemoryClient(settings=settings.model_copy(update={"embedder": None})) as later:
        assert later.context.embedder.name == f"openai-{MODEL}-48"


def test_sentence_transformers_loads_a_local_model_only() -> None:
    pytest.importorskip(
        "sentence_transformers",
        reason="the [sentence-transformers] extra (torch) is not installed in this environment",
    )
    with pytest.raises(EmbedderUnavailableError, match="cannot load"):
        resolve_embedder("sentence-transformers:/nonexistent/model-dir")


def test_without_an_endpoint_nothing_is_contacted() -> None:
    """No base URL configured: refused at once, naming the setting; OpenAI's own endpoint
    is not assumed (it would receive every memory)."""
    assert Settings().openai_base_url is None
    with pytest.raises(EndpointNotConfiguredError, match="OBLIVIO_OPENAI_BASE_URL"):
        resolve_embedder(f"openai:{MODEL}", Settings().embedder_options())
    with pytest.raises(ValueError, match="openai_base_url"):
        Settings(openai_base_url="api.openai.com/v1")
