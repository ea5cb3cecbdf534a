"""Running the API under uvicorn with bounded request heads.

uvicorn's httptools protocol takes a request line and headers of any size
(a 20 MB header is read, kept and handed to the app), and the app cannot
refuse them before they are in memory.  ``bounded_protocol`` counts the bytes
of a request's head as they arrive and answers 431 as soon as they pass the
limit, closing the connection, so no more than the limit plus one read
(64 KiB) is ever held.  Body sizes are bounded in the app itself, as it reads
them (``create_app``'s ``max_body_size``).
"""

from __future__ import annotations

from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from oblivio.settings import Settings

_REFUSAL = b"request head too large"


def bounded_protocol(max_head_bytes: int) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, refusing request heads over ``max_head_bytes``."""

    class BoundedHeadProtocol(HttpToolsProtocol):
        _head_bytes = 0
        _in_head = True  # until the first request's headers are complete

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                self._head_bytes += len(data)
            super().data_received(data)
            if self._in_head and self._head_bytes > max_head_bytes:
                self._refuse()

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._head_bytes = True, 0

        def _refuse(self) -> None:
            if self.transport.is_closing():
                return
            self.logger.warning("request head over %d bytes refused", max_head_bytes)
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                b"content-type: text/plain; charset=utf-8\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_REFUSAL), _REFUSAL)
            )
            self.transport.close()

    return BoundedHeadProtocol


def uvicorn_config(app: FastAPI, settings: Settings, **options: Any) -> uvicorn.Config:
    """The uvicorn configuration ``oblivio serve`` runs ``app`` with."""
    return uvicorn.Config(app, http=bounded_protocol(settings.max_header_bytes), **options)
