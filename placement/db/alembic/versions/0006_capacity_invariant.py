"""Capacity kept by the database: the allocation triggers refuse a row
that takes an inventory past its capacity, unless the write's own
transaction allows it in ``allocation_allowances`` (placement.db.triggers).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

from placement.db import tables, triggers

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "allocation_allowances",
        sa.Column("resource_provider_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("resource_class_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("used", sa.BigInteger, nullable=False),
        **tables.MYSQL_TABLE_OPTIONS,
    )
    triggers.install(op.get_bind())
