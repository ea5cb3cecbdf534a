"""Responses a route writes itself rather than returning them for FastAPI to check.

A sync route's return value is validated against its ``response_model`` in a
hand-off to the thread pool of its own, after the one that ran the route: on
``POST /v1/events`` that is a third of the thread-pool round trips of a request
(measured with py-spy, benchmarks/http_server_ab.py).  A route whose answer is
built from a model it has just constructed (so already valid) writes it with
``model_response`` in the route's own thread; the model stays the declared
``response_model``, so the published OpenAPI is unchanged.

Retrieve's response is encoded with orjson straight from the ranked dataclasses.

``RetrieveResponse(results=[ScoredOut.of(r) ...]).model_dump_json()`` builds
and validates a pydantic model per node, then serialises them: about a tenth
of the server's GIL time on a retrieve of 10 nodes (measured with py-spy).
``retrieve_json`` writes the same bytes from plain dicts.  The model stays
the route's declared response model, so the published OpenAPI is unchanged,
and a test holds the two encodings byte-identical (field order, ``Z`` for UTC, floats for float
fields even when a value arrives as an int or a numpy scalar).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson
from fastapi import Response
from pydantic import BaseModel

from oblivio.json_text import OPTIONS as _OPTIONS
from projections.model import Node, ScoredNode, node_labels

JSON = "application/json"


def model_response(model: BaseModel, status_code: int = 200) -> Response:
    """``model`` as the JSON body FastAPI would write for it, not validated again."""
    return Response(model.model_dump_json(), status_code=status_code, media_type=JSON)


def retrieve_json(
    query: str,
    results: Sequence[ScoredNode],
    as_of: datetime | None = None,
    restricted: bool = False,
) -> bytes:
    """The body of ``RetrieveResponse`` for ``query``, its ranked ``results``, the
    moment they were ranked as of, and whether processing of the person is restricted."""
    body = {
        "query": query,
        "results": [_scored(r) for r in results],
        "as_of": as_of,
        "restricted": restricted,
    }
    return orjson.dumps(body, option=_OPTIONS)


def _scored(scored: ScoredNode) -> dict[str, Any]:
    components = {name: float(value) for name, value in vars(scored.components).items()}
    return {"node": node_dict(scored.node), "score": float(scored.score), "components": components}


def node_dict(node: Node) -> dict[str, Any]:
    """``NodeOut``'s fields, in its order and with its types, for orjson."""
    return {
        **node_labels(node),
        "lifecycle": node.lifecycle.value,
        "confidence_base": float(node.confidence_base),
        "salience_base": float(node.salience_base),
        "reinforcement_boost": float(node.reinforcement_boost),
        "reinforcement_count": int(node.reinforcement_count),
        "created_at": node.created_at,
        "updated_at": node.updated_at,
        "last_reinforced_at": node.last_reinforced_at,
        "superseded_by": node.superseded_by,
        "session_id": node.session_id,
        "meta": node.meta,
        "archived_at": node.archived_at,
        "occurred_at": node.occurred_at,
        "valid_to": node.valid_to,
    }
