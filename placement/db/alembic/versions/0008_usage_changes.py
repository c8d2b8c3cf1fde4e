"""The record of usage changes (placement.db.provider_changes.USAGES):
which providers' usage moved, written by triggers on ``inventories.used``,
which the usage mirror of every process follows instead of reading usages
at each request.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

from placement.db import tables, triggers
from placement.db.provider_changes import SHARDS

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_change_shards",
        sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
        **tables.MYSQL_TABLE_OPTIONS,
    )
    # the counters exist before the triggers that move them (a write in
    # between would otherwise go unrecorded)
    op.bulk_insert(sa.table("usage_change_shards", sa.column("shard", sa.Integer),
                            sa.column("version", sa.BigInteger)),
                   [{"shard": shard, "version": 0} for shard in range(SHARDS + 1)])
    op.create_table(
        "usage_changes",
        sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("resource_provider_id", sa.Integer, nullable=False),
        **tables.MYSQL_TABLE_OPTIONS,
    )
    triggers.install(op.get_bind())
