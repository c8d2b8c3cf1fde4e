"""The original service's configuration options: an operator's
placement.conf (the original's sample, edited) starts placement; the
options that change behaviour do (``[placement_database] slave_connection``,
``mysql_sql_mode``, ``connection_debug``, ``connection_trace``,
``sqlite_synchronous``), ``[DEFAULT] pybasedir, state_path, tempdir`` are
accepted, and every option of a file that placement does not use is named
in one warning."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import uuid

import pytest
import sqlalchemy as sa

from placement import conf as placement_conf
from placement import deploy
from placement.db import api as db_api
from placement.db import migration, tables
from tests import db as test_db
from tests.fixtures import base, original, provider_api

# What an operator who edited the original's sample may have set, with the
# original's defaults or typical values.
ORIGINAL_CONF = """
[DEFAULT]
debug = False
pybasedir = /usr/lib/python3/dist-packages
state_path = /var/lib/placement
tempdir = /var/tmp

[api]
auth_strategy = keystone

[keystone_authtoken]
www_authenticate_uri = http://keystone.example.com:5000/
auth_url = http://keystone.example.com:5000/
memcached_servers = localhost:11211
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = placement
password = secret

[placement]
randomize_allocation_candidates = False

[placement_database]
connection = sqlite:////var/lib/placement/placement.sqlite
connection_debug = 0
connection_trace = False
max_pool_size = 5
max_overflow = 50
mysql_sql_mode = TRADITIONAL
slave_connection =
sqlite_synchronous = True
sync_on_startup = False
"""


def _conf(tmp_path, text: str, name: str = "placement.conf"):
    path = tmp_path / name
    path.write_text(text)
    return placement_conf.build_conf(config_files=[str(path)]), str(path)


def _db_conf(**options):
    conf = placement_conf.build_conf(config_files=[])
    for name, value in options.items():
        conf.set_override(name, value, group="placement_database")
    return conf.placement_database


def test_the_originals_options_are_all_read(tmp_path, caplog):
    conf, _ = _conf(tmp_path, ORIGINAL_CONF)
    assert conf.state_path == "/var/lib/placement"
    assert conf.tempdir == "/var/tmp"
    assert conf.placement_database.mysql_sql_mode == "TRADITIONAL"
    assert placement_conf.unused_options(conf) == {}
    with caplog.at_level(logging.WARNING):
        placement_conf.warn_of_unused_options(conf)
    assert not caplog.records


def test_options_placement_does_not_use_are_named_in_one_warning(tmp_path, caplog):
    conf, path = _conf(tmp_path, ORIGINAL_CONF + """
[profiler]
enabled = True

[placement_database]
conection = mysql+pymysql://placement@db/placement
""")
    assert placement_conf.unused_options(conf) == {
        path: ["[placement_database] conection", "[profiler] enabled"]}
    with caplog.at_level(logging.WARNING):
        placement_conf.warn_of_unused_options(conf)
    (record,) = caplog.records
    assert record.levelname == "WARNING"
    assert (f"{path}: [placement_database] conection, [profiler] enabled"
            in record.getMessage())


# The namespaces of the original's options: its own and those of the
# libraries it configures.
ORIGINAL_NAMESPACES = ("placement.conf", "keystonemiddleware.auth_token", "oslo.log",
                       "oslo.middleware.cors", "oslo.middleware.http_proxy_to_wsgi",
                       "oslo.policy")


def _every_option_set(sample: str) -> str:
    """A configuration file setting every option of a generated sample to
    the default it shows (empty where it shows none, e.g. ``<None>``)."""
    lines = []
    for line in sample.splitlines():
        if line.startswith("["):
            lines.append(line)
        option = re.match(r"^#([a-z0-9_]+) =(?: (.*))?$", line)
        if option:
            value = option.group(2) or ""
            lines.append(f"{option.group(1)} = {'' if value.startswith('<') else value}")
    return "\n".join(lines) + "\n"


@pytest.mark.external("original-service")
def test_every_option_of_the_originals_sample_is_used(tmp_path):
    """The original 16.0.0's own oslo-config-generator (run in its virtual
    environment, a black box) lists its options; a file setting all of
    them starts placement without any named as unused."""
    venv = original.installed("16.0.0")
    sample = tmp_path / "original.conf.sample"
    generated = subprocess.run(
        [os.path.join(venv, "bin", "oslo-config-generator"), "--output-file", str(sample),
         *(argument for namespace in ORIGINAL_NAMESPACES
           for argument in ("--namespace", namespace))],
        cwd=tmp_path, env=original._tool_environment(), capture_output=True, text=True,
        timeout=120)
    assert generated.returncode == 0, generated.stderr
    text = _every_option_set(sample.read_text())
    assert "slave_connection = " in text and "pybasedir = " in text
    conf, _ = _conf(tmp_path, text)
    assert placement_conf.unused_options(conf) == {}


def test_connection_parameters_join_the_url():
    engine = db_api.create_engine("mysql://placement@db.example.com/placement",
                                  _db_conf(connection_parameters="connect_timeout=5&ssl=x"))
    assert engine.url.query == {"charset": "utf8mb4", "connect_timeout": "5", "ssl": "x"}
    engine.dispose()


def test_deprecated_names_and_identity_plugin_options_are_used(tmp_path):
    conf, _ = _conf(tmp_path, """
[DEFAULT]
logfile = /var/log/placement/placement-api.log

[keystone_authtoken]
auth_type = v3applicationcredential
application_credential_id = 1234
application_credential_secret = secret
""")
    # logfile: oslo.log's deprecated name of log_file
    assert placement_conf.unused_options(conf) == {}


def test_sqlite_synchronous(tmp_path):
    for synchronous, expected in ((True, 2), (False, 0)):  # FULL, OFF
        engine = db_api.create_engine(f"sqlite:///{tmp_path}/{synchronous}.sqlite",
                                      _db_conf(sqlite_synchronous=synchronous))
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == expected
        engine.dispose()


@pytest.mark.backend("mysql")
def test_mysql_sql_mode():
    url = test_db.empty_database_url("mysql")
    modes = {}
    for mode in ("TRADITIONAL", "ANSI_QUOTES", ""):
        engine = db_api.create_engine(url, _db_conf(mysql_sql_mode=mode))
        with engine.connect() as connection:
            modes[mode] = connection.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar()
            server_mode = connection.exec_driver_sql("SELECT @@GLOBAL.sql_mode").scalar()
        engine.dispose()
    assert "STRICT_ALL_TABLES" in modes["TRADITIONAL"].split(",")
    assert modes["ANSI_QUOTES"] == "ANSI_QUOTES"
    assert modes[""] == server_mode


@pytest.fixture
def sqlalchemy_logger_level():
    logger = logging.getLogger("sqlalchemy.engine")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.mark.parametrize("connection_debug, level", [(50, logging.INFO), (100, logging.DEBUG)])
def test_connection_debug_logs_statements(connection_debug, level, sqlalchemy_logger_level,
                                          caplog):
    engine = db_api.create_engine("sqlite://", _db_conf(connection_debug=connection_debug))
    with caplog.at_level(level, logger="sqlalchemy.engine"), engine.connect() as connection:
        connection.exec_driver_sql("SELECT 42 AS answer").all()
    logged = [record for record in caplog.records if record.name.startswith("sqlalchemy.engine")]
    assert any("SELECT 42 AS answer" in record.getMessage() for record in logged)
    # rows at DEBUG only
    assert any(record.levelno == logging.DEBUG and "(42,)" in record.getMessage()
               for record in logged) == (connection_debug == 100)


def test_connection_debug_off_leaves_the_level_alone(sqlalchemy_logger_level):
    logger = logging.getLogger("sqlalchemy.engine")
    logger.setLevel(logging.WARNING)
    db_api.create_engine("sqlite://", _db_conf(connection_debug=0)).dispose()
    assert logger.level == logging.WARNING


def test_connection_trace_names_placements_code(tmp_path):
    engine = db_api.create_engine(f"sqlite:///{tmp_path}/traced.sqlite",
                                  _db_conf(connection_trace=True))
    statements = []
    sa.event.listen(engine, "before_cursor_execute",
                    lambda _c, _cur, statement, *_: statements.append(statement))
    migration.upgrade(engine)
    assert migration.current_revision(engine) == migration.head_revision()
    engine.dispose()
    traced = [statement for statement in statements if "/* placement/db/migration.py:" in statement]
    assert traced, statements[-5:]
    assert all(statement.rstrip().endswith("*/") for statement in traced)


def test_without_connection_trace_statements_are_as_written(tmp_path):
    engine = db_api.create_engine(f"sqlite:///{tmp_path}/plain.sqlite", _db_conf())
    statements = []
    sa.event.listen(engine, "before_cursor_execute",
                    lambda _c, _cur, statement, *_: statements.append(statement))
    with engine.connect() as connection:
        connection.exec_driver_sql("SELECT 1")
    engine.dispose()
    assert statements == ["SELECT 1"]


def test_no_replica_without_slave_connection():
    assert db_api.replica_engine(_db_conf()) is None


def _add_trait(connection: sa.engine.Connection, name: str) -> None:
    connection.execute(sa.insert(tables.traits).values(name=name))


def _custom_traits(db: db_api.Database) -> set[str]:
    with db.reader() as connection:
        return {name for (name,) in connection.execute(
            sa.select(tables.traits.c.name)) if name.startswith("CUSTOM_")}


@pytest.fixture
def primary_and_replica(tmp_path):
    """A fresh SQLite database and ``replicate()``, which copies it to
    the replica file (replication by copy); the ``Database`` on both."""
    fresh = test_db.FreshDatabase("sqlite")
    replica_path = tmp_path / "replica.sqlite"
    db_conf = _db_conf(connection=fresh.url, slave_connection=f"sqlite:///{replica_path}")
    db = db_api.Database(db_api.create_engine(fresh.url, db_conf),
                         replica=db_api.replica_engine(db_conf))

    def replicate() -> None:
        db.dispose()  # SQLite writes its log back into the file on close
        for suffix in ("-wal", "-shm"):
            replica_path.with_name(replica_path.name + suffix).unlink(missing_ok=True)
        shutil.copyfile(fresh.path, replica_path)

    replicate()
    yield fresh, db, replicate
    db.dispose()
    fresh.close()


def test_slave_connection_serves_the_readers(primary_and_replica):
    """Writers write to ``connection``; readers read the replica, which
    has what the primary had when it was last copied."""
    _, db, replicate = primary_and_replica
    assert db.reader_engine is not db.engine
    name = f"CUSTOM_{uuid.uuid4().hex.upper()}"
    db_api.write(db, _add_trait, name)
    assert name not in _custom_traits(db)  # not replicated yet
    replicate()
    assert name in _custom_traits(db)


def test_get_requests_read_the_replica(primary_and_replica):
    fresh, db, replicate = primary_and_replica
    send = provider_api.in_process(deploy.build_app(base.make_conf(fresh), db=db))
    provider = str(uuid.uuid4())
    status, _ = send("POST", "/resource_providers", {"name": "replicated", "uuid": provider},
                     "placement 1.20")
    assert status == 200
    assert send("GET", f"/resource_providers/{provider}", None, "placement 1.20")[0] == 404
    replicate()
    status, body = send("GET", f"/resource_providers/{provider}", None, "placement 1.20")
    assert (status, body["name"]) == (200, "replicated")


def test_writes_read_the_primary(primary_and_replica):
    """A request that writes reads from the primary: a provider created a
    moment ago (not replicated yet) takes its inventory at once, as Nova's
    report client expects right after creating it."""
    fresh, db, _ = primary_and_replica
    send = provider_api.in_process(deploy.build_app(base.make_conf(fresh), db=db))
    provider = str(uuid.uuid4())
    assert send("POST", "/resource_providers", {"name": "new", "uuid": provider},
                "placement 1.20")[0] == 200
    status, body = send("PUT", f"/resource_providers/{provider}/inventories", {
        "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
        "placement 1.20")
    assert status == 200, body
    assert body["inventories"]["VCPU"]["total"] == 8


def test_the_service_reads_the_replica_configured(tmp_path):
    """``slave_connection`` in the configuration reaches the service's
    database (deploy.database_from_conf), and the provider copy follows the
    replica."""
    fresh = test_db.FreshDatabase("sqlite")
    replica_path = tmp_path / "replica.sqlite"
    shutil.copyfile(fresh.path, replica_path)
    conf = base.make_conf(fresh)
    conf.set_override("slave_connection", f"sqlite:///{replica_path}", "placement_database")
    db = deploy.database_from_conf(conf)
    try:
        assert str(db.reader_engine.url) == f"sqlite:///{replica_path}"
        assert db.primary_only().reader_engine is db.engine
    finally:
        db.dispose()
        fresh.close()
