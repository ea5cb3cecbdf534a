"""An embedder served over the OpenAI-compatible ``/v1/embeddings`` API.

OpenAI, Azure-style gateways, Ollama, vLLM and Hugging Face TEI all answer
``POST {base_url}/embeddings`` with ``{"model": ..., "input": [...]}``.  This is
how larger models are used: run one locally behind such a server.  Whatever
the endpoint is, it receives the plaintext of every memory stored and every
query asked (docs/retrieval.md, "What an endpoint receives").
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from typing import Any

import httpx

from projections.embedders import (
    EmbedderUnavailableError,
    EndpointNotConfiguredError,
    EndpointOptions,
)

RETRYABLE = {408, 409, 429, 500, 502, 503, 504}
MAX_BACKOFF_SECONDS = 30.0


class OpenAIEmbedder:
    """Vectors from an OpenAI-compatible embeddings endpoint, batched, with retries.

    The dimension is learnt from one request at construction, which also
    proves the endpoint, key and model work before the process serves anything.
    """

    def __init__(self, model: str, options: EndpointOptions) -> None:
        if options.base_url is None:
            raise EndpointNotConfiguredError(f"openai:{model}: no endpoint is configured")
        self.model = model
        self.options = options
        self.base_url = options.base_url
        headers = {"Content-Type": "application/json"}
        if self.options.api_key:
            headers["Authorization"] = f"Bearer {self.options.api_key}"
        self._http = httpx.Client(
            base_url=self.base_url.rstrip("/"),
            headers=headers,
            timeout=self.options.timeout,
        )
        [probe] = self._request(["dimension probe"])
        self._dimension = len(probe)

    @property
    def name(self) -> str:
        return f"openai-{self.model}-{self._dimension}"[:100]

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        size = self.options.batch_size
        vectors: list[list[float]] = []
        for start in range(0, len(texts), size):
            vectors += self._request(list(texts[start : start + size]))
        return vectors

    def close(self) -> None:
        self._http.close()

    def _request(self, texts: list[str]) -> list[list[float]]:
        """One batch, retried with exponential backoff (and the server's Retry-After)."""
        delay = self.options.backoff
        for attempt in range(self.options.retries + 1):
            try:
                response = self._http.post(
                    "/embeddings", json={"model": self.model, "input": texts}
                )
            except httpx.TransportError as exc:
                failure = f"{type(exc).__name__}: {exc}"
                wait = delay
            else:
                if response.status_code == 200:
                    return _vectors(response.json(), len(texts))
                failure = f"HTTP {response.status_code}: {_message(response)}"
                if response.status_code not in RETRYABLE:
                    break
                wait = _retry_after(response) or delay
            if attempt == self.options.retries:
                break
            time.sleep(min(wait, MAX_BACKOFF_SECONDS) * (1 + random.random() / 10))
            delay *= 2
        raise EmbedderUnavailableError(
            f"embeddings endpoint {self.base_url} (model {self.model!r}): {failure}"
        )


def _vectors(body: Any, expected: int) -> list[list[float]]:
    """The response's vectors in input order, each scaled to unit length."""
    try:
        items = sorted(body["data"], key=lambda item: item["index"])
        vectors = [[float(x) for x in item["embedding"]] for item in items]
    except (KeyError, TypeError, ValueError) as exc:
        raise EmbedderUnavailableError(f"malformed embeddings response: {exc}") from exc
    if len(vectors) != expected or len({len(v) for v in vectors}) > 1:
        raise EmbedderUnavailableError("the embeddings response does not match the request")
    return [_unit(v) for v in vectors]


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


def _message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        return str(error.get("message") if isinstance(error, dict) else error)[:200]
    except ValueError:
        return response.text[:200]
