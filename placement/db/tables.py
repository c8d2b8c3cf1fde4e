"""The placement schema, as SQLAlchemy Core tables.

The alembic migrations build exactly this; a test compares the two.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

# Where alembic keeps our schema revision (``alembic_version`` is the
# original service's; placement.db.migration).
VERSION_TABLE = "placement_alembic_version"

# Unicode names need utf8mb4 whatever the MySQL database's default charset
# is; a binary NO PAD collation (MariaDB's) compares uuids and names exactly,
# as SQLite and PostgreSQL do (migration 0002_binary_collation).
MYSQL_TABLE_OPTIONS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
                       "mysql_collate": "utf8mb4_nopad_bin"}


def _timestamps() -> list[sa.Column]:
    return [
        sa.Column("created_at", sa.DateTime, nullable=True),
        sa.Column("updated_at", sa.DateTime, nullable=True),
    ]


resource_providers = sa.Table(
    "resource_providers",
    metadata,
    *_timestamps(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", sa.String(36), nullable=False),
    sa.Column("name", sa.Unicode(200), nullable=True),
    sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
    sa.Column("root_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"),
              nullable=True),
    sa.Column("parent_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"),
              nullable=True),
    sa.UniqueConstraint("uuid", name="uniq_resource_providers0uuid"),
    sa.UniqueConstraint("name", name="uniq_resource_providers0name"),
    sa.Index("resource_providers_root_provider_id_idx", "root_provider_id"),
    sa.Index("resource_providers_parent_provider_id_idx", "parent_provider_id"),
    **MYSQL_TABLE_OPTIONS,
)

resource_classes = sa.Table(
    "resource_classes",
    metadata,
    *_timestamps(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(255), nullable=False),
    sa.UniqueConstraint("name", name="uniq_resource_classes0name"),
    **MYSQL_TABLE_OPTIONS,
)

inventories = sa.Table(
    "inventories",
    metadata,
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
    # the sum of the inventory's allocations, kept by the allocation writers
    # (placement.objects.allocation) in the same transaction
    sa.Column("used", sa.BigInteger, nullable=False, server_default="0"),
    sa.UniqueConstraint("resource_provider_id", "resource_class_id",
                        name="uniq_inventories0resource_provider_resource_class"),
    sa.Index("inventories_resource_class_id_idx", "resource_class_id"),
    **MYSQL_TABLE_OPTIONS,
)

allocations = sa.Table(
    "allocations",
    metadata,
    *_timestamps(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("resource_provider_id", sa.Integer, nullable=False),
    sa.Column("consumer_id", sa.String(36), nullable=False),
    sa.Column("resource_class_id", sa.Integer, nullable=False),
    sa.Column("used", sa.Integer, nullable=False),
    sa.Index("allocations_resource_provider_class_used_idx",
             "resource_provider_id", "resource_class_id", "used"),
    sa.Index("allocations_resource_class_id_idx", "resource_class_id"),
    sa.Index("allocations_consumer_id_idx", "consumer_id"),
    # GET /usages reads a consumer's allocations from this index alone
    sa.Index("allocations_consumer_class_used_idx", "consumer_id", "resource_class_id", "used"),
    **MYSQL_TABLE_OPTIONS,
)

projects = sa.Table(
    "projects",
    metadata,
    *_timestamps(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("external_id", sa.String(255), nullable=False),
    sa.UniqueConstraint("external_id", name="uniq_projects0external_id"),
    **MYSQL_TABLE_OPTIONS,
)

users = sa.Table(
    "users",
    metadata,
    *_timestamps(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("external_id", sa.String(255), nullable=False),
    sa.UniqueConstraint("external_id", name="uniq_users0external_id"),
    **MYSQL_TABLE_OPTIONS,
)

consumer_types = sa.Table(
    "consumer_types",
    metadata,
    *_timestamps(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.Unicode(255), nullable=False),
    sa.UniqueConstraint("name", name="uniq_consumer_types0name"),
    **MYSQL_TABLE_OPTIONS,
)

consumers = sa.Table(
    "consumers",
    metadata,
    *_timestamps(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", sa.String(36), nullable=False),
    sa.Column("project_id", sa.Integer, nullable=False),
    sa.Column("user_id", sa.Integer, nullable=False),
    sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
    sa.Column("consumer_type_id", sa.Integer, sa.ForeignKey("consumer_types.id"),
              nullable=True),
    sa.UniqueConstraint("uuid", name="uniq_consumers0uuid"),
    sa.Index("consumers_project_id_uuid_idx", "project_id", "uuid"),
    sa.Index("consumers_project_id_user_id_uuid_idx", "project_id", "user_id", "uuid"),
    # GET /usages (of a project, or of a project's user) reads its
    # consumers' type off this index alone (migration 0009)
    sa.Index("consumers_project_user_type_uuid_idx", "project_id", "user_id",
             "consumer_type_id", "uuid"),
    sa.Index("consumers_consumer_type_id_idx", "consumer_type_id"),
    **MYSQL_TABLE_OPTIONS,
)

traits = sa.Table(
    "traits",
    metadata,
    *_timestamps(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.Unicode(255), nullable=False),
    sa.UniqueConstraint("name", name="uniq_traits0name"),
    **MYSQL_TABLE_OPTIONS,
)

resource_provider_traits = sa.Table(
    "resource_provider_traits",
    metadata,
    *_timestamps(),
    sa.Column("trait_id", sa.Integer, sa.ForeignKey("traits.id"), primary_key=True),
    sa.Column("resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"),
              primary_key=True),
    sa.Index("resource_provider_traits_resource_provider_trait_idx",
             "resource_provider_id", "trait_id"),
    **MYSQL_TABLE_OPTIONS,
)

placement_aggregates = sa.Table(
    "placement_aggregates",
    metadata,
    *_timestamps(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", sa.String(36), nullable=True),
    sa.UniqueConstraint("uuid", name="uniq_placement_aggregates0uuid"),
    **MYSQL_TABLE_OPTIONS,
)

resource_provider_aggregates = sa.Table(
    "resource_provider_aggregates",
    metadata,
    *_timestamps(),
    sa.Column("resource_provider_id", sa.Integer, primary_key=True),
    sa.Column("aggregate_id", sa.Integer, primary_key=True),
    sa.Index("resource_provider_aggregates_aggregate_id_idx", "aggregate_id"),
    **MYSQL_TABLE_OPTIONS,
)

# What provider caches follow (placement.db.provider_changes): a change
# counter per shard of providers, and the last changes of each shard.
provider_change_shards = sa.Table(
    "provider_change_shards",
    metadata,
    sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
    **MYSQL_TABLE_OPTIONS,
)

provider_changes = sa.Table(
    "provider_changes",
    metadata,
    sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("resource_provider_id", sa.Integer, nullable=False),
    **MYSQL_TABLE_OPTIONS,
)

# What provider copies' usage mirrors follow (placement.db.provider_changes,
# USAGES): the same kind of record, for the providers whose usage moved.
usage_change_shards = sa.Table(
    "usage_change_shards",
    metadata,
    sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
    **MYSQL_TABLE_OPTIONS,
)

usage_changes = sa.Table(
    "usage_changes",
    metadata,
    sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("resource_provider_id", sa.Integer, nullable=False),
    **MYSQL_TABLE_OPTIONS,
)

# Inventories a write may leave over capacity, in its own transaction only
# (placement.db.triggers): an allocation write checked to make an
# inventory already over capacity no worse names the usage it may leave
# here, and removes the row before it commits; no other transaction ever
# sees one.
allocation_allowances = sa.Table(
    "allocation_allowances",
    metadata,
    sa.Column("resource_provider_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("resource_class_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("used", sa.BigInteger, nullable=False),
    **MYSQL_TABLE_OPTIONS,
)


def _project_group() -> list[sa.Column]:
    """The key of a group of a project's consumers: the project's, the
    user's and the consumer type's ids (0: none)."""
    return [sa.Column(name, sa.Integer, primary_key=True, autoincrement=False)
            for name in ("project_id", "user_id", "consumer_type_id")]


# A project's usages, kept by the database's triggers
# (placement.db.triggers) so that GET /usages reads a few rows instead of
# every consumer of the project joined to its allocations: per project,
# user, consumer type (0: none) and class, the sum of the allocations of
# those consumers and how many allocation rows that is;
project_usages = sa.Table(
    "project_usages",
    metadata,
    *_project_group(),
    sa.Column("resource_class_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("used", sa.BigInteger, nullable=False),
    sa.Column("allocations", sa.BigInteger, nullable=False),
    **MYSQL_TABLE_OPTIONS,
)

# per consumer (by uuid), how many allocation rows it has;
consumer_allocations = sa.Table(
    "consumer_allocations",
    metadata,
    sa.Column("consumer_id", sa.String(36), primary_key=True, autoincrement=False),
    sa.Column("allocations", sa.BigInteger, nullable=False),
    **MYSQL_TABLE_OPTIONS,
)

# and per project, user and consumer type (0: none), how many of those
# consumers have an allocation.
project_consumers = sa.Table(
    "project_consumers",
    metadata,
    *_project_group(),
    sa.Column("consumers", sa.BigInteger, nullable=False),
    **MYSQL_TABLE_OPTIONS,
)
