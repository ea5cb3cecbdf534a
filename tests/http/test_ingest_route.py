"""POST /v1/ingest: single and batch messages, the first-person declaration, bad input."""

from __future__ import annotations

import time
from typing import Any

import pytest

from oblivio.memory.health import partition_lag
from tests.http.conftest import World, log_size


def ingest(world: World, body: dict[str, Any], principal: str = "user") -> Any:
    return world.client.post("/v1/ingest", json=body, headers=world.headers(principal))


def test_a_correction_retires_the_earlier_claim(world: World) -> None:
    for text in ("I use an insulin pump.", "I don't use an insulin pump anymore."):
        response = ingest(
            world, {"message": text, "first_person_owner": True, "wait_for_extraction": True}
        )
        assert response.status_code == 201, response.text
        [result] = response.json()["results"]
        assert len(result["claim_node_ids"]) == 1
    correction = result
    node = world.client.get(
        f"/v1/nodes/{correction['claim_node_ids'][0]}", headers=world.headers("user")
    ).json()
    assert node["meta"]["claim_polarity"] == "negative"
    hits = world.client.post(
        "/v1/retrieve",
        json={"query": "treatment", "exclude_node_types": ["note", "entity"]},
        headers=world.headers("user"),
    ).json()
    assert [h["node"]["id"] for h in hits["results"]] == correction["claim_node_ids"]


def test_a_batch_for_a_named_user(world: World) -> None:
    body = {
        "user_id": "carol",
        "messages": [
            {"message": "I use Vim.", "first_person_owner": True},
            {"message": "Noted.", "role": "assistant"},
        ],
        "wait_for_extraction": True,
    }
    response = ingest(world, body, "operator")
    assert response.status_code == 201, response.text
    results = response.json()["results"]
    assert [len(r["claim_node_ids"]) for r in results] == [1, 0]


@pytest.mark.parametrize(
    "body",
    [
        {"message": "I use Vim.", "first_person_owner": "true"},
        {"message": "I use Vim.", "first_person_owner": 1},
        {"message": "I use Vim.", "first_person_owner": True, "role": "assistant"},
        {"message": "I use Vim.", "first_person_owner": True, "speaker": "Dana"},
        {"message": "I use Vim.", "enable_speaker_references": True},
        {"message": "I use Vim.", "meta": {"oblivio_first_person_owner_v1": True}},
        {"messages": [{"message": "I use Vim."}] * 101},
        {"messages": [{"message": "I use Vim."}], "message": "and this"},
        {},
    ],
)
def test_bad_input_is_422_and_writes_nothing(sqlite_world: World, body: dict[str, Any]) -> None:
    # Validation precedes storage; the facade's bad-input cases run on both backends.
    before = log_size(sqlite_world.ctx)
    response = ingest(sqlite_world, body)
    assert response.status_code == 422, response.text
    assert log_size(sqlite_world.ctx) == before


def test_the_lag_figures_show_what_extraction_has_not_read(world: World) -> None:
    def projection_lag(ctx: Any) -> dict[str, int]:
        return {name: sum(parts) for name, parts in partition_lag(ctx).items()}

    before = projection_lag(world.ctx)["claims_extraction"]
    assert ingest(world, {"message": "I use Vim."}).status_code == 201
    # A server's log shows a commit once older transactions anywhere settled: poll.
    deadline = time.monotonic() + 10
    while projection_lag(world.ctx)["claims_extraction"] == before:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert projection_lag(world.ctx)["claims_extraction"] == before + 1


def test_a_user_key_cannot_ingest_for_another_user(world: World) -> None:
    before = log_size(world.ctx)
    response = ingest(world, {"message": "I use Vim.", "user_id": "bob"})
    assert response.status_code == 404, response.text  # as for store: nothing revealed
    assert log_size(world.ctx) == before
