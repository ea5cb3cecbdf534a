"""Errors the projections' read side raises (in the one tree rooted at ``OblivioError``)."""

from __future__ import annotations

from eventstore.errors import OperationalError


class NotCaughtUpError(OperationalError):
    """The vector state did not catch up with the caller's last write in time."""


class ProcessingRestrictedError(Exception):
    """Processing of the subject is restricted (GDPR Art. 18): a ranked read uses none
    of their memories.  Raised by the retrieval service, answered by ``oblivio.memory``
    with an empty result marked ``restricted``; never an error a caller sees."""
