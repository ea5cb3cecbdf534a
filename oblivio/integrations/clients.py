"""The oblivio clients the framework integrations work on, named in one place.

An integration is handed a client by its caller; anything else (a path, a URL,
a client of another library) is refused when the integration is built, not at
its first call.  A client type added to oblivio's facade joins ``CLIENT_TYPES``
and ``Client`` here, and every integration accepts it.
"""

from __future__ import annotations

from typing import TypeAlias

from oblivio import MemoryClient, RemoteClient

#: What an integration may be built on: the in-process facade or the HTTP one.
Client: TypeAlias = MemoryClient | RemoteClient
#: The same, for the check at construction (``isinstance``).
CLIENT_TYPES: tuple[type[MemoryClient] | type[RemoteClient], ...] = (MemoryClient, RemoteClient)


def checked_client(client: object, integration: str) -> Client:
    """``client`` if an integration can work on it; else a ``TypeError`` saying what can."""
    if not isinstance(client, CLIENT_TYPES):
        accepted = " or ".join(f"oblivio.{kind.__name__}" for kind in CLIENT_TYPES)
        raise TypeError(
            f"{integration} needs an open {accepted}, not {type(client).__name__}: "
            'for example MemoryClient("./memory"), MemoryClient(database_url=...) or '
            'RemoteClient("http://127.0.0.1:8000", api_key)'
        )
    return client
