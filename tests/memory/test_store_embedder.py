"""The embedder is a property of the store: recorded once, inherited, checked at start."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from click.testing import CliRunner

from eventstore import create_backend
from eventstore.migrate import _config
from oblivio import MemoryClient
from oblivio.bootstrap import database_url, migration_locations
from oblivio.cli import main
from oblivio.memory import queries
from oblivio.settings import Settings
from projections.embedders import EmbedderUnavailableError, HashingEmbedder, UnknownEmbedderError
from projections.storage.tables import vector_embedders, vectors
from projections.store_embedders import EmbedderMismatchError


def with_embedder(settings: Settings, name: str | None) -> Settings:
    return settings.model_copy(update={"embedder": name})


def remembered(client: MemoryClient) -> None:
    client.store("I work as a nurse", user_id="alice")
    client.store("I love pizza with olives", user_id="alice")
    client.retrieve("anything", user_id="alice")  # waits until the vectors are written


def top(client: MemoryClient, query: str) -> str:
    return client.retrieve(query, user_id="alice", limit=1).results[0].node.content


def vector_rows(client: MemoryClient) -> set[tuple[str, int]]:
    query = sa.select(vectors.c.embedder, vectors.c.dimension).distinct()
    with client.context.store.backend.engine.connect() as conn:
        return {(row.embedder, row.dimension) for row in conn.execute(query)}


def test_a_new_store_records_the_default_and_later_processes_inherit_it(
    fresh_settings: Settings,
) -> None:
    with MemoryClient(settings=fresh_settings) as first:
        remembered(first)
        # The paraphrase the hashing embedder cannot see.
        assert top(first, "What is my profession?") == "I work as a nurse"
        assert vector_rows(first) == {("wordllama-l2_supercat-256", 256)}
    with MemoryClient(settings=fresh_settings) as later:
        assert later.context.embedder.name == "wordllama-l2_supercat-256"
        assert top(later, "What is my profession?") == "I work as a nurse"


def test_a_store_keeps_its_embedder_and_refuses_another(fresh_settings: Settings) -> None:
    with MemoryClient(settings=with_embedder(fresh_settings, "hashing:384")) as first:
        remembered(first)
        assert vector_rows(first) == {("hashing-v1-384", 384)}
    with MemoryClient(settings=fresh_settings) as inherits:
        assert inherits.context.embedder.name == "hashing-v1-384"
        assert top(inherits, "pizza olives") == "I love pizza with olives"
    with MemoryClient(settings=fresh_settings, embedder=HashingEmbedder(384)) as same:
        assert top(same, "nurse") == "I work as a nurse"
    with pytest.raises(EmbedderMismatchError) as refused:
        MemoryClient(settings=with_embedder(fresh_settings, "wordllama"))
    message = str(refused.value)
    assert "hashing-v1-384" in message
    assert "oblivio rebuild vectors --all --embedder wordllama" in message


def test_an_embedder_given_in_code_must_be_given_again(fresh_settings: Settings) -> None:
    class Custom(HashingEmbedder):
        @property
        def name(self) -> str:
            return "custom-7"

    with MemoryClient(settings=fresh_settings, embedder=Custom(64)) as first:
        remembered(first)
    with MemoryClient(settings=fresh_settings, embedder=Custom(64)) as again:
        assert top(again, "nurse") == "I work as a nurse"
    with pytest.raises(EmbedderUnavailableError, match="supplied in code"):
        MemoryClient(settings=fresh_settings)


def test_an_unknown_embedder_fails_at_start_and_records_nothing(fresh_settings: Settings) -> None:
    with pytest.raises(UnknownEmbedderError, match="'word2vec' is not an embedder name"):
        MemoryClient(settings=with_embedder(fresh_settings, "word2vec"))
    with MemoryClient(settings=fresh_settings, embedder="hashing") as client:
        assert client.context.embedder.name == "hashing-v1-256"


def test_retrieval_reads_only_the_serving_embedders_vectors(fresh_settings: Settings) -> None:
    """A node may hold another embedder's vector (a re-embedding in progress): never mixed."""
    with MemoryClient(settings=with_embedder(fresh_settings, "hashing")) as client:
        remembered(client)
        engine = client.context.store.backend.engine
        with engine.begin() as conn:
            rows = list(conn.execute(sa.select(vectors)))
            conn.execute(
                vectors.insert(),
                [
                    {**row._asdict(), "embedder": "other-3", "dimension": 3, "embedding": b"x"}
                    for row in rows
                ],
            )
        client.context.retrieval_cache.drop(queries.cache_key(client.context, "alice"))
        assert top(client, "pizza") == "I love pizza with olives"


def test_a_store_made_before_the_upgrade_keeps_the_hashing_embedder(
    fresh_settings: Settings,
) -> None:
    """Stores made so far embed with hashing-v1-256; the migration records that."""
    with MemoryClient(settings=with_embedder(fresh_settings, "hashing")) as old:
        remembered(old)
    backend = create_backend(database_url(fresh_settings))
    try:
        with backend.engine.begin() as conn:
            command.downgrade(_config(conn, migration_locations(), []), "pj0002")
        with backend.engine.begin() as conn:
            command.upgrade(_config(conn, migration_locations(), []), "heads")
        with backend.engine.connect() as conn:
            recorded = conn.execute(sa.select(vector_embedders)).one()
    finally:
        backend.dispose()
    assert (recorded.role, recorded.name, recorded.spec, recorded.dimension) == (
        "current",
        "hashing-v1-256",
        "hashing:256",
        256,
    )
    with MemoryClient(settings=fresh_settings) as upgraded:
        assert upgraded.context.embedder.name == "hashing-v1-256"
        assert top(upgraded, "pizza") == "I love pizza with olives"
        assert vector_rows(upgraded) == {("hashing-v1-256", 256)}


def test_the_cli_takes_the_embedder_from_the_environment_or_an_option(tmp_path: Path) -> None:
    runner = CliRunner()
    data = ["--data-dir", str(tmp_path / "data")]
    unknown = runner.invoke(main, [*data, "worker"], env={"OBLIVIO_EMBEDDER": "word2vec"})
    assert unknown.exit_code == 1  # refused with the settings, before the store is opened
    assert "embedder: Value error, 'word2vec' is not an embedder name" in unknown.output
    bad_option = runner.invoke(main, [*data, "--embedder", "hashing:x", "worker"])
    assert bad_option.exit_code == 2  # a usage error
    assert "'hashing:x' is not an embedder name" in bad_option.output
    with MemoryClient(str(tmp_path / "data"), embedder="hashing"):
        pass  # the store now records hashing
    refused = runner.invoke(main, [*data, "worker", "--embedder", "wordllama:64"])
    assert refused.exit_code == 1
    assert "EmbedderMismatchError" in refused.output
    assert "oblivio rebuild vectors --all --embedder wordllama:64" in refused.output
