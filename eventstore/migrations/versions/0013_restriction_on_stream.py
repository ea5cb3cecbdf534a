"""Restriction of processing (GDPR Art. 18) on the stream row as well as in the register

``streams.restricted`` holds the state of the subject's ``subject_restrictions`` row on
every generation of its stream, set and cleared with it under the stream lock, so the
append's conditional UPDATE of the stream row sees it (see eventstore.schema).
Existing restrictions are copied onto their subjects' streams.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "es0013"
down_revision = "es0012"


def upgrade() -> None:
    op.add_column(
        "streams",
        sa.Column("restricted", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.execute(
        "UPDATE streams SET restricted = TRUE WHERE EXISTS (SELECT 1 FROM subject_restrictions r"
        " WHERE r.namespace = streams.namespace AND r.subject_key = streams.subject_key)"
    )


def downgrade() -> None:
    # A plain ALTER TABLE, also on SQLite (3.35 and later): a batch copy of ``streams``
    # would drop the table that ``events`` and ``data_keys`` reference.
    op.drop_column("streams", "restricted")
