"""A project's consumers with their type, read from an index alone: ``GET
/usages`` groups a project's (or a user's) consumers by type, and with the
type in the index it never visits the consumers' rows. The original's
indexes on ``consumers`` stay (the original service, handed the database
back, finds the indexes it made).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("consumers_project_user_type_uuid_idx", "consumers",
                    ["project_id", "user_id", "consumer_type_id", "uuid"])
