"""Binary collation on MariaDB: uuids, names and trait names compare
exactly there, as they do on SQLite and PostgreSQL. The default collation
(utf8mb4_general_ci) folds letter case and accents and ignores trailing
spaces, so ``/traits/CUSTOM_abc`` found CUSTOM_ABC and a provider named
``"rp "`` could not coexist with ``"rp"``.

Revision ID: 0002_binary_collation
Revises: 0001
Create Date: 2026-12-01
"""

from alembic import op

revision = "0002_binary_collation"
down_revision = "0001"
branch_labels = None
depends_on = None

# Every table of 0001. NO PAD: "rp" and "rp " are two names, as elsewhere.
TABLES = (
    "resource_providers", "resource_classes", "inventories", "allocations", "projects",
    "users", "consumer_types", "consumers", "traits", "resource_provider_traits",
    "placement_aggregates", "resource_provider_aggregates",
)
COLLATION = "utf8mb4_nopad_bin"


def upgrade() -> None:
    if op.get_bind().dialect.name != "mysql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} CONVERT TO CHARACTER SET utf8mb4 COLLATE {COLLATION}")
