"""A project's usages kept by the database (placement.db.triggers): per
project, user, consumer type and class the sum of its consumers'
allocations, per consumer its number of allocation rows, per project, user
and type its number of consumers with allocations. ``GET /usages`` reads a
few rows of them instead of joining every consumer of the project to its
allocations.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

from placement.db import tables, triggers

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _group() -> list[sa.Column]:
    return [sa.Column(name, sa.Integer, primary_key=True, autoincrement=False)
            for name in ("project_id", "user_id", "consumer_type_id")]


def upgrade() -> None:
    op.create_table(
        "project_usages", *_group(),
        sa.Column("resource_class_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("used", sa.BigInteger, nullable=False),
        sa.Column("allocations", sa.BigInteger, nullable=False),
        **tables.MYSQL_TABLE_OPTIONS,
    )
    op.create_table(
        "consumer_allocations",
        sa.Column("consumer_id", sa.String(36), primary_key=True, autoincrement=False),
        sa.Column("allocations", sa.BigInteger, nullable=False),
        **tables.MYSQL_TABLE_OPTIONS,
    )
    op.create_table(
        "project_consumers", *_group(),
        sa.Column("consumers", sa.BigInteger, nullable=False),
        **tables.MYSQL_TABLE_OPTIONS,
    )
    bind = op.get_bind()
    triggers.install(bind)
    triggers.recompute_project_usages(bind)
