"""The main flows over real HTTP: uvicorn on a loopback port, and ``oblivio serve``.

Both servers run the worker loops next to the API, as ``oblivio serve`` does,
so a forget accepted without waiting (202) completes on its own and its
status URL later shows the certificate.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx

from oblivio.bootstrap import open_memory
from oblivio.settings import Settings
from tests.http._flow import FlowKeys, auth, expect, run_main_flow
from tests.http._serve import oblivio_serve
from tests.http.conftest import ALICE, ALSO_ON_CITUS, BOB, HTTP_TIMEOUT, LiveServer, create_key


def backend_of(settings: Settings) -> str:
    url = settings.database_url or ""
    return "postgresql" if url.startswith("postgres") else "sqlite"


@ALSO_ON_CITUS
def test_main_flow_over_uvicorn(live_server: LiveServer) -> None:
    tokens = live_server.world.tokens
    keys = FlowKeys(tokens["user"], tokens["other_user"], tokens["operator"], tokens["auditor"])
    with live_server.client() as http:
        run_main_flow(http, keys, live_server.world.ctx.store.backend.name)


def test_main_flow_through_oblivio_serve(any_database_url: str, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", database_url=any_database_url)
    with oblivio_serve(settings) as served:
        operator = served.operator_key
        # The printed key is a working operator key; the others are issued the way
        # `oblivio keys create` does, on the same store.
        memory = open_memory(settings)
        try:
            keys = FlowKeys(
                create_key(memory, "user", ALICE),
                create_key(memory, "user", BOB),
                operator,
                create_key(memory, "auditor"),
            )
        finally:
            memory.store.close()
        request_id = f"req-{uuid.uuid4().hex}"
        with httpx.Client(base_url=served.base_url, timeout=HTTP_TIMEOUT) as http:
            expect(http.get("/v1/events", params={"user_id": ALICE}, headers=auth(operator)), 200)
            run_main_flow(http, keys, backend_of(settings))
            health = http.get("/v1/health", headers={"X-Request-ID": request_id})
            assert health.headers["x-request-id"] == request_id
        process = served.process
    process.stop()
    # Each access line of oblivio serve is one JSON document and nothing else, for log
    # shippers (checked here, on the server this test starts anyway).
    lines = [json.loads(text) for text in process.lines if request_id in text]
    assert lines, "no JSON access line for the request:\n" + "".join(process.lines)
    assert lines[0]["request_id"] == request_id
    assert (lines[0]["route"], lines[0]["status"]) == ("/v1/health", 200)
