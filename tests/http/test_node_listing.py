"""``GET /v1/nodes``: a user's current nodes, paged, with retrieval's filters."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from eventstore.errors import InvalidInputError
from oblivio.errors import NodeUnavailableError
from oblivio.memory import commands, queries
from tests.http.conftest import ALICE, BOB, World, log_size


def listing(world: World, principal: str = "operator", **params: Any) -> dict[str, Any]:
    if principal == "operator":
        params.setdefault("user_id", ALICE)
    response = world.client.get("/v1/nodes", params=params, headers=world.headers(principal))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def ids(body: dict[str, Any]) -> list[str]:
    return [n["id"] for n in body["nodes"]]


def test_superseded_nodes_are_left_out_unless_asked_for(world: World) -> None:
    old, new, other = world.seed(ALICE), world.seed(ALICE), world.seed(ALICE)
    world.seed(BOB)
    commands.supersede(world.ctx, old.node_id, new.node_id, user_id=ALICE)

    current = listing(world)
    assert ids(current) == [str(new.node_id), str(other.node_id)]
    assert current["next_after"] is None
    assert all(n["lifecycle"] != "superseded" for n in current["nodes"])
    everything = listing(world, include_superseded="true")
    assert ids(everything) == [str(s.node_id) for s in (old, new, other)]
    # A user key lists its own user's nodes and no one else's, whatever it names.
    assert ids(listing(world, "user")) == ids(current)
    foreign = world.client.get(
        "/v1/nodes", params={"user_id": ALICE}, headers=world.headers("other_user")
    )
    assert foreign.status_code == 404


def test_pages_follow_each_other_without_gaps_or_repeats(world: World) -> None:
    seeds = [world.seed(ALICE) for _ in range(5)]
    seen: list[str] = []
    after = None
    for _ in range(10):
        page = listing(world, limit=2, **({} if after is None else {"after": after}))
        assert len(page["nodes"]) <= 2
        seen += ids(page)
        after = page["next_after"]
        if after is None:
            break
    assert seen == [str(s.node_id) for s in seeds]


def test_filters_are_retrievals(world: World) -> None:
    fact = world.seed(ALICE)
    pref_event = commands.store(
        world.ctx,
        "Alice prefers window seats.",
        user_id=ALICE,
        node_type="preference",
        scope="project",
    )
    [pref] = queries.get_event_nodes(world.ctx, pref_event, user_id=ALICE)
    assert ids(listing(world, node_types=["preference"])) == [str(pref.id)]
    assert ids(listing(world, exclude_node_types=["preference"])) == [str(fact.node_id)]
    assert ids(listing(world, scopes=["project", "session"])) == [str(pref.id)]
    assert ids(listing(world, source_types=["imported"])) == []
    assert len(ids(listing(world, scopes=["personal", "project"]))) == 2


def test_bad_listings_are_refused(sqlite_world: World) -> None:
    world = sqlite_world
    world.seed(ALICE)
    before = log_size(world.ctx)
    for params in (
        {"user_id": ALICE, "scopes": "galaxy"},
        {"user_id": ALICE, "limit": 0},
        {"user_id": ALICE, "limit": 1001},
        {"user_id": ALICE, "after": "not-a-cursor"},
        {"user_id": ALICE, "include_superseded": "maybe"},
        {},  # an operator must name the user
    ):
        response = world.client.get("/v1/nodes", params=params, headers=world.headers("operator"))
        assert response.status_code == 422, (params, response.text)
    assert (
        world.client.get(
            "/v1/nodes", params={"user_id": ALICE}, headers=world.headers("auditor")
        ).status_code
        == 403
    )
    assert log_size(world.ctx) == before
    for bad in (
        {"limit": True},
        {"after": "eA"},
        {"scopes": "personal"},
        {"include_superseded": 1},
    ):
        with pytest.raises(InvalidInputError):
            queries.list_nodes(world.ctx, user_id=ALICE, **bad)
    # Paging after a node that is not (or no longer) the caller's: unavailable, like any.
    bobs = world.seed(BOB)
    for after in (str(uuid.uuid4()), str(bobs.node_id)):
        response = world.client.get(
            "/v1/nodes", params={"after": after}, headers=world.headers("user")
        )
        assert response.status_code == 404, response.text
    with pytest.raises(NodeUnavailableError):
        queries.list_nodes(world.ctx, user_id=ALICE, after=bobs.node_id)


def test_a_forgotten_user_has_no_nodes(sqlite_world: World) -> None:
    world = sqlite_world
    world.seed(ALICE)
    from oblivio.memory import compliance

    compliance.forget(world.ctx, ALICE, wait=False)
    assert listing(world)["nodes"] == []
    assert queries.list_nodes(world.ctx, user_id="nobody").nodes == []
