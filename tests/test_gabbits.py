"""Runs every YAML file in gabbits/ against the application, in-process,
once per database backend.

Test ids name the backend first: ``test_pytest[mysql:root_unknown_version]``
(``-k sqlite`` or ``-k "mysql and root"`` select). Each file of each backend
is its own gabbi suite, with fixtures whose ``backend`` is that backend.
"""

from __future__ import annotations

import os
import types
import unittest

import pytest
from gabbi import driver, reporter
from gabbi import fixture as gabbi_fixture
from gabbi.driver import test_pytest  # noqa: F401 (parametrized below)

from tests import db, fixtures

GABBITS = os.path.join(os.path.dirname(__file__), os.pardir, "gabbits")


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
    """gabbi's pytest parameters for every file, named ``<backend>:<test>``.

    gabbi's own ``py_test_generator`` parametrizes once per directory; this
    does what it does for each backend, so that all land in one parametrize.
    gabbi's pytest plugin turns the start_/stop_ entries into per-suite
    fixture starts and stops; the backend marker lets conftest deselect a
    backend whose server is down.
    """
    suites = driver.build_tests(
        GABBITS, unittest.TestLoader(), intercept=fixtures.current_app,
        fixture_module=_fixtures_for(backend), test_loader_name=backend)
    result = reporter.PyTestResult()
    marks = [pytest.mark.backend(backend)]
    parameters = []
    for suite in suites:
        if not getattr(suite, "_tests", None):
            continue
        name = f"{backend}:{suite._tests[0].__class__.__name__}"
        parameters.append(pytest.param(suite.start, result, id="start_" + name, marks=marks))
        for test in suite:
            parameters.append(pytest.param(
                test, result, id=f"{backend}:{test.__class__.__name__}", marks=marks))
        parameters.append(pytest.param(suite.stop, None, id="stop_" + name, marks=marks))
    return parameters


def pytest_generate_tests(metafunc):
    if metafunc.function is not test_pytest:
        return
    metafunc.config.pluginmanager.import_plugin("gabbi.pytester")
    parameters = [parameter for backend in db.selected_backends()
                  for parameter in _parameters(backend)]
    metafunc.parametrize("test, result", parameters)
