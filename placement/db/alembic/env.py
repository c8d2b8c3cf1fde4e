"""Alembic environment: runs migrations on the connection placement hands it.

Our revision lives in a table of its own: ``alembic_version`` belongs to
the original placement service, which may share the database
(placement.db.migration)."""

from alembic import context

from placement.db import tables

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=tables.metadata,
                  version_table=tables.VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
