"""Retrieve's response encoded with orjson (``oblivio.http.encoding``).

The route still declares ``RetrieveResponse``; these tests hold the orjson
bytes identical to what that model would serialise, on real retrieve results
and on the value types that differ between the two encoders.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np

from oblivio.http import schemas as s
from oblivio.http.encoding import retrieve_json
from oblivio.memory import commands, queries
from projections.model import (
    ScoreComponents,
    ScoredNode,
)
from tests.http.conftest import ALICE, World
from tests.memory._support import a_fact


def pydantic_json(query: str, results: list[ScoredNode]) -> bytes:
    """What the route returned before: the declared model, serialised by pydantic."""
    model = s.RetrieveResponse(query=query, results=[s.ScoredOut.of(r) for r in results])
    return model.model_dump_json().encode()


def test_real_results_encode_byte_for_byte_as_the_model(world: World) -> None:
    ctx = world.ctx
    plain = world.seed(ALICE, "alice drinks green tea every morning")
    stored = commands.store_memory(
        ctx,
        "alice keeps her green tea in a tin",
        user_id=ALICE,
        session_id="session-7",
        meta={"source": "chat\u2028é", "n": 1, "x": 2.5, "none": None, "ok": True, "tiny": 1e-7},
    )
    newer = world.seed(ALICE, "alice now drinks green tea at noon")
    commands.reinforce(ctx, stored.node_ids[0], user_id=ALICE)
    commands.supersede(ctx, plain.node_id, newer.node_id, user_id=ALICE)
    result = queries.retrieve(ctx, "green tea", user_id=ALICE, include_superseded=True)
    nodes = [r.node for r in result.results]
    assert any(n.superseded_by for n in nodes)
    assert any(n.last_reinforced_at for n in nodes)
    assert any(n.meta and n.session_id for n in nodes)
    assert retrieve_json(result.query, result.results) == pydantic_json(
        result.query, result.results
    )


def test_value_types_encode_as_the_model_does() -> None:
    # Ints and numpy scalars in float fields, microseconds and none, every optional set.
    node = a_fact(
        confidence_base=1,
        salience_base=np.float64(0.1),
        reinforcement_boost=0,
        reinforcement_count=3,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        updated_at=datetime(2026, 1, 1, 1, 2, 3, 4500, tzinfo=UTC),
        last_reinforced_at=datetime(2026, 2, 1, 0, 0, 0, 1, tzinfo=UTC),
        superseded_by=uuid.uuid4(),
        session_id="s",
        meta={"a": 1e-7, "b": 1e20, "c": 0.30000000000000004, "d": "é"},
    )
    components = ScoreComponents(
        *[np.float64(x) for x in (0.5, 0.75, 0.7, 0, 1, 0.25, 0, 1e-7, 1, 1, 0)]
    )
    scored = [
        ScoredNode(node, np.float64(0.123456789), components),
        ScoredNode(node, 2, components),
    ]
    assert retrieve_json("q", scored) == pydantic_json("q", scored)


def test_the_route_answers_the_declared_model(world: World) -> None:
    world.seed(ALICE, "alice drinks green tea")
    response = world.client.post(
        "/v1/retrieve", json={"query": "green tea"}, headers=world.headers("user")
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    parsed = s.RetrieveResponse.model_validate_json(response.content)
    assert parsed.results
    assert parsed.model_dump_json().encode() == response.content
