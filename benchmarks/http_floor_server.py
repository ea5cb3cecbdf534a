"""The FastAPI floor of ``POST /v1/events``: what serving ``store()`` costs with FastAPI
and uvicorn in the stack and nothing of oblivio's own HTTP layer.

    python benchmarks/http_floor_server.py DATA_DIR DATABASE_URL PORT TOKENS_JSON

A bare FastAPI app with one sync route that validates a body with the route's
``content`` field and calls the same ``commands.store_memory`` as the product's
route, served by uvicorn as ``oblivio serve --no-workers`` serves (the same
``uvicorn_config`` and logging setup); no authentication (the bearer token picks
the user from ``TOKENS_JSON``, a plain dictionary lookup), no dependencies, no
middleware, no response model.  ``GET /v1/health`` answers so the benchmark can
wait for it.  ``benchmarks/http_server_ab.py --floor`` starts it; the tree
whose ``store()`` it calls is first on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request
from pydantic import BaseModel

from oblivio.bootstrap import open_memory
from oblivio.cli_ops import _log_config
from oblivio.http.server import uvicorn_config
from oblivio.memory import commands
from oblivio.settings import Settings


class StoreBody(BaseModel):
    content: str


def floor_app(settings: Settings, users_by_token: dict[str, str]) -> FastAPI:
    memory = open_memory(settings)
    app = FastAPI()

    @app.post("/v1/events", status_code=201)
    def store_event(body: StoreBody, request: Request) -> dict[str, object]:
        token = request.headers["authorization"].removeprefix("Bearer ")
        stored = commands.store_memory(memory, body.content, user_id=users_by_token[token])
        return {"event_id": stored.event_id, "node_ids": list(stored.node_ids)}

    @app.get("/v1/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def main() -> None:
    data_dir, database_url, port, tokens = sys.argv[1:5]
    settings = Settings(data_dir=Path(data_dir), database_url=database_url)
    users = {token: user for user, token in json.loads(Path(tokens).read_text()).items()}
    config = uvicorn_config(
        floor_app(settings, users),
        settings,
        host="127.0.0.1",
        port=int(port),
        log_config=_log_config(),
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
