"""Inventories carry their usage: ``used``, the sum of their allocations,
kept by every allocation write from now on, computed here for the
allocations already there.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("inventories",
                  sa.Column("used", sa.BigInteger, nullable=False, server_default="0"))
    inventories = sa.table("inventories", sa.column("resource_provider_id"),
                           sa.column("resource_class_id"), sa.column("used"))
    allocations = sa.table("allocations", sa.column("resource_provider_id"),
                           sa.column("resource_class_id"), sa.column("used"))
    op.execute(inventories.update().values(used=(
        sa.select(sa.func.coalesce(sa.func.sum(allocations.c.used), 0))
        .where(allocations.c.resource_provider_id == inventories.c.resource_provider_id,
               allocations.c.resource_class_id == inventories.c.resource_class_id)
        .scalar_subquery())))
