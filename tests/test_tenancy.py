"""Namespaces as tenants, outside HTTP: where a namespace is configured, the keys the CLI
makes, and the migration that gave existing keys their namespace (es0007)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from click.testing import CliRunner
from pydantic import ValidationError

from appdata import apikeys, tables
from eventstore import create_backend
from eventstore.errors import MalformedIdError
from eventstore.migrate import _config
from oblivio import MemoryClient
from oblivio.bootstrap import migration_locations, open_memory, upgrade_schema
from oblivio.cli import main
from oblivio.errors import NodeUnavailableError
from oblivio.memory import commands, queries
from oblivio.settings import Settings


@pytest.mark.parametrize("bad", ["Acme", "", "a/b", "-acme", "$system", "x" * 64])
def test_an_invalid_namespace_is_refused_where_it_is_configured(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValidationError, match="namespace"):
        Settings(data_dir=tmp_path, namespace=bad)
    if bad:  # an empty variable or argument is "not given": the default namespace
        with pytest.raises(ValidationError, match="namespace"):
            Settings.from_env({"OBLIVIO_NAMESPACE": bad, "OBLIVIO_DATA_DIR": str(tmp_path)})
        with pytest.raises(MalformedIdError, match="namespace"):
            MemoryClient(tmp_path / "data", namespace=bad)
        assert not (tmp_path / "data").exists(), "a refused client created its store"


def test_the_cli_makes_keys_of_a_namespace_or_cluster_wide_ones(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path)]
    runner = CliRunner()

    def create(*options: str) -> str:
        done = runner.invoke(main, [*data, "keys", "create", *options])
        assert done.exit_code == 0, done.output
        return done.output.strip().split("_")[1]

    plain = create("--principal", "auditor")
    acme = create("--principal", "user", "--user-id", "alice", "--namespace", "acme")
    cluster = create("--principal", "operator", "--cluster-wide")
    refused = runner.invoke(
        main, [*data, "keys", "create", "--principal", "auditor", "--cluster-wide"]
    )
    assert refused.exit_code != 0
    assert "only operator keys may be cluster-wide" in refused.output
    both = ["--principal", "operator", "--cluster-wide", "--namespace", "acme"]
    assert runner.invoke(main, [*data, "keys", "create", *both]).exit_code == 2

    ctx = open_memory(Settings(data_dir=tmp_path))
    try:
        with ctx.store.reading() as view:
            found = {k.key_id: k for k in apikeys.list_keys(view.connection, None)}
        entries = [e.data or {} for e in ctx.store.read_audit()]
    finally:
        ctx.store.close()
    assert (found[plain].namespace, found[acme].namespace, found[cluster].namespace) == (
        "default",
        "acme",
        None,
    )
    assert found[acme].subject_ref == ctx.store.subject_ref("acme", "alice")
    created = {e["object_refs"]["api_key"]: e for e in entries if e["action"] == "api_key.created"}
    assert created[cluster]["object_refs"]["scope"] == "cluster-wide"
    assert created[cluster]["namespace"] is None
    assert created[acme]["namespace"] == "acme"
    listing = runner.invoke(main, [*data, "keys", "list"]).output
    assert "(cluster-wide)" in listing
    assert " acme " in listing


def test_existing_keys_move_to_the_namespace_they_were_used_in(
    any_database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before es0007 keys had no namespace: a user key moves to its user's stream's
    namespace, every other key to the server's OBLIVIO_NAMESPACE."""
    settings = Settings(data_dir=tmp_path, database_url=any_database_url, namespace="acme")
    with MemoryClient(settings=settings) as client:
        client.store("I like tea", user_id="alice")
        ref = client.context.store.subject_ref("acme", "alice")
        stranger = client.context.store.subject_ref("acme", "nobody-wrote")
    backend = create_backend(any_database_url)
    try:
        with backend.engine.begin() as conn:
            config = _config(conn, migration_locations(), [])
            command.downgrade(config, "es0006")
            for key_id, principal, subject in (
                ("a" * 16, "user", ref),
                ("b" * 16, "operator", None),
                ("c" * 16, "user", stranger),
            ):
                conn.execute(
                    sa.text(
                        "INSERT INTO api_keys (key_id, secret_hash, principal, subject_ref, "
                        "created_at) VALUES (:k, :h, :p, :s, CURRENT_TIMESTAMP)"
                    ),
                    {"k": key_id, "h": b"\0" * 32, "p": principal, "s": subject},
                )
        monkeypatch.setenv("OBLIVIO_NAMESPACE", "served")
        upgrade_schema(backend.engine)
        with backend.engine.connect() as conn:
            moved = dict(
                conn.execute(sa.select(tables.api_keys.c.key_id, tables.api_keys.c.namespace)).all()
            )
    finally:
        backend.dispose()
    assert {k: moved[k] for k in ("a" * 16, "b" * 16, "c" * 16)} == {
        "a" * 16: "acme",
        "b" * 16: "served",
        "c" * 16: "served",
    }


def test_the_facade_answers_another_namespaces_ids_as_unknown(
    any_database_url: str, tmp_path: Path
) -> None:
    """The operator reads of issue 32 (trusted access, no user id) on both backends."""
    settings = Settings(data_dir=tmp_path, database_url=any_database_url, namespace="home")
    with MemoryClient(settings=settings) as client:
        other = client.context.tenant("other", cluster_wide=False)
        event = commands.store(other, "Alice lives in Oslo", user_id="alice")
        [node] = queries.get_event_nodes(other, event)
        assert queries.get_node(other, node.id) is not None  # there, in its namespace
        assert client.get_event(event) is None
        assert client.get_event_nodes(event) == []
        assert client.get_node(node.id) is None
        assert client.get_assertion_state(node.id) is None
        with pytest.raises(NodeUnavailableError):
            client.reinforce(node.id)
        assert queries.get_node(other, node.id) is not None
        assert client.context.store.head("other", "alice").version == 1  # nothing written
