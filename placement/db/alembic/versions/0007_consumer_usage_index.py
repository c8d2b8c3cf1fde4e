"""A consumer's allocations read from the index alone: ``GET /usages``
sums a project's allocations per class, consumer by consumer, and with
the class and amount in the index it never visits the table's rows. The
original's index on ``consumer_id`` stays (the original service, handed the
database back, finds the indexes it made).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("allocations_consumer_class_used_idx", "allocations",
                    ["consumer_id", "resource_class_id", "used"])
