"""Running the API under uvicorn with bounded request heads.

Neither of uvicorn's HTTP/1.1 implementations bounds a request head the way
the settings say: httptools takes a request line and headers of any size (a
20 MB header is read, kept and handed to the app), and h11 refuses past its
own fixed 16 KiB with a 400.  The app cannot refuse a head before it is in
memory, so the protocol does: both bounded protocols below answer 431 and
close the connection as soon as the head being received passes
``max_header_bytes``, so no more than the limit plus one read (at most
256 KiB with asyncio) is ever held.  Body sizes are bounded in the app itself,
as it reads them (``create_app``'s ``max_body_size``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from typing import Any, Literal

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from oblivio.settings import Settings

#: The HTTP/1.1 implementations ``oblivio serve --http`` offers (``auto``: httptools
#: when installed, as uvicorn chooses).
HttpImplementation = Literal["auto", "httptools", "h11"]
HTTP_IMPLEMENTATIONS: tuple[HttpImplementation, ...] = ("auto", "httptools", "h11")

_REFUSAL = b"request head too large"
#: The most one read of asyncio's selector transport hands a protocol.
_MAX_READ = 256 * 1024


def _refuse(transport: asyncio.Transport, logger: logging.Logger, limit: int) -> None:
    if transport.is_closing():
        return
    logger.warning("request head over %d bytes refused", limit)
    transport.write(
        b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
        b"content-type: text/plain; charset=utf-8\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_REFUSAL), _REFUSAL)
    )
    transport.close()


def bounded_httptools(max_head_bytes: int) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol, refusing request heads over ``max_head_bytes``."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class BoundedHttpTools(HttpToolsProtocol):
        _head_bytes = 0
        _in_head = True  # until the first request's headers are complete

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                self._head_bytes += len(data)
            super().data_received(data)
            if self._in_head and self._head_bytes > max_head_bytes:
                _refuse(self.transport, self.logger, max_head_bytes)

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._head_bytes = True, 0

    return BoundedHttpTools


def bounded_h11(max_head_bytes: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, refusing request heads over ``max_head_bytes``.

    While h11 waits for a request (``their_state`` IDLE), everything it has
    received and not parsed is that request's head so far.  h11's own bound is
    set one read above ours (``h11_config``) so that ours answers first.
    """

    class BoundedH11(H11Protocol):
        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            unparsed, _closed = self.conn.trailing_data
            if self.conn.their_state is h11.IDLE and len(unparsed) > max_head_bytes:
                _refuse(self.transport, self.logger, max_head_bytes)

    return BoundedH11


def uvicorn_config(
    app: FastAPI, settings: Settings, *, http: HttpImplementation = "auto", **options: Any
) -> uvicorn.Config:
    """The uvicorn configuration ``oblivio serve`` runs ``app`` with."""
    limit = settings.max_header_bytes
    if http == "auto":
        http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    options.update(_forwarding(settings))
    if http == "httptools":
        return uvicorn.Config(app, http=bounded_httptools(limit), **options)
    return uvicorn.Config(
        app, http=bounded_h11(limit), h11_max_incomplete_event_size=limit + _MAX_READ, **options
    )


def _forwarding(settings: Settings) -> dict[str, Any]:
    """Whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` uvicorn believes: only the
    proxies the settings name.

    uvicorn's own default believes them from loopback (and ``FORWARDED_ALLOW_IPS``), so
    any local process, or a proxy that passes on a client's header, could choose the
    address the failed-authentication throttle counts.  From a named proxy, the client
    is the right-most address in the chain that is not itself a named proxy: what that
    proxy saw connecting to it, not what the client wrote.
    """
    proxies = list(settings.trusted_proxies)
    return {"proxy_headers": bool(proxies), "forwarded_allow_ips": proxies}
