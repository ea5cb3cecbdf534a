"""One JSON form on every surface: the CLI, MCP, exports and the console write values
(times above all) as the HTTP API does."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from click.testing import CliRunner
from pydantic import TypeAdapter

from appdata import apikeys
from oblivio import MemoryClient
from oblivio.bootstrap import open_event_store
from oblivio.cli import main
from oblivio.http.schemas import KeyOut
from oblivio.json_text import dumps, iso, plain
from oblivio.settings import Settings

MOMENTS = [
    datetime(2026, 12, 5, 21, 49, 25, 444556, tzinfo=UTC),
    datetime(2026, 12, 5, 21, 49, 25, tzinfo=UTC),
    datetime(2026, 12, 5, 23, 49, 25, 1, tzinfo=timezone(timedelta(hours=2))),
]


def test_times_are_written_as_the_http_models_write_them() -> None:
    http = TypeAdapter(datetime)
    for moment in MOMENTS:
        written = http.dump_json(moment).decode()
        assert dumps(moment) == written
        assert json.dumps(iso(moment)) == written
    assert iso(MOMENTS[0]) == "2026-12-05T21:49:25.444556Z"
    assert plain({"at": MOMENTS[1], "id": uuid.UUID(int=1)}) == {
        "at": "2026-12-05T21:49:25Z",
        "id": "00000000-0000-0000-0000-000000000001",
    }


def test_keys_list_json_is_what_the_http_api_answers(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    for principal in (["auditor"], ["user", "--user-id", "ana"]):
        created = CliRunner().invoke(main, [*data, "keys", "create", "--principal", *principal])
        assert created.exit_code == 0, created.output
    listed = CliRunner().invoke(main, [*data, "keys", "list", "--json"])
    assert listed.exit_code == 0, listed.output

    store = open_event_store(Settings(data_dir=tmp_path / "data"))
    try:
        with store.reading() as view:
            keys = apikeys.list_keys(view.connection, apikeys.ALL_NAMESPACES)
    finally:
        store.close()
    assert json.loads(listed.output) == [KeyOut.of(k).model_dump(mode="json") for k in keys]
    assert [k["principal"] for k in json.loads(listed.output)] == ["auditor", "user"]
    assert all(k["created_at"].endswith("Z") for k in json.loads(listed.output))


def test_a_subject_export_writes_times_as_the_api_does(tmp_path: Path) -> None:
    with MemoryClient(tmp_path / "data") as client:
        client.store("I keep bees.", user_id="ana")
        exported = client.export_subject(user_id="ana")
    assert exported["exported_at"].endswith("Z")
    [event] = exported["events"]
    assert event["recorded_at"].endswith("Z")
    assert all(node["created_at"].endswith("Z") for node in exported["nodes"])
