"""Likely updates over HTTP and in the console: the assertion state shows the decision,
``POST /v1/nodes/{id}/likely-update/confirm|reject`` settle it, bad input writes nothing,
and the person's console page marks the memory a newer one likely updates."""

from __future__ import annotations

from typing import Any

from oblivio.memory import queries
from tests.console.conftest import sign_in
from tests.http.conftest import ALICE, Seed, World


def changed(world: World) -> tuple[Seed, Seed]:
    """An earlier memory of alice and a newer one that likely updates it, judged."""
    world.seed(ALICE, "I keep basil on the kitchen windowsill.")
    old = world.seed(ALICE, "My gym is Ironworks.")
    new = world.seed(ALICE, "I cancelled Ironworks and joined the pool instead.")
    queries.retrieve(world.ctx, "gym", user_id=ALICE)  # a consistent read: judged
    return old, new


def state(world: World, seed: Seed, principal: str = "user") -> dict[str, Any]:
    response = world.client.get(
        f"/v1/nodes/{seed.node_id}/assertion-state", headers=world.headers(principal)
    )
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def settle(world: World, seed: Seed, verb: str, principal: str = "user", **body: Any) -> Any:
    return world.client.post(
        f"/v1/nodes/{seed.node_id}/likely-update/{verb}",
        json=body,
        headers=world.headers(principal),
    )


def test_the_decision_shows_and_a_confirmation_supersedes(world: World) -> None:
    old, new = changed(world)
    decision = state(world, old)["likely_updated_by"]
    assert decision["new_node_id"] == str(new.node_id)
    assert decision["status"] == "open"
    assert decision["rule"] == "change_in_same_slot"
    assert [d["old_node_id"] for d in state(world, new)["likely_updates"]] == [str(old.node_id)]

    response = settle(world, old, "confirm", actor_id="support-desk")
    assert response.status_code == 201, response.text
    assert response.json()["node_ids"] == [str(old.node_id), str(new.node_id)]
    after = state(world, old)
    assert after["lifecycle"] == "superseded"
    assert after["likely_updated_by"]["status"] == "confirmed"
    again = settle(world, old, "confirm")
    assert again.status_code == 422
    assert again.json()["title"] == "NoLikelyUpdateError"


def test_a_rejection_leaves_both_standing(world: World) -> None:
    old, new = changed(world)
    response = settle(world, old, "reject", "operator", user_id=ALICE)
    assert response.status_code == 201, response.text
    assert response.json()["node_ids"] == [str(old.node_id), str(new.node_id)]
    assert state(world, old)["likely_updated_by"]["status"] == "rejected"
    assert state(world, old)["lifecycle"] == "active"


def test_bad_input_gets_a_typed_answer_and_writes_nothing(world: World) -> None:
    old, new = changed(world)
    before = world.ctx.store.read_stream(world.ctx.namespace, ALICE)
    for verb in ("confirm", "reject"):
        assert settle(world, new, verb).status_code == 422  # the newer one has no successor
        assert settle(world, old, verb, "other_user").status_code == 404  # bob's key
        assert settle(world, old, verb, unknown="x").status_code == 422
        missing = world.client.post(
            f"/v1/nodes/{new.node_id.hex[:8]}/likely-update/{verb}",
            json={},
            headers=world.headers("user"),
        )
        assert missing.status_code == 422
    assert world.ctx.store.read_stream(world.ctx.namespace, ALICE) == before


def test_the_console_marks_a_memory_a_newer_one_likely_updates(world: World) -> None:
    changed(world)
    sign_in(world.client, world.tokens["user"])
    page = world.client.get("/console/my").text
    assert page.count("likely updated by a newer memory") == 1
