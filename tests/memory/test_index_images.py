"""Images of the retrieval index (projections.index_image), on both backends.

A client's close leaves a sealed image of each large subject it holds; the next
process's first query loads the index from it (no row-by-row build: the build is
made to fail to prove it) and gets what an index built from the rows gives.
Erasure deletes the image in its own transaction; an image of another state
(another scoring configuration, a restricted subject) is not used; the image
holds no plaintext.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from oblivio import MemoryClient
from oblivio.settings import Settings
from projections import retrieval_service
from projections.retrieval_index import SubjectIndex, load_subject, refresh
from projections.scoring import ScoringConfig
from projections.storage import graph_store, vector_store
from projections.storage.tables import retrieval_images
from tests._clients import Opener, client_opener
from tests.memory._support import remember

USER = "alice"
QUERY = "which city did I move to"


@pytest.fixture
def imaging(memory_settings: Settings) -> Iterator[Opener]:
    """Clients that image every subject, however small."""
    yield from client_opener(memory_settings.model_copy(update={"retrieval_image_nodes": 1}))


def fail_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, building an index from the rows fails; the attempts are counted.
    A query that still answers was served from an image."""
    attempts: list[int] = []

    def refuse(*args: Any, **kwargs: Any) -> SubjectIndex:
        attempts.append(1)
        raise AssertionError("the index was built from the rows")

    monkeypatch.setattr(retrieval_service, "load_subject", refuse)
    return attempts


def _write_history(client: MemoryClient) -> None:
    """Memories in sessions with metadata, a correction, a reinforcement, a trigger and an
    attractor: every part of the index an image must carry."""
    _, old = remember(client, "I live in a small flat near the harbour", session_id="s1")
    evidence, new = remember(client, "I moved to a house in the hills", session_id="s1")
    client.supersede(old.id, new.id, evidence_id=evidence, user_id=USER)
    client.reinforce(new.id, user_id=USER)
    for i in range(8):
        remember(client, f"Note {i}: the garden needs water on day {i}", meta={"day": i})
    client.add_resonance_trigger(user_id=USER, keyword="garden", weight=2.0)
    client.add_negative_attractor("harbour noise", user_id=USER, description="not wanted")


def _imaged_history(imaging: Opener) -> list[sa.Row[Any]]:
    """The history written, queried and the client closed; the image its close left."""
    first = imaging()
    _write_history(first)
    assert _ids(first)
    first.close()
    rows = _image_rows(first)
    assert rows
    return rows


def _image_rows(client: MemoryClient) -> list[sa.Row[Any]]:
    head = client.context.store.head(client.context.namespace, USER)
    assert head is not None
    with client.context.store.backend.engine.connect() as conn:
        query = sa.select(retrieval_images).where(
            retrieval_images.c.stream_id == head.stream.stream_id
        )
        return list(conn.execute(query))


def _ids(client: MemoryClient, query: str = QUERY, **options: Any) -> list[Any]:
    return [n.id for n in client.retrieve(query, user_id=USER, **options).nodes]


def _cached(client: MemoryClient) -> SubjectIndex:
    entry = client.context.retrieval_cache.entry(f"{client.context.namespace}/{USER}")
    assert entry is not None
    return entry[1]


def _built_from_rows(client: MemoryClient) -> SubjectIndex:
    store = client.context.store
    head = store.head(client.context.namespace, USER)
    assert head is not None
    with store.reading() as view:
        cipher = view.cipher(head.stream.stream_id)
        assert cipher is not None
        return load_subject(view.connection, cipher, client.context.scoring)


def _assert_same_index(loaded: SubjectIndex, built: SubjectIndex) -> None:
    a, b = loaded.parts(), built.parts()
    assert a.nodes == b.nodes
    assert np.array_equal(a.vectors, b.vectors)
    for name in ("codes", "numbers", "last_touch_us", "validity_us"):
        assert np.array_equal(getattr(a.columns, name), getattr(b.columns, name)), name
    assert a.lexical.postings() == b.lexical.postings()
    assert (a.triggers, a.attractors) == (b.triggers, b.attractors)
    assert a.item_revisions == b.item_revisions
    assert sorted(a.likely_updates) == sorted(b.likely_updates)
    assert np.array_equal(loaded.successions(), built.successions())
    assert np.array_equal(loaded.neighbours, built.neighbours)


def test_a_closed_client_leaves_an_image_the_next_one_loads(imaging: Opener) -> None:
    first = imaging()
    _write_history(first)
    warm = _ids(first)
    warm_all = _ids(first, "garden water", include_superseded=True, limit=20)
    first.close()
    [row] = _image_rows(first)  # one chunk: the history is small

    second = imaging()
    with pytest.MonkeyPatch.context() as patch:
        attempts = fail_builds(patch)
        assert _ids(second) == warm
        assert _ids(second, "garden water", include_superseded=True, limit=20) == warm_all
    assert attempts == []
    head = second.context.store.head(second.context.namespace, USER)
    assert head is not None
    assert row.stream_version == head.version
    _assert_same_index(_cached(second), _built_from_rows(second))


def test_an_older_image_is_brought_up_to_date_by_later_events(imaging: Opener) -> None:
    [before] = _imaged_history(imaging)
    writer = imaging()
    _, newest = remember(writer, "I moved again, to a city by a lake")

    reader = imaging()
    with pytest.MonkeyPatch.context() as patch:
        attempts = fail_builds(patch)
        assert newest.id in _ids(reader, "moved city lake")
    assert attempts == []
    reader.close()  # it moved past the image: its close writes a newer one
    [after] = _image_rows(reader)
    assert after.stream_version > before.stream_version
    third = imaging()
    assert newest.id in _ids(third, "moved city lake")
    _assert_same_index(_cached(third), _built_from_rows(third))


def test_delete_event_removes_the_image_and_the_next_load_builds_without_it(
    imaging: Opener,
) -> None:
    client = imaging()
    _write_history(client)
    secret, node = remember(client, "My locker code is tangerine-1984")
    assert node.id in _ids(client, "locker code")
    client.context.retrieval.save_images()
    assert _image_rows(client)

    client.delete_event(secret, user_id=USER, legal_ground="art17-1-b")
    assert _image_rows(client) == []  # in the erasure's transaction
    other = imaging()
    assert node.id not in _ids(other, "locker code tangerine")
    assert "tangerine" not in " ".join(n.content for n in _cached(other).nodes)


def test_forget_removes_the_image(imaging: Opener) -> None:
    client = imaging()
    _write_history(client)
    assert _ids(client)
    client.context.retrieval.save_images()
    rows = _image_rows(client)
    assert rows

    client.forget(USER, legal_ground="art17-1-b", wait=False)
    with client.context.store.backend.engine.connect() as conn:
        left = conn.execute(
            sa.select(retrieval_images).where(retrieval_images.c.image_id == rows[0].image_id)
        ).all()
    assert left == []


def test_an_image_of_another_scoring_configuration_is_not_used(imaging: Opener) -> None:
    _imaged_history(imaging)

    other = imaging(scoring=ScoringConfig(recency_weight=0.0))
    with pytest.MonkeyPatch.context() as patch:
        attempts = fail_builds(patch)
        with pytest.raises(AssertionError, match="built from the rows"):
            other.retrieve(QUERY, user_id=USER)
    assert attempts == [1]  # the image did not authenticate against this state


def test_a_restricted_subject_loads_no_image(imaging: Opener) -> None:
    _imaged_history(imaging)

    second = imaging()
    second.restrict(USER, ground="art18-1-a", reference="T-1")
    answer = second.retrieve(QUERY, user_id=USER)
    assert answer.restricted
    assert answer.results == []
    assert second.context.retrieval_cache.entry(f"{second.context.namespace}/{USER}") is None


def test_an_image_far_behind_is_brought_up_to_date_in_bounded_statements(
    imaging: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The events since an image are read a bounded number of ids per statement (the
    backends' parameter limits): here two, so five new memories take three."""
    _imaged_history(imaging)
    writer = imaging()
    newest = [remember(writer, f"Trip {i}: a weekend by the lake")[1] for i in range(5)]
    for module in (graph_store, vector_store):
        monkeypatch.setattr(module, "IDS_PER_STATEMENT", 2)

    reader = imaging()
    found = _ids(reader, "weekend trip lake", limit=10)
    assert {n.id for n in newest} <= set(found)
    _assert_same_index(_cached(reader), _built_from_rows(reader))


def test_refresh_adds_no_node_the_index_already_holds(imaging: Opener) -> None:
    """A load reads its rows after its token: an event committed and embedded in between
    is in the index already when the next refresh applies it (and, through an image, in
    every process that loads it).  Refresh must not add its nodes a second time."""
    client = imaging()
    _write_history(client)
    remember(client, "The last memory, read by the load before its token saw it")
    assert _ids(client)
    index = _cached(client)
    index.version -= 1  # as if the load's token had been read one event earlier
    store, namespace = client.context.store, client.context.namespace
    [last] = store.read_stream(namespace, USER, from_version=index.version + 1)
    with store.reading() as view:
        cipher = view.cipher(index.stream_id)
        assert cipher is not None
        refresh(index, view.connection, cipher, [last])
    _assert_same_index(index, _built_from_rows(client))
