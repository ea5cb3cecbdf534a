"""Running the API under uvicorn with bounded request heads.

Neither of uvicorn's HTTP/1.1 implementations bounds a request head the way
the settings say: httptools takes a request line and headers of any size (a
20 MB header is read, kept and handed to the app), and h11 refuses past its
own fixed 16 KiB with a 400.  The app cannot refuse a head before it is in
memory, so the protocol does: both bounded protocols below answer 431 and
close the connection as soon as the head being received passes
``max_header_bytes``, so no more than the limit plus one read (at most
256 KiB with asyncio) is ever held; a head that arrived whole in one read is
measured once parsed, before it reaches the app.  Body sizes are bounded in the
app itself, as it reads them (``create_app``'s ``max_body_size``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from collections.abc import Iterable
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


def head_size(method: bytes, target: bytes, headers: Iterable[tuple[bytes, bytes]]) -> int:
    """The bytes of a parsed request head as sent: request line, ``name: value`` lines, the
    blank line.  A head that arrived in one read was parsed whole before the count of
    bytes received could stop it, so each protocol also measures what it parsed."""
    line = len(method) + 1 + len(target) + len(b" HTTP/1.1\r\n")
    return line + sum(len(name) + 2 + len(value) + 2 for name, value in headers) + 2


def bounded_httptools(max_head_bytes: int) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol, refusing request heads over ``max_head_bytes``."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class BoundedHttpTools(HttpToolsProtocol):
        _head_bytes = 0
        _in_head = True  # until the first request's headers are complete
        _refused = False  # the parser goes on with what it was fed: ignore it

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if self._in_head:
                self._head_bytes += len(data)
            super().data_received(data)
            if self._in_head and self._head_bytes > max_head_bytes:
                self._refuse()

        def on_headers_complete(self) -> None:
            self._in_head = False
            if self._refused:
                return
            if head_size(self.parser.get_method(), self.url, self.headers) > max_head_bytes:
                self._refuse()  # before the request reaches the app
                return
            super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            if not self._refused:
                super().on_body(body)

        def on_message_complete(self) -> None:
            if self._refused:
                return
            super().on_message_complete()
            self._in_head, self._head_bytes = True, 0

        def _refuse(self) -> None:
            self._refused = True
            _refuse(self.transport, self.logger, max_head_bytes)

    return BoundedHttpTools


class _HeadTooLargeError(h11.RemoteProtocolError):
    def __init__(self) -> None:
        super().__init__("request head too large", error_status_hint=431)


class _BoundedConnection(h11.Connection):
    """h11's server side, for which a request whose head is over ``max_head_bytes`` is a
    protocol error, raised before the request is handed on."""

    def __init__(self, max_head_bytes: int, max_incomplete_event_size: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size)
        self.max_head_bytes = max_head_bytes
        self.head_too_large = False

    def next_event(self) -> Any:
        event = super().next_event()
        if isinstance(event, h11.Request):
            size = head_size(event.method, event.target, event.headers.raw_items())
            if size > self.max_head_bytes:
                self.head_too_large = True
                raise _HeadTooLargeError()
        return event


def bounded_h11(max_head_bytes: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, refusing request heads over ``max_head_bytes``.

    While h11 waits for a request (``their_state`` IDLE), everything it has
    received and not parsed is that request's head so far.  h11's own bound is
    set one read above ours (the connection's incomplete-event size) so that ours
    answers first.  A head parsed whole is measured by the connection, whose
    protocol error uvicorn answers through ``send_400_response``: 431 here.
    """

    class BoundedH11(H11Protocol):
        def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
            super().__init__(config, *args, **kwargs)
            self.conn = _BoundedConnection(max_head_bytes, max_head_bytes + _MAX_READ)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            unparsed, _closed = self.conn.trailing_data
            if self.conn.their_state is h11.IDLE and len(unparsed) > max_head_bytes:
                _refuse(self.transport, self.logger, max_head_bytes)

        def send_400_response(self, msg: str) -> None:
            conn = self.conn
            if isinstance(conn, _BoundedConnection) and conn.head_too_large:
                _refuse(self.transport, self.logger, max_head_bytes)
            else:
                super().send_400_response(msg)

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
    return uvicorn.Config(app, http=bounded_h11(limit), **options)


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
