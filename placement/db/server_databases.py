"""Creating and dropping a database on a MariaDB/MySQL or PostgreSQL server.

One place for what the benchmark (placement/bench/server.py) and the tests
(tests/db.py, tests/db_servers.py) do to get an empty database of their
own: the character set the schema needs (utf8mb4 on MySQL, whose tables
then choose their collation, see ``tables.MYSQL_TABLE_OPTIONS``; UTF8 on
PostgreSQL), and a drop that does not wait for connections a stopped
service left behind.

``admin_url`` is an administrative connection to the server: its database
part is ignored for MySQL and is PostgreSQL's maintenance database (usually
``postgres``).
"""

from __future__ import annotations

import re

import sqlalchemy as sa

# Seconds to wait for a server that does not answer.
CONNECT_TIMEOUT = 5

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def admin_engine(admin_url: str) -> sa.engine.Engine:
    """An engine on ``admin_url`` for statements outside any transaction
    (CREATE/DROP DATABASE), without a pool."""
    return sa.create_engine(sa.engine.make_url(admin_url), isolation_level="AUTOCOMMIT",
                            poolclass=sa.pool.NullPool,
                            connect_args={"connect_timeout": CONNECT_TIMEOUT})


def _checked(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"not a plain database name: {name!r}")
    return name


def database_url(admin_url: str, name: str) -> str:
    """The URL of database ``name`` on the server of ``admin_url``."""
    return sa.engine.make_url(admin_url).set(database=name).render_as_string(
        hide_password=False)


def create_database(admin_url: str, name: str) -> str:
    """Create the empty database ``name`` on the server of ``admin_url``;
    returns its URL."""
    backend = sa.engine.make_url(admin_url).get_backend_name()
    if backend == "mysql":
        statement = f"CREATE DATABASE {_checked(name)} CHARACTER SET utf8mb4"
    elif backend == "postgresql":
        statement = f"CREATE DATABASE {_checked(name)} ENCODING 'UTF8'"
    else:
        raise ValueError(f"not a database server URL: {backend}")
    _execute(admin_url, statement)
    return database_url(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    """Drop database ``name`` if it exists; on PostgreSQL, ending the
    sessions still connected to it (a service under test may hold some)."""
    backend = sa.engine.make_url(admin_url).get_backend_name()
    statement = f"DROP DATABASE IF EXISTS {_checked(name)}"
    if backend == "postgresql":
        statement += " WITH (FORCE)"
    _execute(admin_url, statement)


def _execute(admin_url: str, statement: str) -> None:
    """Run one statement on the server, on a connection of its own."""
    engine = admin_engine(admin_url)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(statement)
    finally:
        engine.dispose()
