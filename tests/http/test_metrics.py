"""``GET /metrics``: Prometheus text for operator keys, with request, lag and erasure figures."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client.parser import text_string_to_metric_families

from oblivio.memory import compliance
from tests.http.conftest import ALICE, World


def samples(
    world: World, principal: str = "cluster"
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = world.client.get("/metrics", headers=world.headers(principal))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_metrics_count_requests_and_erasure_work(world: World) -> None:
    seed = world.seed(ALICE)
    for _ in range(3):
        assert world.client.get("/v1/events", headers=world.headers("user")).status_code == 200
    assert world.client.get("/v1/events").status_code == 401
    status = compliance.delete_event(world.ctx, seed.event_id, user_id=ALICE)  # not waited for

    found = samples(world)
    events = (("method", "GET"), ("route", "/v1/events"))
    assert found["oblivio_http_requests_total", (*events, ("status", "200"))] == 3
    assert found["oblivio_http_requests_total", (*events, ("status", "401"))] == 1
    assert found["oblivio_http_request_duration_seconds_count", events] == 4
    assert ("oblivio_projection_lag_events", (("projection", "vector_state"),)) in found
    here = ("namespace", world.ctx.namespace)
    assert found["oblivio_erasure_requests", (here, ("status", "rebuilding"))] == 1
    assert sum(v for (name, _), v in found.items() if name == "oblivio_rebuild_jobs") >= 1
    assert ("oblivio_erasure_requests_overdue", (here,)) not in found
    assert ALICE not in world.client.get("/metrics", headers=world.headers("cluster")).text

    world.ctx.clock = lambda: status.deadline_at + timedelta(seconds=1)
    assert samples(world)["oblivio_erasure_requests_overdue", (here,)] == 1
    # A namespaced operator: its namespace's erasure figures, nothing every namespace shares.
    own = samples(world, "operator")
    assert own["oblivio_erasure_requests_overdue", (here,)] == 1
    assert {name for name, _ in own} == {
        "oblivio_erasure_requests",
        "oblivio_rebuild_jobs",
        "oblivio_erasure_requests_overdue",
    }


def test_only_operators_read_metrics(sqlite_world: World) -> None:
    for principal, expected in (("none", 401), ("user", 403), ("auditor", 403)):
        response = sqlite_world.client.get("/metrics", headers=sqlite_world.headers(principal))
        assert response.status_code == expected
