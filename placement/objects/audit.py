"""The consistency audit of a placement database (``placement-manage
audit``): what the API's own checks should never let happen, found by
reading every table, and the repair of what is safe to repair.

The checks, all read in one snapshot:

- providers whose allocations exceed the capacity of an inventory,
  (total - reserved) * allocation_ratio, as after an inventory, reserved
  or ratio change made behind the API's back;
- allocations of a class their provider has no inventory of;
- consumers without allocations (the allocation writes delete a consumer
  when its last allocation goes);
- incomplete consumers: owned by the configured placeholder project or
  user (allocations written below microversion 1.8);
- providers whose root or parent is inconsistent;
- inventories whose ``used`` (the sum of their allocations, kept by the
  allocation writes) is not that sum;
- project usages (the sums by project, user, consumer type and class, and
  the counts of consumers, that ``GET /usages`` reads; kept by the
  database's triggers) that are not what the allocations make them.

``repair`` removes the consumers without allocations and recomputes the
kept usages and project usages (derived data), each in a transaction of
its own that checks again that the repair still applies. It never touches
an allocation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import tables, triggers
from placement.objects import resource_class
from placement.objects.inventory import capacity

_rp = tables.resource_providers
_parent = _rp.alias("parent")
_root = _rp.alias("root")
_rc = tables.resource_classes
_inv = tables.inventories
_alloc = tables.allocations
_consumer = tables.consumers
_project = tables.projects
_user = tables.users


# -- Findings ----------------------------------------------------------------
#
# One dataclass per check; their fields are what the report shows, except
# those marked internal (what a repair needs).

def _internal() -> dataclasses.Field:
    return dataclasses.field(metadata={"internal": True})


@dataclasses.dataclass(frozen=True)
class OverCapacity:
    provider_uuid: str | None
    provider_name: str | None
    resource_class: str
    used: int
    capacity: int
    total: int
    reserved: int
    allocation_ratio: float


@dataclasses.dataclass(frozen=True)
class AllocationWithoutInventory:
    consumer_uuid: str
    provider_uuid: str | None  # None: the provider does not exist either
    resource_class: str
    used: int


@dataclasses.dataclass(frozen=True)
class EmptyConsumer:
    consumer_uuid: str
    project_id: str | None
    user_id: str | None
    generation: int


@dataclasses.dataclass(frozen=True)
class IncompleteConsumer:
    consumer_uuid: str
    project_id: str | None
    user_id: str | None


@dataclasses.dataclass(frozen=True)
class InconsistentProvider:
    provider_uuid: str
    provider_name: str | None
    problem: str


@dataclasses.dataclass(frozen=True)
class UsageMismatch:
    provider_uuid: str | None
    resource_class: str
    kept: int  # inventories.used
    actual: int  # the sum of the allocations
    provider_id: int = _internal()
    resource_class_id: int = _internal()


@dataclasses.dataclass(frozen=True)
class ProjectUsageMismatch:
    project_id: str | None
    user_id: str | None
    consumer_type: str | None
    counted: str  # "used <class>", "allocations of <class>" or "consumers"
    kept: int
    actual: int


def shown_fields(finding: object) -> dict[str, object]:
    """The fields of a finding a report shows, in order."""
    return {field.name: getattr(finding, field.name) for field in dataclasses.fields(finding)
            if not field.metadata.get("internal")}


@dataclasses.dataclass
class Report:
    """What each check found, in a fixed order of checks."""

    over_capacity: list[OverCapacity]
    allocations_without_inventory: list[AllocationWithoutInventory]
    empty_consumers: list[EmptyConsumer]
    incomplete_consumers: list[IncompleteConsumer]
    inconsistent_providers: list[InconsistentProvider]
    usage_mismatches: list[UsageMismatch]
    project_usage_mismatches: list[ProjectUsageMismatch]

    def checks(self) -> dict[str, list]:
        """Check name -> its findings."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    @property
    def clean(self) -> bool:
        return not any(self.checks().values())


# -- Reading -----------------------------------------------------------------

def _class_name(name: str | None, class_id: int) -> str:
    # an id the resource classes table does not know (nothing prevents it)
    return name if name is not None else f"(unknown class id {class_id})"


def _inventory_findings(connection: sa.engine.Connection
                        ) -> tuple[list[OverCapacity], list[UsageMismatch]]:
    """Every inventory against the sum of its allocations: over capacity,
    and kept usage that is not that sum."""
    sums = (sa.select(_alloc.c.resource_provider_id, _alloc.c.resource_class_id,
                      sa.func.sum(_alloc.c.used).label("actual"))
            .group_by(_alloc.c.resource_provider_id, _alloc.c.resource_class_id)
            .subquery())
    rows = connection.execute(
        sa.select(_inv.c.resource_provider_id, _inv.c.resource_class_id, _inv.c.total,
                  _inv.c.reserved, _inv.c.allocation_ratio, _inv.c.used,
                  sa.func.coalesce(sums.c.actual, 0).label("actual"),
                  _rp.c.uuid, _rp.c.name, _rc.c.name.label("class_name"))
        .select_from(_inv)
        .outerjoin(sums, sa.and_(sums.c.resource_provider_id == _inv.c.resource_provider_id,
                                 sums.c.resource_class_id == _inv.c.resource_class_id))
        .outerjoin(_rp, _rp.c.id == _inv.c.resource_provider_id)
        .outerjoin(_rc, _rc.c.id == _inv.c.resource_class_id)
        .order_by(_inv.c.resource_provider_id, _inv.c.resource_class_id))
    over, mismatched = [], []
    for row in rows:
        class_name = _class_name(row.class_name, row.resource_class_id)
        actual = int(row.actual)
        limit = capacity(row.total, row.reserved, row.allocation_ratio)
        if actual > limit:
            over.append(OverCapacity(row.uuid, row.name, class_name, actual, limit, row.total,
                                     row.reserved, row.allocation_ratio))
        if row.used != actual:
            mismatched.append(UsageMismatch(row.uuid, class_name, row.used, actual,
                                            row.resource_provider_id, row.resource_class_id))
    return over, mismatched


def _allocations_without_inventory(connection: sa.engine.Connection
                                   ) -> list[AllocationWithoutInventory]:
    rows = connection.execute(
        sa.select(_alloc.c.consumer_id, _alloc.c.resource_class_id, _alloc.c.used,
                  _rp.c.uuid, _rc.c.name.label("class_name"))
        .select_from(_alloc)
        .outerjoin(_inv, sa.and_(_inv.c.resource_provider_id == _alloc.c.resource_provider_id,
                                 _inv.c.resource_class_id == _alloc.c.resource_class_id))
        .outerjoin(_rp, _rp.c.id == _alloc.c.resource_provider_id)
        .outerjoin(_rc, _rc.c.id == _alloc.c.resource_class_id)
        .where(_inv.c.id.is_(None))
        .order_by(_alloc.c.id))
    return [AllocationWithoutInventory(row.consumer_id, row.uuid,
                                       _class_name(row.class_name, row.resource_class_id),
                                       row.used)
            for row in rows]


def _consumers_with_owners() -> sa.Select:
    return (sa.select(_consumer.c.uuid, _consumer.c.generation,
                      _project.c.external_id.label("project_id"),
                      _user.c.external_id.label("user_id"))
            .select_from(_consumer)
            .outerjoin(_project, _project.c.id == _consumer.c.project_id)
            .outerjoin(_user, _user.c.id == _consumer.c.user_id)
            .order_by(_consumer.c.id))


def _empty_consumers(connection: sa.engine.Connection) -> list[EmptyConsumer]:
    rows = connection.execute(_consumers_with_owners().where(
        ~sa.exists().where(_alloc.c.consumer_id == _consumer.c.uuid)))
    return [EmptyConsumer(row.uuid, row.project_id, row.user_id, row.generation)
            for row in rows]


def _incomplete_consumers(connection: sa.engine.Connection, placeholder_project: str,
                          placeholder_user: str) -> list[IncompleteConsumer]:
    rows = connection.execute(_consumers_with_owners().where(sa.or_(
        _project.c.external_id == placeholder_project,
        _user.c.external_id == placeholder_user)))
    return [IncompleteConsumer(row.uuid, row.project_id, row.user_id) for row in rows]


def _tree_problems(row: sa.Row) -> Iterator[str]:
    """What is wrong with the root and parent of one provider. A tree is
    consistent when its root has no parent and points to itself, and
    every other member has its parent's root: then a cycle of parents
    cannot exist either (its members' common root would have a parent)."""
    if row.root_provider_id is None:
        yield "has no root"
    elif row.root_id is None:
        yield f"its root (provider id {row.root_provider_id}) does not exist"
    if row.parent_provider_id is not None and row.parent_id is None:
        yield f"its parent (provider id {row.parent_provider_id}) does not exist"
    if (row.parent_provider_id is None and row.root_provider_id is not None
            and row.root_provider_id != row.id):
        yield f"has no parent but another root ({row.root_uuid})"
    if row.parent_id is not None and row.root_provider_id is not None \
            and row.parent_root_provider_id != row.root_provider_id:
        yield f"its root ({row.root_uuid}) is not the root of its parent ({row.parent_uuid})"
    if row.root_id is not None and row.root_parent_provider_id is not None:
        yield ("is its own root but has a parent" if row.root_id == row.id
               else f"its root ({row.root_uuid}) has a parent")


def _inconsistent_providers(connection: sa.engine.Connection) -> list[InconsistentProvider]:
    root_id, parent_id = _rp.c.root_provider_id, _rp.c.parent_provider_id
    rows = connection.execute(
        sa.select(_rp.c.id, _rp.c.uuid, _rp.c.name, root_id, parent_id,
                  _parent.c.id.label("parent_id"), _parent.c.uuid.label("parent_uuid"),
                  _parent.c.root_provider_id.label("parent_root_provider_id"),
                  _root.c.id.label("root_id"), _root.c.uuid.label("root_uuid"),
                  _root.c.parent_provider_id.label("root_parent_provider_id"))
        .select_from(_rp)
        .outerjoin(_parent, _parent.c.id == parent_id)
        .outerjoin(_root, _root.c.id == root_id)
        .where(sa.or_(
            root_id.is_(None),
            _root.c.id.is_(None),
            sa.and_(parent_id.is_not(None), _parent.c.id.is_(None)),
            sa.and_(parent_id.is_(None), root_id != _rp.c.id),
            sa.and_(_parent.c.id.is_not(None),
                    sa.or_(_parent.c.root_provider_id.is_(None),
                           _parent.c.root_provider_id != root_id)),
            _root.c.parent_provider_id.is_not(None)))
        .order_by(_rp.c.id))
    return [InconsistentProvider(row.uuid, row.name, "; ".join(_tree_problems(row)))
            for row in rows]


def _project_usage_mismatches(connection: sa.engine.Connection
                               ) -> list[ProjectUsageMismatch]:
    """The project usages the triggers keep that are not what the
    allocations make them, one finding per number that differs, with
    the names of the ids."""
    differences = triggers.project_usage_differences(connection)
    if not differences:
        return []
    keys = [difference.key for difference in differences]
    projects = _names(connection, _project, "external_id", {key[0] for key in keys})
    users = _names(connection, _user, "external_id", {key[1] for key in keys})
    types = _names(connection, tables.consumer_types, "name", {key[2] for key in keys})
    classes = resource_class.names_from_ids(connection, {key[3] for key in keys if len(key) == 4})
    findings = []
    for difference in differences:
        project_id, user_id, type_id, *class_id = difference.key
        if class_id:
            class_name = _class_name(classes.get(class_id[0]), class_id[0])
            counted = [f"used {class_name}", f"allocations of {class_name}"]
        else:
            counted = ["consumers"]
        findings += [ProjectUsageMismatch(projects.get(project_id), users.get(user_id),
                                          types.get(type_id), what, kept, actual)
                     for what, kept, actual in zip(counted, difference.kept, difference.actual,
                                                   strict=True)
                     if kept != actual]
    return findings


def _names(connection: sa.engine.Connection, table: sa.Table, column: str,
           ids: set[int]) -> dict[int, str]:
    """id -> ``column`` of the rows of ``table`` with these ids."""
    return dict(connection.execute(sa.select(table.c.id, table.c[column])
                                   .where(table.c.id.in_(sorted(ids)))).all())


def run(db: db_api.Database, placeholder_project: str, placeholder_user: str) -> Report:
    """Every check, in one snapshot of the database. ``placeholder_*``:
    the configured incomplete consumer project and user ids."""
    with db.reader() as connection:
        over_capacity, usage_mismatches = _inventory_findings(connection)
        return Report(
            over_capacity=over_capacity,
            allocations_without_inventory=_allocations_without_inventory(connection),
            empty_consumers=_empty_consumers(connection),
            incomplete_consumers=_incomplete_consumers(connection, placeholder_project,
                                                       placeholder_user),
            inconsistent_providers=_inconsistent_providers(connection),
            usage_mismatches=usage_mismatches,
            project_usage_mismatches=_project_usage_mismatches(connection),
        )


# -- Repairing ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class RecomputedUsage:
    provider_uuid: str | None
    resource_class: str
    was: int
    now: int


@dataclasses.dataclass
class Repairs:
    removed_consumers: list[str]
    recomputed_usages: list[RecomputedUsage]
    # how many of the project usages (triggers.ProjectUsageDifference)
    # were made right
    recomputed_project_usages: int = 0


def _remove_if_still_empty(connection: sa.engine.Connection, consumer: EmptyConsumer) -> bool:
    """Delete the consumer if it still has no allocations and the
    generation the audit read. An allocation write that gives it
    allocations moves that generation in its own transaction (it
    compare-and-swaps it): either the write committed first and the
    consumer stays, or the consumer goes first and the write fails its
    compare-and-swap and is refused as a concurrent update; no allocation
    is ever left without its consumer."""
    return connection.execute(
        sa.delete(_consumer)
        .where(_consumer.c.uuid == consumer.consumer_uuid,
               _consumer.c.generation == consumer.generation,
               ~sa.exists().where(_alloc.c.consumer_id == _consumer.c.uuid))
    ).rowcount == 1


def _recompute_usage(connection: sa.engine.Connection, mismatch: UsageMismatch
                     ) -> RecomputedUsage | None:
    """Set the inventory's ``used`` to the sum of its allocations, if it
    still differs. The inventory row is locked before the sum is read, in
    a later statement: an allocation writer that already moved ``used``
    has committed by then (its allocations are in the sum); one that has
    not yet moved it waits for this transaction and then adds its own
    difference to the recomputed value (its allocations are not in the
    sum). READ COMMITTED on the servers, one writer at a time on SQLite."""
    where = (_inv.c.resource_provider_id == mismatch.provider_id,
             _inv.c.resource_class_id == mismatch.resource_class_id)
    kept = connection.execute(sa.select(_inv.c.used).where(*where).with_for_update()
                              ).scalar_one_or_none()
    if kept is None:  # the inventory is gone
        return None
    actual = int(connection.execute(
        sa.select(sa.func.coalesce(sa.func.sum(_alloc.c.used), 0))
        .where(_alloc.c.resource_provider_id == mismatch.provider_id,
               _alloc.c.resource_class_id == mismatch.resource_class_id)).scalar_one())
    if kept == actual:
        return None
    connection.execute(sa.update(_inv).where(*where).values(used=actual))
    return RecomputedUsage(mismatch.provider_uuid, mismatch.resource_class, kept, actual)


def _recompute_project_usages(connection: sa.engine.Connection) -> int:
    """Make the project usages again if they still differ from what the
    allocations make them; how many differed. Their rows are deleted and
    written again in this transaction: a writer's trigger moving one of
    them waits for it, then adds its own change to the recomputed sums,
    which did not hold its uncommitted allocations (READ COMMITTED on the
    servers, one writer at a time on SQLite)."""
    differences = len(triggers.project_usage_differences(connection))
    if differences:
        triggers.recompute_project_usages(connection)
    return differences


def repair(db: db_api.Database, report: Report) -> Repairs:
    """Remove the empty consumers and recompute the mismatched usages and
    project usages of ``report``, each in its own transaction (retried on
    deadlocks and lost connections); what was done. Allocations are never
    touched."""
    removed = [consumer.consumer_uuid for consumer in report.empty_consumers
               if db_api.write(db, _remove_if_still_empty, consumer)]
    recomputed = [done for done in (db_api.write(db, _recompute_usage, mismatch)
                                    for mismatch in report.usage_mismatches)
                  if done is not None]
    project_usages = (db_api.write(db, _recompute_project_usages)
                      if report.project_usage_mismatches else 0)
    return Repairs(removed, recomputed, project_usages)
