"""Alembic environment: runs migrations on the connection placement hands it."""

from alembic import context

from placement.db import tables

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=tables.metadata)
with context.begin_transaction():
    context.run_migrations()
