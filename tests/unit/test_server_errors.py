"""Which MariaDB errors count as a server not (yet) up: retried in a new
transaction, then answered 503, instead of a 500."""

from __future__ import annotations

import pymysql
import sqlalchemy as sa

from placement.db import server_errors


def _mysql_dialect() -> sa.engine.Dialect:
    return sa.create_engine("mysql+pymysql://root@127.0.0.1/test").dialect


def test_a_trigger_not_usable_yet_on_a_rejoined_galera_node_is_a_server_not_up():
    dialect = _mysql_dialect()
    for text in ("Unknown trigger has an error in its body: 'Query was empty'",
                 "Trigger 'placement_provider_updated' has an error in its body: "
                 "'You have an error in your SQL syntax'"):
        assert server_errors._is_server_gone(dialect, pymysql.err.ProgrammingError(1064, text))


def test_a_statement_of_bad_syntax_is_not_a_server_gone():
    dialect = _mysql_dialect()
    assert not server_errors._is_server_gone(dialect, pymysql.err.ProgrammingError(
        1064, "You have an error in your SQL syntax; check the manual"))
    assert server_errors._is_server_gone(dialect, pymysql.err.OperationalError(
        2013, "Lost connection to MySQL server during query"))
