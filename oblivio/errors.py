"""Errors of the memory operations, in the one tree rooted at ``OblivioError``.

Where the seeds specify ``ValueError`` the error derives from it, so callers
written against those contracts catch it unchanged.
"""

from __future__ import annotations

from eventstore.errors import (
    ConflictError,
    NotFoundError,
    OblivioError,
)
from eventstore.errors import EventUnavailableError as EventUnavailableError
from eventstore.errors import InvalidInputError as InvalidInputError
from projections.errors import NotCaughtUpError as NotCaughtUpError


class NodeUnavailableError(NotFoundError, ValueError):
    """Node is not available."""


class EvidenceUnavailableError(NotFoundError, ValueError):
    """Evidence event is not available in the node owner and scope"""


class OwnerScopeMismatchError(InvalidInputError):
    """Both nodes must belong to the same owner and scope."""


class IdempotencyConflictError(ConflictError, ValueError):
    """This idempotency key was already used for a different request."""


class LifecycleConflictError(ConflictError, ValueError):
    """The node's lifecycle does not allow this change."""


class NoLikelyUpdateError(InvalidInputError, ValueError):
    """No newer memory likely updates this node (or the decision was already confirmed or
    rejected)."""


class ItemScopeConflictError(ConflictError, ValueError):
    """The item exists in another scope; delete it before storing it in this one."""


# -- answers of a remote server (oblivio.RemoteClient) that the facade never gives ------------


class UnauthorizedError(OblivioError, PermissionError):
    """The server refused the API key: missing, wrong, revoked or expired."""


class ForbiddenError(OblivioError, PermissionError):
    """This API key's principal may not do this."""


class ServerError(OblivioError):
    """The server could not complete the request; its log has the details."""
