"""Vector-state rebuilds over HTTP: cluster-wide operators start and watch them;
audit-logged.  The embedder is the whole store's, so a namespaced operator gets 403."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest

from oblivio.memory import queries
from tests.http.conftest import ALICE, World, free_port, log_size, open_world, settings_for

REBUILDS = "/v1/admin/rebuilds"


def test_an_operator_re_embeds_the_store_and_watches_the_job(world: World) -> None:
    world.seed(ALICE, "I work as a nurse")
    world.seed("bob", "Bob drives a red car")
    for user in (ALICE, "bob"):  # a consistent read waits until the vectors are written
        queries.retrieve(world.ctx, "anything", user_id=user)
    started = world.client.post(
        REBUILDS, json={"embedder": "hashing:64"}, headers=world.headers("cluster")
    )
    assert started.status_code == 202, started.text
    job = started.json()
    assert (job["status"], job["scope"], job["embedder"]) == ("running", "all", "hashing-v1-64")
    assert (job["subjects_total"], job["nodes_total"], job["nodes_embedded"]) == (2, 2, 0)

    assert world.ctx.reembedder.run_pending() == 2  # what the workers do
    watched = world.client.get(f"{REBUILDS}/{job['rebuild_id']}", headers=world.headers("cluster"))
    assert watched.status_code == 200, watched.text
    done = watched.json()
    assert (done["status"], done["subjects_done"], done["nodes_embedded"]) == ("done", 2, 2)
    assert done["finished_at"] is not None

    operator_key = world.tokens["cluster"].split("_")[1]
    actor = world.ctx.store.codec.pseudonym("actor", f"api-key:{operator_key}")
    entries = [
        e.data or {}
        for e in world.ctx.store.read_audit()
        if e.type.startswith("audit.vectors.rebuild.")
    ]
    assert [e["action"] for e in entries] == ["vectors.rebuild.started", "vectors.rebuild.finished"]
    assert entries[0]["actor_ref"] == actor
    assert all(e["object_refs"]["rebuild_id"] == job["rebuild_id"] for e in entries)
    assert entries[1]["counts"]["nodes_embedded"] == 2


def test_a_bad_embedder_name_answers_with_the_names_there_are(sqlite_world: World) -> None:
    response = sqlite_world.client.post(
        REBUILDS, json={"embedder": "word2vec"}, headers=sqlite_world.headers("cluster")
    )
    assert response.status_code == 422, response.text
    assert "'word2vec' is not an embedder name; the names are wordllama[:64|128|256], " in (
        response.text
    )
    assert "hashing[:DIM] (DIM 1 to 4096), sentence-transformers:PATH, openai:MODEL" in (
        response.text
    )
    assert "(?:" not in response.text  # not the regular expression


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"embedder": "word2vec"}, 422),
        ({"embedder": "hashing:0"}, 422),  # outside the published pattern, as it says
        ({"embedder": "hashing:65536"}, 422),  # dimensions are bounded (4096)
        ({"embedder": "hashing:4097"}, 422),
        ({"embedder": "wordllama:100"}, 422),
        ({"embedder": "openai: "}, 422),
        ({"embedder": "hashing:64", "user_id": ALICE}, 422),  # changing it needs every subject
        ({"embedder": "wordllama", "user_id": ALICE}, 422),  # not both, whatever the embedder
        ({"user_id": "nobody-here"}, 404),
        ({"everything": True}, 422),
    ],
)
def test_bad_rebuild_requests_are_refused_and_write_nothing(
    sqlite_world: World, body: dict[str, object], status: int
) -> None:
    sqlite_world.seed(ALICE)
    before = log_size(sqlite_world.ctx)
    response = sqlite_world.client.post(
        REBUILDS, json=body, headers=sqlite_world.headers("cluster")
    )
    assert response.status_code == status, response.text
    assert log_size(sqlite_world.ctx) == before


def test_a_second_embedder_change_conflicts_and_unknown_jobs_are_404(sqlite_world: World) -> None:
    sqlite_world.seed(ALICE)
    operator = sqlite_world.headers("cluster")
    assert (
        sqlite_world.client.post(
            REBUILDS, json={"embedder": "hashing:64"}, headers=operator
        ).status_code
        == 202
    )
    clash = sqlite_world.client.post(REBUILDS, json={"embedder": "hashing:32"}, headers=operator)
    assert clash.status_code == 409, clash.text
    assert (
        sqlite_world.client.get(f"{REBUILDS}/{uuid.uuid4()}", headers=operator).status_code == 404
    )


@pytest.mark.parametrize("principal", ["none", "user", "auditor", "operator"])
def test_only_cluster_wide_operators_start_or_read_rebuilds(
    sqlite_world: World, principal: str
) -> None:
    before = log_size(sqlite_world.ctx)
    calls = [
        sqlite_world.client.post(REBUILDS, json={}, headers=sqlite_world.headers(principal)),
        sqlite_world.client.get(
            f"{REBUILDS}/{uuid.uuid4()}", headers=sqlite_world.headers(principal)
        ),
    ]
    assert [c.status_code for c in calls] == [401 if principal == "none" else 403] * 2
    assert log_size(sqlite_world.ctx) == before


@pytest.mark.parametrize(
    "embedder", ["sentence-transformers:/no/such/model", "openai:text-embedding-3-small"]
)
def test_a_well_formed_embedder_this_host_cannot_load_answers_409(
    sqlite_url: str, tmp_path: Path, embedder: str
) -> None:
    """Schema-valid names are never answered 422: one whose model is not here (or whose
    endpoint does not answer: a loopback port nothing listens on) is a typed 409."""
    offline = {"openai_base_url": f"http://127.0.0.1:{free_port()}/v1", "embedding_retries": 0}
    settings = settings_for(sqlite_url, tmp_path / "data").model_copy(update=offline)
    with open_world(settings) as world:
        world.seed(ALICE)
        before = log_size(world.ctx)
        response = world.client.post(
            REBUILDS, json={"embedder": embedder}, headers=world.headers("cluster")
        )
        assert response.status_code == 409, response.text
        assert response.json()["title"] == "EmbedderNotLoadableError"
        assert log_size(world.ctx) == before


def test_an_openai_name_without_an_endpoint_contacts_nothing(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``OBLIVIO_OPENAI_BASE_URL``: ``openai:MODEL`` is refused before any connection
    (it used to go to OpenAI's public endpoint).  Every outgoing HTTP(S) connection is
    sent through a proxy that is a loopback socket the test watches: it sees none."""
    with socket.create_server(("127.0.0.1", 0)) as egress:
        proxy = f"http://127.0.0.1:{egress.getsockname()[1]}"
        for variable in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
            monkeypatch.setenv(variable, proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        fast = {"embedding_retries": 0, "embedding_timeout_seconds": 1.0}
        settings = settings_for(sqlite_url, tmp_path / "data").model_copy(update=fast)
        with open_world(settings) as world:
            world.seed(ALICE)
            before = log_size(world.ctx)
            response = world.client.post(
                REBUILDS,
                json={"embedder": "openai:text-embedding-3-small"},
                headers=world.headers("cluster"),
            )
            assert response.status_code == 409, response.text
            problem = response.json()
            assert problem["title"] == "EmbedderNotLoadableError"
            assert "OBLIVIO_OPENAI_BASE_URL" in problem["detail"]
            assert log_size(world.ctx) == before
        egress.setblocking(False)
        with pytest.raises(BlockingIOError):
            egress.accept()  # no connection is waiting: nothing tried to leave
