"""What a rebuild job's two digests compare: the live state as the erasure left it, against
a replay of what remains; a drifted live state is certified unequal, then repaired."""

from __future__ import annotations

from typing import Any

from oblivio import MemoryClient
from projections.storage.tables import nodes, vectors
from tests.erasure._support import (
    completed,
    engine,
    marker,
    projection_rows,
    run_jobs,
    stream_id_of,
)

ALICE = "alice@example.org"


def _projections(certificate: dict[str, Any], client: MemoryClient) -> dict[str, dict[str, Any]]:
    payload = client.verify_certificate(certificate)
    return {p["name"]: p for p in payload["projections"]}


def test_a_live_state_that_drifted_from_the_log_is_certified_unequal(
    client: MemoryClient,
) -> None:
    events = [client.store(f"Note {marker('note')}", user_id=ALICE) for _ in range(3)]
    client.replay_comparison(user_id=ALICE)  # vectors caught up: both live states are complete
    status = client.delete_event(events[0], user_id=ALICE)
    stream_id = stream_id_of(client, ALICE)
    # A live node row that no event explains: incremental state and log now disagree.
    with engine(client).begin() as conn:
        conn.execute(
            nodes.update()
            .where(nodes.c.stream_id == stream_id)
            .values(reinforcement_count=nodes.c.reinforcement_count + 7)
        )

    assert run_jobs(client) == 2

    results = _projections(completed(client.erasure_status(status.request_id)), client)
    graph = results[client.context.graph.name]
    vector = results[client.context.runner.projection.name]
    assert graph["equal"] is False
    assert graph["state_digest"] != graph["replay_digest"]
    assert vector["equal"] is True
    # The job replaced the drifted rows with the replay, so live and replay now agree,
    # and the replay digest the certificate recorded is that state's.
    comparison = client.replay_comparison(user_id=ALICE)
    assert comparison[graph["name"]] == (graph["replay_digest"], graph["replay_digest"])


def test_a_vector_projection_behind_the_log_is_compared_by_a_second_replay(
    client: MemoryClient,
) -> None:
    events = [client.store(f"Note {marker('note')}", user_id=ALICE) for _ in range(3)]
    stream_id = stream_id_of(client, ALICE)
    assert vectors.name not in projection_rows(client, stream_id)  # nothing embedded yet
    status = client.delete_event(events[0], user_id=ALICE)

    assert run_jobs(client) == 2

    results = _projections(completed(client.erasure_status(status.request_id)), client)
    assert all(p["equal"] for p in results.values())
    # The rebuild embedded what remains although the runner never ran.
    assert projection_rows(client, stream_id)[vectors.name] == len(events) - 1
