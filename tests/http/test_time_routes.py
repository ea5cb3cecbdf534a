"""Effective time over HTTP: ``occurred_at`` on POST /v1/events and PUT /v1/items, both
times on what comes back, and times without a zone refused with 422, writing nothing."""

from __future__ import annotations

import pytest

from tests.http.conftest import World

MOVED = "2022-03-01T00:00:00Z"


def stored(world: World, body: dict[str, object]) -> dict[str, object]:
    response = world.client.post("/v1/events", json=body, headers=world.headers("user"))
    assert response.status_code == 201, response.text
    event = world.client.get(
        f"/v1/events/{response.json()['event_id']}", headers=world.headers("user")
    )
    assert event.status_code == 200, event.text
    return dict(event.json())


def test_a_stored_memory_answers_with_both_times(world: World) -> None:
    event = stored(world, {"content": "I live in Boston", "occurred_at": MOVED})

    assert event["occurred_at"] == MOVED
    assert event["recorded_at"] != MOVED
    nodes = world.client.get(f"/v1/events/{event['id']}/nodes", headers=world.headers("user"))
    [node] = nodes.json()
    assert node["occurred_at"] == MOVED
    assert node["valid_to"] is None


def test_without_occurred_at_the_memory_takes_effect_when_recorded(world: World) -> None:
    event = stored(world, {"content": "I play the cello"})

    assert event["occurred_at"] == event["recorded_at"]


def test_an_item_revision_takes_its_effective_time(world: World) -> None:
    for content, when in (("I live in Boston", MOVED), ("I live in Chicago", None)):
        body = {"content": content} | ({} if when is None else {"occurred_at": when})
        response = world.client.put("/v1/items/home", json=body, headers=world.headers("user"))
        assert response.status_code == 200, response.text
    item = world.client.get("/v1/items/home", headers=world.headers("user")).json()
    [old, _] = item["revision_ids"]
    [node] = world.client.get(f"/v1/events/{old}/nodes", headers=world.headers("user")).json()
    assert node["occurred_at"] == MOVED
    assert node["valid_to"] == item["current"]["occurred_at"]


@pytest.mark.parametrize("occurred_at", ["2022-03-01T00:00:00", "1646092800", "spring", 1646092800])
def test_a_time_without_a_zone_is_refused_and_nothing_is_written(
    world: World, occurred_at: object
) -> None:
    for method, path in (("POST", "/v1/events"), ("PUT", "/v1/items/home")):
        response = world.client.request(
            method,
            path,
            json={"content": "I moved", "occurred_at": occurred_at},
            headers=world.headers("user"),
        )
        assert response.status_code == 422, response.text
    listed = world.client.get("/v1/events", headers=world.headers("user"))
    assert listed.json() == []
