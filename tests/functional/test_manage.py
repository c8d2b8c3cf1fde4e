"""Operator commands: ``placement-manage db sync|version|stamp|handback``,
``placement-manage reload`` and ``placement-status upgrade check``, run on a
database of their own."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from placement.cmd import manage, status
from placement.db import api as db_api
from placement.db import migration, provider_changes, tables, triggers

HEAD = migration.head_revision()


@pytest.fixture
def database(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path}/placement.sqlite"
    monkeypatch.setenv("OS_PLACEMENT_DATABASE__CONNECTION", url)
    monkeypatch.setenv("OS_PLACEMENT_CONFIG_DIR", str(tmp_path))
    engine = db_api.create_engine(url)
    yield engine
    engine.dispose()


def printed_version(capsys) -> str:
    capsys.readouterr()
    assert manage.main(["db", "version"]) == 0
    return capsys.readouterr().out.strip()


def test_sync_creates_schema_and_standard_data(database, capsys):
    assert printed_version(capsys) == "None"
    assert manage.main(["db", "sync"]) == 0
    assert printed_version(capsys) == HEAD
    with database.connect() as connection:
        classes = set(connection.scalars(sa.select(tables.resource_classes.c.name)))
        traits = set(connection.scalars(sa.select(tables.traits.c.name)))
    assert {"VCPU", "MEMORY_MB", "DISK_GB"} <= classes
    assert "HW_CPU_X86_AVX2" in traits


def test_sync_twice_changes_nothing(database, capsys):
    assert manage.main(["db", "sync"]) == 0
    with database.connect() as connection:
        before = connection.scalar(sa.select(sa.func.count()).select_from(tables.traits))
    assert manage.main(["db", "sync"]) == 0
    with database.connect() as connection:
        after = connection.scalar(sa.select(sa.func.count()).select_from(tables.traits))
    assert before == after
    assert printed_version(capsys) == HEAD


def test_stamp_records_a_revision_without_migrating(database, capsys):
    assert manage.main(["db", "stamp", "head"]) == 0
    assert printed_version(capsys) == HEAD
    assert "resource_providers" not in sa.inspect(database).get_table_names()


def test_sync_check_says_what_it_would_do_and_changes_nothing(database, capsys):
    capsys.readouterr()
    assert manage.main(["db", "sync", "--check"]) == 0
    report = capsys.readouterr().out
    assert report.startswith("Found an empty database: the schema would be created.\n")
    assert "migration 0005: The database keeps the derived state" in report
    assert sa.inspect(database).get_table_names() == []
    assert manage.main(["db", "sync"]) == 0
    capsys.readouterr()
    assert manage.main(["db", "sync", "--check"]) == 0
    report = capsys.readouterr().out
    assert report.startswith(f"Found a database of ours at revision {HEAD}.\n")
    assert "migration" not in report


def test_sync_makes_missing_triggers_again_and_recomputes_usages(database):
    assert manage.main(["db", "sync"]) == 0
    with database.begin() as connection:
        triggers.drop(connection)
        connection.execute(tables.resource_providers.insert().values(
            id=1, uuid="a" * 36, name="rp", generation=0, root_provider_id=None))
        connection.execute(tables.inventories.insert().values(
            resource_provider_id=1, resource_class_id=0, total=8, reserved=0, min_unit=1,
            max_unit=8, step_size=1, allocation_ratio=1.0))
        connection.execute(tables.allocations.insert().values(
            resource_provider_id=1, resource_class_id=0, consumer_id="c" * 36, used=3))
        assert connection.scalar(sa.select(tables.inventories.c.used)) == 0
    assert manage.main(["db", "sync"]) == 0
    with database.connect() as connection:
        assert triggers.complete(connection)
        assert connection.scalar(sa.select(tables.inventories.c.used)) == 3


def test_handback_names_the_original_revision_and_reload_moves_the_counter(
        database, capsys):
    assert manage.main(["db", "handback"]) == 2  # no schema of ours yet
    assert manage.main(["db", "sync"]) == 0
    capsys.readouterr()
    assert manage.main(["db", "handback"]) == 0
    assert migration.ORIGINAL_HEAD in capsys.readouterr().out
    with database.connect() as connection:
        assert connection.scalar(sa.text("SELECT version_num FROM alembic_version")) == (
            migration.ORIGINAL_HEAD)
        before = provider_changes.versions(connection)
    assert printed_version(capsys) == HEAD
    assert manage.main(["reload"]) == 0
    with database.connect() as connection:
        after = provider_changes.versions(connection)
        assert provider_changes.changed_since(connection, before, after) is None
    assert after[provider_changes.RELOAD_SHARD] > before[provider_changes.RELOAD_SHARD]
    assert {shard: version for shard, version in after.items()
            if shard != provider_changes.RELOAD_SHARD} == {
        shard: version for shard, version in before.items()
        if shard != provider_changes.RELOAD_SHARD}


def test_db_needs_a_command(database):
    with pytest.raises(SystemExit) as exit_info:
        manage.main(["db"])
    assert exit_info.value.code != 0


def upgrade_check(capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = status.main(["upgrade", "check"])
    return code, capsys.readouterr().out


def test_upgrade_check_fails_before_sync(database, capsys):
    code, output = upgrade_check(capsys)
    assert code == 2
    assert "placement-manage db sync" in output


def test_upgrade_check_passes_after_sync(database, capsys):
    manage.main(["db", "sync"])
    code, output = upgrade_check(capsys)
    assert code == 0, output
    assert "Failure" not in output and "Warning" not in output


def test_upgrade_check_warns_about_missing_standard_traits(database, capsys):
    manage.main(["db", "sync"])
    with database.begin() as connection:
        connection.execute(tables.traits.delete().where(
            tables.traits.c.name == "HW_CPU_X86_AVX2"))
    code, output = upgrade_check(capsys)
    assert code == 1
    assert "HW_CPU_X86_AVX2" in output


def test_upgrade_check_fails_on_a_json_policy_file(database, capsys, tmp_path, monkeypatch):
    manage.main(["db", "sync"])
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps({"placement:traits:list": "@"}))
    monkeypatch.setenv("OS_OSLO_POLICY__POLICY_FILE", str(policy_file))
    code, output = upgrade_check(capsys)
    assert code == 2
    assert "JSON-formatted" in output
