"""Errors the projections' read side raises (in the one tree rooted at ``OblivioError``)."""

from __future__ import annotations

from eventstore.errors import OperationalError


class NotCaughtUpError(OperationalError):
    """The vector state did not catch up with the caller's last write in time."""
