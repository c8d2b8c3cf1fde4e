"""Provider changes: what the per-process provider caches follow.

Revision ID: 0003
Revises: 0002_binary_collation
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002_binary_collation"
branch_labels = None
depends_on = None

MYSQL_TABLE_OPTIONS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
                       "mysql_collate": "utf8mb4_nopad_bin"}


def upgrade() -> None:
    # their rows are standard data (placement.db.migration.sync_standard_data)
    op.create_table(
        "provider_change_shards",
        sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_table(
        "provider_changes",
        sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("resource_provider_id", sa.Integer, nullable=False),
        **MYSQL_TABLE_OPTIONS,
    )

