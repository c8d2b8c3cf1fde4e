"""``placement-manage audit`` on databases made inconsistent on purpose, on
every backend: data written through the API, then changed behind its back
(or, for capacity, through it: inventories may shrink below their usage)."""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa

from placement import conf as placement_conf
from placement.cmd import manage
from placement.db import tables, triggers
from placement.objects import audit
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import PROJECT, ProviderApi, in_process

_rp = tables.resource_providers
_inv = tables.inventories
_alloc = tables.allocations
_consumer = tables.consumers

PLACEHOLDER = placement_conf.DEFAULT_INCOMPLETE_CONSUMER_ID


@pytest.fixture
def api(database, monkeypatch, tmp_path) -> ProviderApi:
    """The API on the test database, which ``placement-manage`` uses too."""
    monkeypatch.setenv("OS_PLACEMENT_DATABASE__CONNECTION", database.url)
    monkeypatch.setenv("OS_PLACEMENT_CONFIG_DIR", str(tmp_path))
    return ProviderApi(in_process(build_app(database)))


def run_audit(capsys, *options: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = manage.main(["audit", "--json", *options])
    return code, json.loads(capsys.readouterr().out)


def claim(api: ProviderApi, consumer: str, allocations: dict) -> None:
    api.call("PUT", f"/allocations/{consumer}", {
        "allocations": {provider: {"resources": resources}
                        for provider, resources in allocations.items()},
        "consumer_generation": None, "consumer_type": "INSTANCE", **PROJECT})


def provider_id(database, provider_uuid: str) -> int:
    with database.db.reader() as connection:
        return connection.scalar(sa.select(_rp.c.id).where(_rp.c.uuid == provider_uuid))


def class_id(database, name: str) -> int:
    with database.db.reader() as connection:
        return connection.scalar(sa.select(tables.resource_classes.c.id)
                                 .where(tables.resource_classes.c.name == name))


def behind_the_api(database, *statements: sa.Executable) -> None:
    with database.db.engine.begin() as connection:
        for statement in statements:
            connection.execute(statement)


def rows(database, table: sa.Table) -> list[tuple]:
    with database.db.reader() as connection:
        return sorted(tuple(row) for row in connection.execute(sa.select(table)))


def test_a_database_written_through_the_api_is_clean(api, capsys):
    parent = api.provider("cn1", VCPU=8, MEMORY_MB=4096)
    child = api.provider("numa0", parent=parent, VCPU=4)
    api.provider("grandchild", parent=child)
    claim(api, str(uuid.uuid4()), {parent: {"VCPU": 8, "MEMORY_MB": 1024}, child: {"VCPU": 4}})
    released = str(uuid.uuid4())
    claim(api, released, {parent: {"MEMORY_MB": 512}})
    api.call("DELETE", f"/allocations/{released}")
    code, report = run_audit(capsys)
    assert code == 0
    assert report == {"clean": True, "findings": {check: [] for check in manage.AUDIT_TITLES}}
    capsys.readouterr()
    assert manage.main(["audit"]) == 0
    assert capsys.readouterr().out == "No inconsistency found.\n"


def test_usage_above_capacity_after_inventory_reserved_or_ratio_changes(api, capsys):
    shrunk, reserved, lowered = (api.provider(name, VCPU=8) for name in ("a", "b", "c"))
    for provider in (shrunk, reserved, lowered):
        claim(api, str(uuid.uuid4()), {provider: {"VCPU": 6}})
    # The API accepts inventories that leave less than is allocated.
    for provider, inventory in ((shrunk, {"total": 4}),
                                (reserved, {"total": 8, "reserved": 3}),
                                (lowered, {"total": 8, "allocation_ratio": 0.5})):
        api.call("PUT", f"/resource_providers/{provider}/inventories/VCPU",
                 {"resource_provider_generation": api.generation(provider), **inventory})
    code, report = run_audit(capsys)
    assert code == 1
    assert report["findings"]["over_capacity"] == [
        {"provider_uuid": shrunk, "provider_name": "a", "resource_class": "VCPU",
         "used": 6, "capacity": 4, "total": 4, "reserved": 0, "allocation_ratio": 1.0},
        {"provider_uuid": reserved, "provider_name": "b", "resource_class": "VCPU",
         "used": 6, "capacity": 5, "total": 8, "reserved": 3, "allocation_ratio": 1.0},
        {"provider_uuid": lowered, "provider_name": "c", "resource_class": "VCPU",
         "used": 6, "capacity": 4, "total": 8, "reserved": 0, "allocation_ratio": 0.5},
    ]
    assert [check for check, found in report["findings"].items() if found] == ["over_capacity"]


def test_allocations_of_a_class_without_inventory(api, database, capsys):
    provider = api.provider("cn1", VCPU=8, DISK_GB=100)
    consumer = str(uuid.uuid4())
    claim(api, consumer, {provider: {"VCPU": 2, "DISK_GB": 10}})
    behind_the_api(database, sa.delete(_inv).where(
        _inv.c.resource_provider_id == provider_id(database, provider),
        _inv.c.resource_class_id == class_id(database, "DISK_GB")))
    code, report = run_audit(capsys)
    assert code == 1
    assert report["findings"]["allocations_without_inventory"] == [
        {"consumer_uuid": consumer, "provider_uuid": provider, "resource_class": "DISK_GB",
         "used": 10}]
    assert report["findings"]["over_capacity"] == []


def test_consumers_without_allocations(api, database, capsys):
    provider = api.provider("cn1", VCPU=8)
    emptied, kept = str(uuid.uuid4()), str(uuid.uuid4())
    claim(api, emptied, {provider: {"VCPU": 1}})
    claim(api, kept, {provider: {"VCPU": 2}})
    # The allocations go, the consumer record stays; the kept usage follows
    # the allocations whoever deletes them (placement.db.triggers).
    behind_the_api(database, sa.delete(_alloc).where(_alloc.c.consumer_id == emptied))
    code, report = run_audit(capsys)
    assert code == 1
    assert report["findings"]["empty_consumers"] == [
        {"consumer_uuid": emptied, **PROJECT, "generation": 1}]
    assert report["findings"]["usage_mismatches"] == []


def test_kept_usage_changed_behind_the_api(api, database, capsys):
    provider = api.provider("cn1", VCPU=8, MEMORY_MB=1024)
    claim(api, str(uuid.uuid4()), {provider: {"VCPU": 2}})
    behind_the_api(database, sa.update(_inv).where(
        _inv.c.resource_provider_id == provider_id(database, provider)).values(used=5))
    code, report = run_audit(capsys)
    assert code == 1
    assert report["findings"]["usage_mismatches"] == [
        {"provider_uuid": provider, "resource_class": "VCPU", "kept": 5, "actual": 2},
        {"provider_uuid": provider, "resource_class": "MEMORY_MB", "kept": 5, "actual": 0}]


def test_incomplete_consumers(api, capsys):
    provider = api.provider("cn1", VCPU=8)
    legacy = str(uuid.uuid4())
    # Below 1.8 a write names no project or user: the placeholders are recorded.
    api.call("PUT", f"/allocations/{legacy}",
             {"allocations": [{"resource_provider": {"uuid": provider},
                               "resources": {"VCPU": 1}}]}, version="placement 1.7")
    claim(api, str(uuid.uuid4()), {provider: {"VCPU": 1}})
    code, report = run_audit(capsys)
    assert code == 1
    assert report["findings"]["incomplete_consumers"] == [
        {"consumer_uuid": legacy, "project_id": PLACEHOLDER, "user_id": PLACEHOLDER}]


def test_incomplete_consumers_of_the_configured_placeholder(api, capsys, monkeypatch):
    provider = api.provider("cn1", VCPU=8)
    claim(api, str(uuid.uuid4()), {provider: {"VCPU": 1}})
    monkeypatch.setenv("OS_PLACEMENT__INCOMPLETE_CONSUMER_USER_ID", PROJECT["user_id"])
    code, report = run_audit(capsys)
    assert code == 1
    assert [consumer["user_id"] for consumer in report["findings"]["incomplete_consumers"]
            ] == [PROJECT["user_id"]]


def test_inconsistent_provider_trees(api, database, capsys):
    root = api.provider("root")
    child = api.provider("child", parent=root)
    other_root = api.provider("other-root")
    moved_root = api.provider("moved-root")
    cycle_a, cycle_b = api.provider("cycle-a"), api.provider("cycle-b")
    ids = {uuid: provider_id(database, uuid)
           for uuid in (root, child, other_root, moved_root, cycle_a, cycle_b)}
    behind_the_api(
        database,
        # a child whose root is not its parent's
        sa.update(_rp).where(_rp.c.uuid == child).values(root_provider_id=ids[other_root]),
        # a provider without a parent pointing to another root
        sa.update(_rp).where(_rp.c.uuid == moved_root).values(root_provider_id=ids[root]),
        # two providers each other's parent, a at the root
        sa.update(_rp).where(_rp.c.uuid == cycle_a).values(parent_provider_id=ids[cycle_b]),
        sa.update(_rp).where(_rp.c.uuid == cycle_b).values(parent_provider_id=ids[cycle_a],
                                                            root_provider_id=ids[cycle_a]))
    code, report = run_audit(capsys)
    assert code == 1
    assert report["findings"]["inconsistent_providers"] == [
        {"provider_uuid": child, "provider_name": "child",
         "problem": f"its root ({other_root}) is not the root of its parent ({root})"},
        {"provider_uuid": moved_root, "provider_name": "moved-root",
         "problem": f"has no parent but another root ({root})"},
        {"provider_uuid": cycle_a, "provider_name": "cycle-a",
         "problem": "is its own root but has a parent"},
        {"provider_uuid": cycle_b, "provider_name": "cycle-b",
         "problem": f"its root ({cycle_a}) has a parent"},
    ]


def test_fix_removes_empty_consumers_recomputes_usages_and_leaves_allocations(
        api, database, capsys):
    provider = api.provider("cn1", VCPU=8, DISK_GB=100)
    emptied, holding, legacy = (str(uuid.uuid4()) for _ in range(3))
    claim(api, emptied, {provider: {"VCPU": 1}})
    claim(api, holding, {provider: {"VCPU": 6, "DISK_GB": 10}})
    api.call("PUT", f"/allocations/{legacy}",
             {"allocations": [{"resource_provider": {"uuid": provider},
                               "resources": {"VCPU": 1}}]}, version="placement 1.7")
    api.call("PUT", f"/resource_providers/{provider}/inventories/VCPU",
             {"resource_provider_generation": api.generation(provider), "total": 4})
    vcpu = (_inv.c.resource_provider_id == provider_id(database, provider),
            _inv.c.resource_class_id == class_id(database, "VCPU"))
    behind_the_api(
        database,
        sa.delete(_alloc).where(_alloc.c.consumer_id == emptied),
        sa.delete(_inv).where(_inv.c.resource_provider_id == provider_id(database, provider),
                              _inv.c.resource_class_id == class_id(database, "DISK_GB")),
        # the kept usage as before the delete: drift only SQL writing the
        # derived column itself can make
        sa.update(_inv).where(*vcpu).values(used=8))
    allocations_before = rows(database, _alloc)
    code, report = run_audit(capsys, "--fix")
    assert code == 1  # it found something, even if it repaired some of it
    assert report["repairs"] == {
        "removed_consumers": [emptied],
        "recomputed_usages": [{"provider_uuid": provider, "resource_class": "VCPU",
                               "was": 8, "now": 7}],
        # the triggers kept them through the SQL above
        "recomputed_project_usages": 0}
    assert rows(database, _alloc) == allocations_before
    with database.db.reader() as connection:
        remaining = set(connection.scalars(sa.select(_consumer.c.uuid)))
    assert remaining == {holding, legacy}
    # What --fix does not touch is still there; the rest is gone.
    code, after = run_audit(capsys)
    assert code == 1
    assert {check for check, found in after["findings"].items() if found} == {
        "over_capacity", "allocations_without_inventory", "incomplete_consumers"}
    assert after["findings"]["over_capacity"][0]["used"] == 7
    assert rows(database, _alloc) == allocations_before
    assert api.call("GET", f"/resource_providers/{provider}/usages")["usages"] == {"VCPU": 7}


def test_fix_says_what_it_did(api, database, capsys):
    provider = api.provider("cn1", VCPU=8)
    emptied = str(uuid.uuid4())
    claim(api, emptied, {provider: {"VCPU": 1}})
    behind_the_api(database, sa.delete(_alloc).where(_alloc.c.consumer_id == emptied),
                   sa.update(_inv).values(used=1))  # drift of the derived column itself
    capsys.readouterr()
    assert manage.main(["audit", "--fix"]) == 1
    output = capsys.readouterr().out
    assert "Consumers without allocations: 1\n" in output
    assert f"Removed consumer {emptied}, which had no allocations." in output
    assert (f"Recomputed the usage of VCPU on provider {provider}: 1 -> 0 "
            "(derived data: the sum of its allocations).") in output
    capsys.readouterr()
    assert manage.main(["audit", "--fix"]) == 0
    assert capsys.readouterr().out == (
        "No inconsistency found.\nNothing to repair: --fix removes consumers without "
        "allocations and recomputes kept usages only.\n")


def test_repair_leaves_what_changed_since_the_audit(api, database):
    """A consumer written again since the audit read it (its generation
    moved) is not removed; a usage already right is not rewritten."""
    provider = api.provider("cn1", VCPU=8)
    emptied = str(uuid.uuid4())
    claim(api, emptied, {provider: {"VCPU": 1}})
    behind_the_api(database, sa.delete(_alloc).where(_alloc.c.consumer_id == emptied),
                   sa.update(_inv).values(used=1))  # drift of the derived column itself
    report = audit.run(database.db, PLACEHOLDER, PLACEHOLDER)
    assert [consumer.consumer_uuid for consumer in report.empty_consumers] == [emptied]
    assert len(report.usage_mismatches) == 1
    behind_the_api(
        database,
        sa.update(_consumer).where(_consumer.c.uuid == emptied)
        .values(generation=_consumer.c.generation + 1),
        sa.update(_inv).where(_inv.c.resource_provider_id == provider_id(database, provider))
        .values(used=0))
    repairs = audit.repair(database.db, report)
    assert repairs == audit.Repairs(removed_consumers=[], recomputed_usages=[])
    with database.db.reader() as connection:
        assert connection.scalar(sa.select(sa.func.count()).select_from(_consumer)) == 1


def test_table_output_names_every_finding(api, database, capsys):
    provider = api.provider("cn1", VCPU=8)
    consumer = str(uuid.uuid4())
    claim(api, consumer, {provider: {"VCPU": 3}})
    behind_the_api(database, sa.update(_inv).values(used=1))
    capsys.readouterr()
    assert manage.main(["audit"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("Inventories whose kept usage (inventories.used) is not the sum of "
                        "their allocations: 1")
    assert lines[1].split() == ["provider_uuid", "resource_class", "kept", "actual"]
    assert lines[3].split() == [provider, "VCPU", "1", "3"]


def test_project_usages_changed_behind_the_api_are_found_and_made_again(
        api, database, capsys):
    """The sums GET /usages reads, kept by the triggers, written by SQL
    that bypasses them (a restored dump, a hand-made fix): each number
    that differs is a finding; --fix makes them again and touches no
    allocation."""
    provider = api.provider("cn1", VCPU=8, MEMORY_MB=4096)
    claim(api, str(uuid.uuid4()), {provider: {"VCPU": 2, "MEMORY_MB": 512}})
    claim(api, str(uuid.uuid4()), {provider: {"VCPU": 1}})
    project_usages = sa.table("project_usages", sa.column("resource_class_id"),
                              sa.column("used"), sa.column("allocations"))
    behind_the_api(
        database,
        sa.update(project_usages)
        .where(project_usages.c.resource_class_id == class_id(database, "VCPU"))
        .values(used=7),
        sa.delete(sa.table("project_consumers")))
    code, report = run_audit(capsys)
    assert code == 1
    owner = {"project_id": PROJECT["project_id"], "user_id": PROJECT["user_id"],
             "consumer_type": "INSTANCE"}
    assert report["findings"]["project_usage_mismatches"] == [
        {**owner, "counted": "used VCPU", "kept": 7, "actual": 3},
        {**owner, "counted": "consumers", "kept": 0, "actual": 2}]
    assert {check for check, found in report["findings"].items() if found} == {
        "project_usage_mismatches"}
    allocations_before = rows(database, _alloc)
    code, report = run_audit(capsys, "--fix")
    assert report["repairs"]["recomputed_project_usages"] == 2
    assert rows(database, _alloc) == allocations_before
    assert run_audit(capsys) == (0, {"clean": True, "findings": {
        check: [] for check in manage.AUDIT_TITLES}})
    assert api.call("GET", f"/usages?project_id={PROJECT['project_id']}",
                    version="placement 1.38")["usages"] == {
        "INSTANCE": {"consumer_count": 2, "VCPU": 3, "MEMORY_MB": 512}}
    capsys.readouterr()
    assert manage.main(["audit", "--fix"]) == 0
    assert "Recomputed the project usages" not in capsys.readouterr().out


def test_project_usages_already_right_are_not_written_again(api, database):
    """A repair finds the project usages right again (a db sync made them
    since the audit): it writes nothing."""
    provider = api.provider("cn1", VCPU=8)
    claim(api, str(uuid.uuid4()), {provider: {"VCPU": 2}})
    behind_the_api(database, sa.delete(sa.table("project_consumers")))
    report = audit.run(database.db, PLACEHOLDER, PLACEHOLDER)
    assert len(report.project_usage_mismatches) == 1
    with database.db.engine.begin() as connection:
        triggers.recompute_project_usages(connection)
    assert audit.repair(database.db, report).recomputed_project_usages == 0
