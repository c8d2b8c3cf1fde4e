"""Operator commands: ``placement-manage db sync|version|stamp`` and
``placement-status upgrade check``, run on a database of their own."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from placement.cmd import manage, status
from placement.db import api as db_api
from placement.db import migration, tables

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
