"""The database keeps the derived state: ``inventories.used`` and the
provider change record are written by triggers, whoever writes the rows
they follow (placement.db.triggers). One more counter, the reload shard.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from alembic import op

from placement.db import triggers

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    triggers.install(op.get_bind())
