"""the application's tables get their own branch: adopt what the log's branch created

``api_keys``, ``console_sessions``, ``scheduler_leases`` and ``apscheduler_jobs``
were created (and changed) by the log's migrations es0001-es0007, which stay as
written: they are history, and every database that exists went through them.
From this revision on, the tables belong to ``appdata`` and change only on
this branch.  Adopting them changes nothing on disk, so every database keeps
its rows.  The branch waits for es0007, the last revision that shaped these
tables (``api_keys.namespace``), so each later ``ap`` revision finds them in
their last shape.  (Not for the log's head: a revision another branch
``depends_on`` leaves Alembic's version table, which the quick check of
``eventstore.migrate.pending`` does not model.)
"""

from __future__ import annotations

revision = "ap0001"
down_revision = None
branch_labels = ("appdata",)
depends_on = "es0007"


def upgrade() -> None:
    """Nothing to do: the tables are there, made by the log's branch."""


def downgrade() -> None:
    """Nothing to undo: the tables stay with the log's branch that made them."""
