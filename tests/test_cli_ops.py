"""Operating commands: ``oblivio keys list``, ``oblivio verify-export``, and start-up imports."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from appdata import apikeys
from certificates.base64url import b64url_decode
from eventstore import EventStore
from eventstore.store import utc_now
from oblivio import MemoryClient
from oblivio.cli import main


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_keys_list_says_when_there_are_none(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    assert run(*data, "keys", "list") == (
        "no API keys yet; create one with: oblivio keys create --principal operator\n"
    )
    assert json.loads(run(*data, "keys", "list", "--json")) == []

    token = run(*data, "keys", "create", "--principal", "auditor").strip()
    listing = run(*data, "keys", "list")
    assert token.split("_")[1] in listing
    assert "auditor" in listing
    assert "no API keys" not in listing


def test_expired_and_revoked_keys_are_not_counted_as_active(store: EventStore) -> None:
    """``oblivio serve`` prints a first operator key when none is active: an expired
    one must not count, or a store whose operator keys all expired locks its operator out."""
    now = utc_now()

    def issue(kind: str, expires_at: datetime | None = None) -> apikeys.KeyInfo:
        with store.transaction() as tx:
            return apikeys.issue(
                tx.connection, kind, None, None, now, expires_at, namespace="default"
            )[0]

    issue("operator", now - timedelta(seconds=1))
    revoked = issue("operator")
    with store.transaction() as tx:
        apikeys.revoke(tx.connection, revoked.key_id, now, apikeys.ALL_NAMESPACES)
    issue("auditor")
    with store.reading() as view:
        assert apikeys.count_active(view.connection, "operator", now) == 0
    issue("operator", now + timedelta(hours=1))
    with store.reading() as view:
        assert apikeys.count_active(view.connection, "operator", now) == 1
        assert apikeys.count_active(view.connection, "operator", now + timedelta(hours=2)) == 0


def test_verify_export_checks_subject_and_audit_exports_offline(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    with MemoryClient(tmp_path / "data") as client:
        client.store("I keep bees.", user_id="ana")
        client.store("I live by the sea.", user_id="ana")
        client.store("I am leaving.", user_id="bob")
        client.forget("bob", wait=True)  # audit entries to export
    subject, audit, jwks = (tmp_path / n for n in ("ana.json", "audit.jsonl", "jwks.json"))
    run(*data, "export", "subject", "ana", "-o", str(subject))
    run(*data, "export", "audit", "-o", str(audit))
    jwks.write_text(run(*data, "keys", "jwks"))

    said = run("verify-export", str(subject), "--jwks", str(jwks))
    assert said.startswith("ok: subject export of ")
    assert "2 events" in said
    assert run("verify-export", str(audit), "--jwks", str(jwks)).startswith("ok: ")

    exported = json.loads(subject.read_text())
    exported["events"][0]["data"]["content"] = "I keep wasps."
    subject.write_text(json.dumps(exported))
    refused = CliRunner().invoke(main, ["verify-export", str(subject), "--jwks", str(jwks)])
    assert refused.exit_code == 1
    assert "does not match its signed manifest" in refused.output

    lines = audit.read_text().splitlines(keepends=True)
    assert len(lines) >= 3
    audit.write_text("".join(lines[:-2] + lines[-1:]))  # one entry dropped
    refused = CliRunner().invoke(main, ["verify-export", str(audit), "--jwks", str(jwks)])
    assert refused.exit_code == 1
    assert "manifest" in refused.output

    stranger = tmp_path / "stranger.json"
    stranger.write_text(run("--data-dir", str(tmp_path / "other"), "keys", "jwks"))
    run(*data, "export", "subject", "ana", "-o", str(subject))
    refused = CliRunner().invoke(main, ["verify-export", str(subject), "--jwks", str(stranger)])
    assert refused.exit_code == 1
    assert "does NOT verify (unknown_kid)" in refused.output


def test_forgetting_someone_the_store_never_held_says_so(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    result = CliRunner().invoke(main, [*data, "forget", "nobody-at-all"])
    assert result.exit_code == 0, result.output
    assert "No data was held for this subject" in result.stderr
    payload = json.loads(b64url_decode(json.loads(result.stdout)["payload"]))
    assert payload["erasure"]["data_held"] is False


# -- start-up: what a command imports ---------------------------------------------------
# Timing is measured with a benchmark, not here (docs/operations.md); what is tested
# is the cause: the light commands must not import the heavy parts at all.

HEAVY = ("alembic", "numpy", "fastapi", "uvicorn", "mcp", "apscheduler", "psycopg", "wordllama")
STORE = ("sqlalchemy", "pydantic", "eventstore", "projections", "workers", "certificates")


def imported_by(*args: str, data_dir: Path) -> set[str]:
    probe = (
        "import sys; from oblivio.cli import main\n"
        "try:\n"
        f"    main({[*args]!r}, standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write('\\n'.join(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=data_dir,
    )
    assert result.returncode == 0, result.stdout
    names = result.stderr.splitlines()  # the command's own output is on stdout
    return {name.split(".")[0] for name in names} | set(names)


def test_help_imports_neither_the_store_nor_the_plugins(tmp_path: Path) -> None:
    modules = imported_by("--help", data_dir=tmp_path)
    assert not modules & {*HEAVY, *STORE, "oblivio_bench", "oblivio.client"}


def test_a_commands_help_reads_the_settings_without_the_store(tmp_path: Path) -> None:
    modules = imported_by("keys", "list", "--help", data_dir=tmp_path)
    assert "oblivio.settings" in modules
    assert not modules & {*HEAVY, "sqlalchemy", "eventstore", "projections", "cryptography"}


def test_keys_list_opens_the_log_without_the_memory_stack(tmp_path: Path) -> None:
    run("--data-dir", str(tmp_path / "data"), "keys", "list")  # created and migrated
    modules = imported_by("--data-dir", str(tmp_path / "data"), "keys", "list", data_dir=tmp_path)
    assert "eventstore" in modules
    assert not modules & {
        *HEAVY,
        "certificates",
        "cryptography",  # listing keys decrypts nothing
        "workers",
        "oblivio.client",
        "oblivio.memory",
        "projections.storage",  # the schema is current: no tables, no Alembic
        "projections.embedders",
        "projections.graph",
        "projections.vectors",
    }


def test_the_principal_choices_are_the_key_principals() -> None:
    from appdata.apikeys import PRINCIPALS as KNOWN
    from oblivio.cli_ops import PRINCIPALS

    assert set(PRINCIPALS) == set(KNOWN)


def test_the_settings_limits_are_the_logs() -> None:
    from appdata.apikeys import MAX_CACHE_SECONDS
    from eventstore import DEFAULT_MAX_EVENT_BYTES
    from oblivio import settings

    assert settings.DEFAULT_MAX_EVENT_BYTES == DEFAULT_MAX_EVENT_BYTES
    assert settings.MAX_API_KEY_CACHE_SECONDS == MAX_CACHE_SECONDS


def test_the_http_choices_are_the_servers_implementations() -> None:
    from oblivio.cli_ops import HTTP_IMPLEMENTATIONS
    from oblivio.http import server

    assert HTTP_IMPLEMENTATIONS == server.HTTP_IMPLEMENTATIONS


# -- embedder names: one rule for the settings, the CLI and HTTP --------------------------


def test_the_embedder_name_rule_is_the_resolvers() -> None:
    """``EMBEDDER_NAME`` (settings, ``--embedder``, the rebuild route) accepts exactly
    the names ``resolve_embedder`` takes, checked here without loading any model."""
    import re

    from projections.embedders import (
        EMBEDDER_NAME,
        MAX_HASHING_DIMENSION,
        UnknownEmbedderError,
        WordLlamaEmbedder,
        resolve_embedder,
    )

    def published(name: str) -> bool:
        return re.match(EMBEDDER_NAME, name) is not None

    def resolves(name: str) -> bool:
        try:
            resolve_embedder(name)
        except UnknownEmbedderError:
            return False
        return True

    for dimension in [*range(0, 1100), *range(3990, 4200), 9999, 65536, 10**6]:
        name = f"hashing:{dimension}"
        assert published(name) == resolves(name) == (0 < dimension <= MAX_HASHING_DIMENSION)
    for dimension in range(0, 300):
        assert published(f"wordllama:{dimension}") == (dimension in WordLlamaEmbedder.DIMENSIONS)
    for name in (
        "hashing",
        "wordllama",
        "openai:text-embedding-3-small",
        "sentence-transformers:x",
    ):
        assert published(name)
    for name in ("word2vec", "hashing:", "hashing:-1", "hashing:12a", "openai:", "openai: x"):
        assert not published(name)


def test_an_absurd_embedder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for args in (
        ["--embedder", "hashing:65536", "keys", "list"],
        ["serve", "--embedder", "hashing:0"],
        ["rebuild", "vectors", "--all", "--embedder", "hashing:4097"],
    ):
        refused = CliRunner().invoke(main, ["--data-dir", str(data), *args])
        assert refused.exit_code == 2, refused.output
        assert "is not an embedder name" in refused.output
    from_env = CliRunner().invoke(
        main, ["--data-dir", str(data), "keys", "list"], env={"OBLIVIO_EMBEDDER": "hashing:65536"}
    )
    assert from_env.exit_code == 1, from_env.output
    assert (
        "invalid settings:\n  embedder: Value error, 'hashing:65536' is not an embedder name"
        in (from_env.output)
    )
    assert not data.exists()


def test_settings_refuse_infinite_and_nan_numbers(tmp_path: Path) -> None:
    for variable in ("OBLIVIO_ERASURE_DEADLINE_HOURS", "OBLIVIO_KEK_RETIRE_DAYS"):
        for value in ("inf", "nan", "-inf"):
            refused = CliRunner().invoke(
                main, ["--data-dir", str(tmp_path / "data"), "keys", "list"], env={variable: value}
            )
            assert refused.exit_code == 1, (variable, value, refused.output)
            assert "invalid settings:" in refused.output
    assert not (tmp_path / "data").exists()


def test_the_command_line_sets_the_collector_up_for_start_up_and_exit() -> None:
    # oblivio.cli raises the young threshold to 2000 (from 3.11's 700),
    # keeping the older generations' thresholds, and freezes its objects at exit so
    # the interpreter's collector passes skip them; an exit handler registered
    # before the import runs after its own.
    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: sys.stdout.write(str(gc.get_freeze_count() > 0)))\n"
        "gc.set_threshold(700, 9, 8)\n"
        "import oblivio.cli\n"
        "sys.stdout.write(repr(gc.get_threshold()))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout == "(2000, 9, 8)True"


def test_rebuild_vectors_says_what_its_count_is_of(tmp_path: Path) -> None:
    # The job's count is of nodes holding another embedder's vector; the output must
    # say that memories not embedded yet are embedded by the vector projection, or a
    # "0" reads as "nothing will be embedded".
    data = tmp_path / "data"
    with MemoryClient(data, embedder="hashing:32") as client:
        client.store("The cellist practises scales before breakfast", user_id="ines")
    moved = CliRunner().invoke(
        main, ["--data-dir", str(data), "rebuild", "vectors", "--all", "--embedder", "hashing:48"]
    )
    assert moved.exit_code == 0, moved.output
    assert "0 nodes to re-embed with hashing-v1-48 (memories not embedded yet get" in moved.output
    assert "1/1 subjects switched" in moved.output
    with MemoryClient(data, embedder="hashing:48") as client:
        [found] = client.retrieve("cellist scales", user_id="ines", limit=1).nodes
        assert "cellist" in found.content
