"""A small local HTTP server speaking JSON, standing in for an external API in a test."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: (path, request headers, JSON body) -> (status, JSON body or None for none, extra headers)
Respond = Callable[[str, Any, Any], tuple[int, object, dict[str, str]]]


@contextmanager
def json_server(respond: Respond) -> Iterator[str]:
    """Serve every POST in a thread: its JSON body goes to ``respond``, whose answer is
    sent back as JSON.  Yields the server's base URL, ``http://127.0.0.1:PORT/v1``."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, answer, headers = respond(self.path, self.headers, body)
            raw = b"" if answer is None else json.dumps(answer).encode()
            self.send_response(status)
            if answer is not None:
                headers = {"Content-Type": "application/json", **headers}
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
