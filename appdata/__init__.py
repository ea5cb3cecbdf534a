"""The application's own tables: what oblivio keeps beside the log, not in it.

What belongs here: tables the application needs for running, that are not
derived from events and hold no event content, with the SQL that reads and
writes them; today API keys (``apikeys``), console sign-in sessions
(``console_sessions``), the periodic jobs' leases and APScheduler's job store
(``leases``, ``tables.apscheduler_jobs``), and the compliance console's
read-only lists (``oversight``).  The log's own tables stay in ``eventstore``;
tables derived from the log belong to ``projections``.

This package sits above ``eventstore`` (whose engine, transactions and column
types it uses) and below ``workers`` (the scheduler takes its leases here); it
is, with ``eventstore`` and the projections' tables, one of the places allowed
to touch SQLAlchemy.  Its tables migrate on their own Alembic branch
(``migrations/versions``, revisions ``ap0001``, ``ap0002`` …), which the
composition root runs with the log's and the projections' branches.  A new
table goes into ``tables.py`` with a new ``ap`` migration.
"""

from __future__ import annotations

from pathlib import Path

#: This package's Alembic branch, for the composition root's migrations (its tables:
#: ``appdata.tables.metadata``).
MIGRATIONS = Path(__file__).parent / "migrations" / "versions"

__all__ = ["MIGRATIONS"]
