"""Runs the suite on every database backend (see tests/db.py).

Tests take a database through the ``database`` fixture (a ``FreshDatabase``,
parametrized over the backends) or the ``backend`` fixture (the name alone;
``server_backend`` for MySQL and PostgreSQL only);
gabbi tests carry a ``backend`` marker. Tests of a module that imports
``FreshDatabase`` and calls it without a backend run once per backend too
(the autouse ``implicit_backend`` fixture sets the default). A backend whose server is down is
deselected, with the reason in the report header, except under CI
(``CI=true``), where the run fails at once instead.

Tests marked ``external(name)`` need something of the machine beyond Python
packages and database servers (``EXTERNAL`` below: Apache mod_wsgi, Galera,
the original service's tool, wheel builds). When it is missing, they are
deselected with a note at the end of the report, except under CI, where the
run fails instead. Markers (registered in pyproject.toml): ``slow`` and
``external`` select the quick set, ``pytest -m "not slow and not external"``
(doc/source/contributor/testing.rst).

The terminal summary shows the time spent per backend and the lines tests
gave to the ``report`` fixture (e.g. the stress test's claims per second).
"""

from __future__ import annotations

import collections
import functools
import os

import pytest

# The osc-placement story's tests live in a module that test classes derive
# from (tests/fixtures/osc_story.py): rewritten as test modules are, its
# asserts explain their failures.
pytest.register_assert_rewrite("tests.fixtures.osc_story")

from tests import db  # noqa: E402

# A real Keystone and placement behind it, once per run for every module
# that asks (tests/fixtures/keystone_server.py).
from tests.fixtures.keystone_server import keystone, keystone_placement  # noqa: E402,F401

_unavailable: dict[str, str] = {}
# external(name) -> why it is missing, for those found missing in this run.
_missing_externals: dict[str, str] = {}
_backend_of_test: dict[str, str] = {}
_seconds_per_backend: collections.Counter = collections.Counter()
_reported_lines: list[str] = []


def _missing_paths(hint: str, *paths: str) -> str | None:
    for path in paths:
        if not os.path.exists(path):
            return f"{path} is not installed ({hint})"
    return None


def _apache_unavailable_reason() -> str | None:
    # What tests/functional/test_mod_wsgi.py runs: Debian's Apache, its
    # mod_wsgi and the python3 that mod_wsgi is built for.
    return _missing_paths("Debian: apache2 libapache2-mod-wsgi-py3 python3-venv",
                          "/usr/sbin/apache2", "/usr/lib/apache2/modules/mod_wsgi.so",
                          "/usr/bin/python3")


def _galera_unavailable_reason() -> str | None:
    from tests import db_servers

    return db_servers.galera_unavailable_reason()


def _original_service_unavailable_reason() -> str | None:
    from tests.fixtures import original

    return _missing_paths("the tool that installs and runs the original service",
                          original.TOOL)


# What ``external(name)`` names: a function telling why it is missing here
# (None when it is there), or None for what the test extra always brings.
EXTERNAL = {
    "apache": _apache_unavailable_reason,
    "galera": _galera_unavailable_reason,
    "original-service": _original_service_unavailable_reason,
    "build": None,  # wheel and sdist builds (python -m build, pip)
}


@functools.cache
def _external_missing_reason(name: str) -> str | None:
    if name not in EXTERNAL:
        raise pytest.UsageError(f"unknown external({name!r}); known: {', '.join(EXTERNAL)}")
    check = EXTERNAL[name]
    return check() if check is not None else None


def pytest_configure(config):
    if db.in_ci() and set(db.selected_backends()) != set(db.ALL_BACKENDS):
        pytest.exit("PLACEMENT_TEST_BACKENDS may not narrow the backends under CI",
                    returncode=pytest.ExitCode.USAGE_ERROR)
    for backend in db.selected_backends():
        reason = db.server_unavailable_reason(backend)
        if reason is None:
            continue
        if db.in_ci():
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


def _uses_fresh_database_directly(metafunc) -> bool:
    """The test's module calls FreshDatabase() and the test does not choose a
    backend itself (by fixture, or by a ``backend`` marker for a test that is
    about one backend, e.g. SQLite files)."""
    if "backend" in metafunc.fixturenames or "server_backend" in metafunc.fixturenames:
        return False
    if metafunc.definition.get_closest_marker("backend") is not None:
        return False
    return any(value is db.FreshDatabase for value in vars(metafunc.module).values())


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", _backend_parameters(db.selected_backends()))
    if _uses_fresh_database_directly(metafunc):
        metafunc.parametrize("implicit_backend", _backend_parameters(db.selected_backends()),
                             indirect=True)
    if "server_backend" in metafunc.fixturenames:
        # Tests of what only a database server does (deadlocks, connections).
        metafunc.parametrize("server_backend", _backend_parameters(
            [backend for backend in db.selected_backends() if backend != "sqlite"]))


@pytest.fixture(autouse=True)
def implicit_backend(request):
    """The backend of FreshDatabase() without arguments during the test:
    each backend in turn for tests of modules that call it (see above)."""
    marker = request.node.get_closest_marker("backend")
    backend = getattr(request, "param", marker.args[0] if marker else "sqlite")
    previous, db.default_backend = db.default_backend, backend
    yield backend
    db.default_backend = previous


@pytest.fixture
def database(backend):
    """A fresh, migrated database of each backend in turn."""
    fresh = db.FreshDatabase(backend)
    yield fresh
    fresh.close()


def _missing_external(item) -> str | None:
    """The first ``external(name)`` of ``item`` that is missing here."""
    for marker in item.iter_markers("external"):
        for name in marker.args:
            reason = _external_missing_reason(name)
            if reason is not None:
                _missing_externals[name] = reason
                return name
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Deselect tests of a backend that is down or not selected, and tests
    that need something missing here (a failure under CI)."""
    runnable = set(db.selected_backends()) - set(_unavailable)
    kept, deselected = [], []
    for item in items:
        marker = item.get_closest_marker("backend")
        if marker is not None and marker.args[0] not in runnable:
            deselected.append(item)
        elif _missing_external(item) is not None:
            deselected.append(item)
        else:
            kept.append(item)
            if marker is not None:
                _backend_of_test[item.nodeid] = marker.args[0]
    if _missing_externals and db.in_ci():
        missing = "; ".join(f"{name}: {reason}" for name, reason in _missing_externals.items())
        pytest.exit(f"tests need what is missing under CI: {missing}",
                    returncode=pytest.ExitCode.INTERNAL_ERROR)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def pytest_runtest_logreport(report):
    _seconds_per_backend[_backend_of_test.get(report.nodeid, "no database")] += report.duration


@pytest.fixture(scope="session")
def report():
    """``report(line)`` shows ``line`` in the terminal summary of the run."""
    return _reported_lines.append


def pytest_terminal_summary(terminalreporter):
    terminalreporter.section("database backends")
    for backend, seconds in sorted(_seconds_per_backend.items()):
        terminalreporter.write_line(f"{backend}: {seconds:.1f} s of tests")
    for backend, reason in _unavailable.items():
        terminalreporter.write_line(
            f"NOTE: tests on database backend {backend} were deselected: {reason}",
            yellow=True)
    for name, reason in _missing_externals.items():
        terminalreporter.write_line(
            f"NOTE: tests needing external({name}) were deselected: {reason}", yellow=True)
    for line in _reported_lines:
        terminalreporter.write_line(line)


def pytest_sessionfinish(session):
    db.drop_run_databases()
