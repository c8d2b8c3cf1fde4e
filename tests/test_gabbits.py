"""Runs every YAML file in gabbits/ against the application, in-process,
once per database backend.

Test ids name the backend first: ``test_gabbi[mysql:root_unknown_version]``
(``-k sqlite`` or ``-k "mysql and root"`` select). Each file of each backend
is its own gabbi suite, with fixtures whose ``backend`` is that backend.

gabbi's own pytest plugin is not used: it takes every test id containing a
colon, in any module, for one of its own. Instead a suite's fixtures start
before its first selected test and stop when the next suite (or the module)
begins; a test selected alone still runs its prior tests first (gabbi does
that itself).
"""

from __future__ import annotations

import os
import types
import unittest

import pytest
from gabbi import driver, reporter, suite
from gabbi import fixture as gabbi_fixture

from tests import db, fixtures

GABBITS = os.path.join(os.path.dirname(__file__), os.pardir, "gabbits")
_RESULT = reporter.PyTestResult()


def _fixtures_for(backend: str) -> types.SimpleNamespace:
    """The fixture classes of tests.fixtures, under their own names, with
    ``backend`` set on those that make a database."""
    classes = {}
    for name, value in vars(fixtures).items():
        if isinstance(value, type) and issubclass(value, gabbi_fixture.GabbiFixture):
            if issubclass(value, fixtures.APIFixture):
                value = type(name, (value,), {"backend": backend})
            classes[name] = value
    return types.SimpleNamespace(**classes)


def _parameters(backend: str) -> list:
    suites = driver.build_tests(
        GABBITS, unittest.TestLoader(), intercept=fixtures.current_app,
        fixture_module=_fixtures_for(backend), test_loader_name=backend)
    marks = [pytest.mark.backend(backend)]
    return [pytest.param(file_suite, case, id=f"{backend}:{case.__class__.__name__}",
                         marks=marks)
            for file_suite in suites for case in file_suite]


def pytest_generate_tests(metafunc):
    metafunc.parametrize("file_suite, case", [
        parameter for backend in db.selected_backends() for parameter in _parameters(backend)])


class _Running:
    """The suite whose fixtures are started, and how starting them ended."""

    suite: suite.GabbiSuite | None = None
    start_failure: BaseException | None = None


def _switch_to(file_suite: suite.GabbiSuite | None) -> None:
    if _Running.suite is file_suite:
        return
    if _Running.suite is not None:
        _Running.suite.stop()
    _Running.suite, _Running.start_failure = file_suite, None
    if file_suite is not None:
        try:
            file_suite.start(_RESULT)
        except BaseException as failure:  # a skip, or a fixture that failed
            _Running.start_failure = failure


@pytest.fixture(scope="module", autouse=True)
def _stop_the_last_suite():
    yield
    _switch_to(None)


def test_gabbi(file_suite, case):
    _switch_to(file_suite)
    failure = _Running.start_failure
    if isinstance(failure, pytest.skip.Exception):
        pytest.skip(str(failure))
    if failure is not None:
        pytest.fail(f"the fixtures of this file failed to start: {failure!r}")
    case(_RESULT)
