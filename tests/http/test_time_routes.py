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


def history(world: World) -> dict[str, str]:
    """Boston from 2022, Chicago from March 2024 (told in the other order), the
    correction recorded; node ids by city."""
    ids = {}
    for city, when in (("Chicago", "2024-03-15T00:00:00Z"), ("Boston", MOVED)):
        body = {"content": f"I live in {city}", "occurred_at": when, "meta": {"topic": "home"}}
        response = world.client.post("/v1/events", json=body, headers=world.headers("user"))
        ids[city] = response.json()["node_ids"][0]
    body = {"old_node_id": ids["Boston"], "new_node_id": ids["Chicago"]}
    response = world.client.post("/v1/supersedences", json=body, headers=world.headers("user"))
    assert response.status_code in (200, 201), response.text
    return ids


def retrieved(world: World, **fields: object) -> dict[str, object]:
    body = {"query": "Where do I live?", **fields}
    response = world.client.post("/v1/retrieve", json=body, headers=world.headers("user"))
    assert response.status_code == 200, response.text
    return dict(response.json())


def cities(answer: dict[str, object]) -> list[str]:
    return [r["node"]["content"] for r in answer["results"]]  # type: ignore[attr-defined,index]


def test_retrieve_as_of_and_resolved_dates(world: World) -> None:
    history(world)

    assert cities(retrieved(world)) == ["I live in Chicago"]
    then = retrieved(world, as_of="2023-06-01T00:00:00Z")
    assert cities(then) == ["I live in Boston"]
    assert then["as_of"] == "2023-06-01T00:00:00Z"
    asked = retrieved(world, query="Where did I live in 2023?", resolve_dates=True)
    assert cities(asked) == ["I live in Boston"]
    assert asked["as_of"] == "2023-12-31T23:59:59.999999Z"
    unresolved = retrieved(world, query="Where did I live in 2023?")
    assert cities(unresolved) == ["I live in Chicago"]
    assert unresolved["as_of"] is None


def test_retrieve_filters_on_effective_time_and_metadata(world: World) -> None:
    history(world)
    world.client.post(
        "/v1/events", json={"content": "I live for jazz"}, headers=world.headers("user")
    )

    window = retrieved(
        world,
        include_superseded=True,
        occurred_since="2022-01-01T00:00:00Z",
        occurred_until="2024-03-15T00:00:00Z",
    )
    assert cities(window) == ["I live in Boston"]
    tagged = retrieved(world, meta={"topic": "home"}, include_superseded=True)
    assert sorted(cities(tagged)) == ["I live in Boston", "I live in Chicago"]
    assert cities(retrieved(world, meta={"topic": "work"})) == []
    prefixed = retrieved(world, meta={"topic": {"$prefix": "ho"}}, include_superseded=True)
    assert sorted(cities(prefixed)) == ["I live in Boston", "I live in Chicago"]
    assert cities(retrieved(world, meta={"topic": {"$prefix": "homes"}})) == []


def test_listing_and_assertion_state_as_of(world: World) -> None:
    ids = history(world)
    headers = world.headers("user")

    page = world.client.get("/v1/nodes", params={"as_of": "2023-06-01T00:00:00Z"}, headers=headers)
    assert [n["content"] for n in page.json()["nodes"]] == ["I live in Boston"]
    page = world.client.get("/v1/nodes", params={"meta": 'topic="home"'}, headers=headers)
    assert [n["content"] for n in page.json()["nodes"]] == ["I live in Chicago"]
    prefixed = {"meta": 'topic={"$prefix": "h"}'}
    page = world.client.get("/v1/nodes", params=prefixed, headers=headers)
    assert [n["content"] for n in page.json()["nodes"]] == ["I live in Chicago"]
    state = world.client.get(
        f"/v1/nodes/{ids['Boston']}/assertion-state",
        params={"as_of": "2023-06-01T00:00:00Z"},
        headers=headers,
    )
    assert state.status_code == 200, state.text
    assert state.json()["lifecycle"] == "active"
    before = world.client.get(
        f"/v1/nodes/{ids['Boston']}/assertion-state",
        params={"as_of": "2021-01-01T00:00:00Z"},
        headers=headers,
    )
    assert before.status_code == 404


@pytest.mark.parametrize(
    "fields",
    [
        {"as_of": "2023-06-01T00:00:00"},
        {"occurred_since": "2024-01-01T00:00:00Z", "occurred_until": "2023-01-01T00:00:00Z"},
        {"meta": {"topic": ["home"]}},
        {"meta": {"topic": {"nested": 1}}},
        {"meta": {"topic": {"$prefix": 1}}},
        {"meta": {"topic": {"$prefix": "h", "$eq": "home"}}},
        {"filters": {"topic": "home"}},
        {"resolve_dates": "yes"},
    ],
)
def test_bad_retrieve_input_is_422(world: World, fields: dict[str, object]) -> None:
    body = {"query": "Where do I live?", **fields}
    response = world.client.post("/v1/retrieve", json=body, headers=world.headers("user"))
    assert response.status_code == 422, response.text


@pytest.mark.parametrize(
    "params",
    [
        {"as_of": "2023-06-01T00:00:00"},
        {"meta": "topic=home"},
        {"meta": '{"topic": "home"}'},
        {"meta": 'topic={"$prefix": 1}'},
        {"meta": 'topic={"$suffix": "e"}'},
        {"occurred_since": "2024-01-01T00:00:00Z", "occurred_until": "2023-01-01T00:00:00Z"},
        {"occurred_after": "2023-01-01T00:00:00Z"},  # no such filter: never ignored
    ],
)
def test_bad_listing_input_is_422(world: World, params: dict[str, str]) -> None:
    response = world.client.get("/v1/nodes", params=params, headers=world.headers("user"))
    assert response.status_code == 422, response.text
