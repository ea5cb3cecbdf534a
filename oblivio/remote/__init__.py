"""The facade over the HTTP API of a running oblivio server (docs/remote.md)."""

from oblivio.remote.client import AsyncRemoteClient, RemoteClient
from oblivio.remote.transport import RetryPolicy

__all__ = ["AsyncRemoteClient", "RemoteClient", "RetryPolicy"]
