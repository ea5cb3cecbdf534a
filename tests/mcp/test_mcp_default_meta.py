"""``oblivio mcp --default-meta``: every memory the agent stores or ingests starts from it."""

from __future__ import annotations

from pathlib import Path

import anyio
from click.testing import CliRunner
from mcp import ClientSession

from oblivio import MemoryClient
from oblivio.cli import main
from oblivio.settings import Settings
from tests.mcp.test_mcp_server import make_key, payload, server, session_run


def test_stored_memories_carry_the_servers_default_meta(tmp_path: Path) -> None:
    key = make_key(tmp_path, "user", "alice")
    params = server(tmp_path, key)
    params.args.extend(["--default-meta", '{"channel": "mcp", "confidence": 0.8}'])

    async def scenario(session: ClientSession) -> tuple[str, str]:
        stored = payload(await session.call_tool("memory_store", {"content": "I live in Oslo"}))
        message = {"message": "I use Vim.", "first_person_owner": True}
        ingested = payload(await session.call_tool("memory_ingest", message))
        # The retrieval's meta filter sees it, by value or by a string's prefix.
        for channel, found in (("mcp", True), ({"$prefix": "mc"}, True), ({"$prefix": "w"}, False)):
            query = {"query": "Oslo", "meta": {"channel": channel}}
            hits = payload(await session.call_tool("memory_retrieve", query))
            assert ("I live in Oslo" in {h["content"] for h in hits}) is found, channel
        return str(stored["event_id"]), str(ingested["event_id"])

    stored_id, ingested_id = anyio.run(session_run, params, scenario)
    with MemoryClient(settings=Settings(data_dir=tmp_path)) as client:
        stored = client.get_event(stored_id, user_id="alice")
        ingested = client.get_event(ingested_id, user_id="alice")
    assert stored is not None
    assert stored.meta == {"channel": "mcp", "confidence": 0.8}
    assert ingested is not None
    assert ingested.meta == {
        "channel": "mcp",
        "confidence": 0.8,
        "oblivio_first_person_owner_v1": True,
    }


def test_a_default_meta_that_is_not_a_json_object_is_refused(tmp_path: Path) -> None:
    # Refused before the server starts: the command itself, in this process (a subprocess
    # per value would cost its start-up three times for the same code).
    key = make_key(tmp_path, "user", "alice")
    for bad, says in (
        ("[1]", "must be a JSON object"),
        ("{nope", "not JSON"),
        ('{"confidence": 3}', "between 0 and 1"),
    ):
        done = CliRunner().invoke(
            main,
            ["--data-dir", str(tmp_path), "mcp", "--default-meta", bad],
            env={"OBLIVIO_API_KEY": key},
            input="",
        )
        assert done.exit_code != 0
        assert says in done.output
