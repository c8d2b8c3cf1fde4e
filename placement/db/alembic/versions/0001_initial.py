"""The initial placement schema.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


# Unicode names need utf8mb4 whatever the MySQL database's default charset is.
MYSQL_TABLE_OPTIONS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def _timestamps():
    return [sa.Column("created_at", sa.DateTime), sa.Column("updated_at", sa.DateTime)]


def upgrade() -> None:
    op.create_table(
        "resource_providers",
        *_timestamps(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.Unicode(200)),
        sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
        sa.Column("root_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id")),
        sa.Column("parent_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id")),
        sa.UniqueConstraint("uuid", name="uniq_resource_providers0uuid"),
        sa.UniqueConstraint("name", name="uniq_resource_providers0name"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("resource_providers_root_provider_id_idx", "resource_providers",
                    ["root_provider_id"])
    op.create_index("resource_providers_parent_provider_id_idx", "resource_providers",
                    ["parent_provider_id"])

    op.create_table(
        "resource_classes",
        *_timestamps(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.UniqueConstraint("name", name="uniq_resource_classes0name"),
        **MYSQL_TABLE_OPTIONS,
    )

    op.create_table(
        "inventories",
        *_timestamps(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("resource_provider_id", sa.Integer, nullable=False),
        sa.Column("resource_class_id", sa.Integer, nullable=False),
        sa.Column("total", sa.Integer, nullable=False),
        sa.Column("reserved", sa.Integer, nullable=False),
        sa.Column("min_unit", sa.Integer, nullable=False),
        sa.Column("max_unit", sa.Integer, nullable=False),
        sa.Column("step_size", sa.Integer, nullable=False),
        sa.Column("allocation_ratio", sa.Float, nullable=False),
        sa.UniqueConstraint("resource_provider_id", "resource_class_id",
                            name="uniq_inventories0resource_provider_resource_class"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("inventories_resource_class_id_idx", "inventories",
                    ["resource_class_id"])

    op.create_table(
        "allocations",
        *_timestamps(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("resource_provider_id", sa.Integer, nullable=False),
        sa.Column("consumer_id", sa.String(36), nullable=False),
        sa.Column("resource_class_id", sa.Integer, nullable=False),
        sa.Column("used", sa.Integer, nullable=False),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("allocations_resource_provider_class_used_idx", "allocations",
                    ["resource_provider_id", "resource_class_id", "used"])
    op.create_index("allocations_resource_class_id_idx", "allocations",
                    ["resource_class_id"])
    op.create_index("allocations_consumer_id_idx", "allocations", ["consumer_id"])

    for name in ("projects", "users"):
        op.create_table(
            name,
            *_timestamps(),
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("external_id", sa.String(255), nullable=False),
            sa.UniqueConstraint("external_id", name=f"uniq_{name}0external_id"),
            **MYSQL_TABLE_OPTIONS,
        )

    op.create_table(
        "consumer_types",
        *_timestamps(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.Unicode(255), nullable=False),
        sa.UniqueConstraint("name", name="uniq_consumer_types0name"),
        **MYSQL_TABLE_OPTIONS,
    )

    op.create_table(
        "consumers",
        *_timestamps(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("project_id", sa.Integer, nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
        sa.Column("consumer_type_id", sa.Integer, sa.ForeignKey("consumer_types.id")),
        sa.UniqueConstraint("uuid", name="uniq_consumers0uuid"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("consumers_project_id_uuid_idx", "consumers", ["project_id", "uuid"])
    op.create_index("consumers_project_id_user_id_uuid_idx", "consumers",
                    ["project_id", "user_id", "uuid"])
    op.create_index("consumers_consumer_type_id_idx", "consumers", ["consumer_type_id"])

    op.create_table(
        "traits",
        *_timestamps(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.Unicode(255), nullable=False),
        sa.UniqueConstraint("name", name="uniq_traits0name"),
        **MYSQL_TABLE_OPTIONS,
    )

    op.create_table(
        "resource_provider_traits",
        *_timestamps(),
        sa.Column("trait_id", sa.Integer, sa.ForeignKey("traits.id"), primary_key=True),
        sa.Column("resource_provider_id", sa.Integer,
                  sa.ForeignKey("resource_providers.id"), primary_key=True),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("resource_provider_traits_resource_provider_trait_idx",
                    "resource_provider_traits", ["resource_provider_id", "trait_id"])

    op.create_table(
        "placement_aggregates",
        *_timestamps(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36)),
        sa.UniqueConstraint("uuid", name="uniq_placement_aggregates0uuid"),
        **MYSQL_TABLE_OPTIONS,
    )

    op.create_table(
        "resource_provider_aggregates",
        *_timestamps(),
        sa.Column("resource_provider_id", sa.Integer, primary_key=True),
        sa.Column("aggregate_id", sa.Integer, primary_key=True),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("resource_provider_aggregates_aggregate_id_idx",
                    "resource_provider_aggregates", ["aggregate_id"])
