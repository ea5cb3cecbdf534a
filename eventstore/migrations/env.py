"""Alembic environment for oblivio: always run programmatically.

The caller (``eventstore.migrate``) passes an open connection and the target
metadata through ``config.attributes``; nothing is read from an ini file and
no engine is created here.
"""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=context.config.attributes.get("target_metadata"),
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
