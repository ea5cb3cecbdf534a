"""``/openapi.json`` is byte-identical to the committed snapshot ``tests/http/openapi.json``.

The published document is the API's contract: a change to it must be made
on purpose.  After changing the API deliberately, regenerate the snapshot
with ``.venv/bin/python -m tests.http.test_openapi_snapshot`` and commit it
with the change (docs/http.md, "Published documents").
"""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from oblivio.http import create_app

SNAPSHOT = Path(__file__).with_name("openapi.json")


def published_document() -> bytes:
    """The bytes ``GET /openapi.json`` answers (the schema needs no store)."""
    client = TestClient(create_app(None))  # type: ignore[arg-type]
    response = client.get("/openapi.json")
    assert response.status_code == 200, response.text
    return response.content


def test_the_published_openapi_equals_the_snapshot() -> None:
    assert published_document() == SNAPSHOT.read_bytes(), (
        "/openapi.json changed; if on purpose, regenerate the snapshot: "
        ".venv/bin/python -m tests.http.test_openapi_snapshot"
    )


if __name__ == "__main__":
    SNAPSHOT.write_bytes(published_document())
    print(f"wrote {SNAPSHOT}")
