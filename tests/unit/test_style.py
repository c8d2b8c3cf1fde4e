"""Style rules of the code and of the tests: ruff clean (the rules are in
pyproject.toml), and every database seeding helper of the tests written
once, in tests/fixtures/seed.py."""

from __future__ import annotations

import ast
import collections
import glob
import os
import shutil
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
TESTS = os.path.join(ROOT, "tests")
FIXTURES = os.path.join(TESTS, "fixtures")
SEED = os.path.join(FIXTURES, "seed.py")
# The names of the functions that write rows (tests/fixtures/seed.py's
# verbs): a fixture module defining one more belongs in seed.py.
SEEDING_VERBS = ("add_", "create_", "insert_")


def test_ruff_finds_nothing():
    beside_python = os.path.join(os.path.dirname(sys.executable), "ruff")
    ruff = beside_python if os.path.exists(beside_python) else shutil.which("ruff")
    assert ruff is not None, "ruff is part of the test extra"
    result = subprocess.run([ruff, "check", "placement", "tests"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def _module_functions(path: str) -> list[str]:
    """The names of the functions defined at the top level of ``path``."""
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read(), path)
    return [node.name for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def _test_modules() -> list[str]:
    return sorted(glob.glob(os.path.join(TESTS, "**", "*.py"), recursive=True))


def test_fixture_functions_have_one_home():
    """A public function of tests/fixtures/ is defined in one module only
    (two ``add_inventory`` with other defaults, or ``add_allocation`` with
    its arguments swapped, is how a test comes to seed what it did not
    mean to)."""
    homes = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*.py"))):
        for name in _module_functions(path):
            if not name.startswith("_"):
                homes[name].append(os.path.relpath(path, ROOT))
    assert "add_inventory" in homes and "add_allocation" in homes
    twice = {name: paths for name, paths in homes.items() if len(paths) > 1}
    assert not twice, twice


def test_seeding_helpers_are_written_once():
    """Only tests/fixtures/seed.py defines a seeding helper: no other
    fixture module defines a public ``add_*``/``create_*``/``insert_*``
    function, and no test module defines a function of the name (leading
    underscores aside) of one of seed.py's."""
    seeding = {name for name in _module_functions(SEED) if not name.startswith("_")}
    assert {"create_provider", "add_inventory", "add_allocation", "add_consumer",
            "add_traits", "add_aggregates"} <= seeding
    found = []
    for path in _test_modules():
        if path == SEED:
            continue
        in_fixtures = os.path.dirname(path) == FIXTURES
        for name in _module_functions(path):
            if name.lstrip("_") in seeding or (
                    in_fixtures and name.startswith(SEEDING_VERBS)):
                found.append(f"{os.path.relpath(path, ROOT)}: {name}")
    assert not found, f"seeding helpers outside tests/fixtures/seed.py: {found}"
