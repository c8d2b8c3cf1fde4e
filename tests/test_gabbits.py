"""Runs every YAML file in gabbits/ against the application, in-process."""

import os

from gabbi import driver
from gabbi.driver import test_pytest  # noqa: F401 (gabbi parametrizes this test)

from tests import fixtures

GABBITS = os.path.join(os.path.dirname(__file__), os.pardir, "gabbits")


def pytest_generate_tests(metafunc):
    driver.py_test_generator(
        GABBITS,
        intercept=fixtures.current_app,
        fixture_module=fixtures,
        test_loader_name=__name__,
        metafunc=metafunc,
    )
