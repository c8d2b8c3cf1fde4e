"""Runs the suite on every database backend (see tests/db.py).

Tests take a database through the ``database`` fixture (a ``FreshDatabase``,
parametrized over the backends) or the ``backend`` fixture (the name alone;
``server_backend`` for MySQL and PostgreSQL only);
gabbi tests carry a ``backend`` marker. A backend whose server is down is
deselected, with the reason in the report header, except under CI
(``CI=true``), where the run fails at once instead.
"""

from __future__ import annotations

import os

import pytest

from tests import db

_unavailable: dict[str, str] = {}


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "backend(name): the database backend the test runs on")
    for backend in db.selected_backends():
        reason = db.server_unavailable_reason(backend)
        if reason is None:
            continue
        if _in_ci():
            pytest.exit(f"database backend {backend} is unavailable under CI: {reason}",
                        returncode=pytest.ExitCode.INTERNAL_ERROR)
        _unavailable[backend] = reason


def pytest_report_header(config):
    lines = []
    for backend in db.selected_backends():
        reason = _unavailable.get(backend)
        state = f"UNAVAILABLE, its tests are deselected ({reason})" if reason else "available"
        lines.append(f"database backend {backend}: {state}")
    return lines


def _backend_parameters(backends) -> list:
    return [pytest.param(backend, id=backend, marks=pytest.mark.backend(backend))
            for backend in backends]


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", _backend_parameters(db.selected_backends()))
    if "server_backend" in metafunc.fixturenames:
        # Tests of what only a database server does (deadlocks, connections).
        metafunc.parametrize("server_backend", _backend_parameters(
            [backend for backend in db.selected_backends() if backend != "sqlite"]))


@pytest.fixture
def database(backend):
    """A fresh, migrated database of each backend in turn."""
    fresh = db.FreshDatabase(backend)
    yield fresh
    fresh.close()


def pytest_collection_modifyitems(config, items):
    """Deselect tests of a backend that is down or not selected."""
    runnable = set(db.selected_backends()) - set(_unavailable)
    kept, deselected = [], []
    for item in items:
        marker = item.get_closest_marker("backend")
        if marker is not None and marker.args[0] not in runnable:
            deselected.append(item)
        else:
            kept.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def pytest_terminal_summary(terminalreporter):
    for backend, reason in _unavailable.items():
        terminalreporter.write_line(
            f"NOTE: tests on database backend {backend} were deselected: {reason}",
            yellow=True)


def pytest_sessionfinish(session):
    db.drop_run_databases()
