"""Style rules of the code, the tests and the history: ruff clean (the
rules are in pyproject.toml), modules and functions of a size a newcomer
reads, every database seeding helper of the tests written once, in
tests/fixtures/seed.py, and every commit message as OpenStack keeps them
(doc/source/contributor/contributing.rst)."""

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


# Lines a module of the package may have (migrations excepted), and a
# function (data literals excepted: a function whose body is one return of
# a literal, as the route table's builders would be).
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def _package_modules() -> list[str]:
    migrations = os.path.join(ROOT, "placement", "db", "alembic")
    return [path for path in glob.glob(os.path.join(ROOT, "placement", "**", "*.py"),
                                       recursive=True)
            if not path.startswith(migrations)]


def test_modules_and_functions_are_of_a_readable_size():
    long_modules, long_functions = [], []
    for path in _package_modules():
        with open(path, encoding="utf-8") as module:
            source = module.read()
        name = os.path.relpath(path, ROOT)
        if source.count("\n") > MAX_MODULE_LINES:
            long_modules.append(name)
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            literal = (len(node.body) == 1 and isinstance(node.body[0], ast.Return)
                       and isinstance(node.body[0].value, (ast.Dict, ast.List, ast.Tuple)))
            if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES and not literal:
                long_functions.append(f"{name}:{node.lineno} {node.name}")
    assert (long_modules, long_functions) == ([], [])


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


# Commits after this one (main's head when the rule was made; older
# subjects are often longer) keep the rule of
# doc/source/contributor/contributing.rst: a subject of at most 72 characters,
# then a blank line before the body.
RULE_START = "9ecdcc5f7df256aea293d3f9df5c677e2c37ba0a"
MAX_SUBJECT = 72


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def _messages_since_rule() -> list[tuple[str, str]]:
    """(hash, message) of each commit of HEAD's history after RULE_START:
    ``RULE_START..HEAD``, or every commit a shallow clone holds when it
    does not reach back to RULE_START (all of those are later)."""
    known = _git("cat-file", "-e", f"{RULE_START}^{{commit}}").returncode == 0
    revisions = [f"{RULE_START}..HEAD"] if known else ["HEAD"]
    listed = _git("log", "--format=%H%x00%B%x1e", *revisions)
    assert listed.returncode == 0, listed.stderr
    entries = [entry.strip("\n") for entry in listed.stdout.split("\x1e")]
    return [tuple(entry.split("\x00", 1)) for entry in entries if entry]


def _message_faults(message: str) -> list[str]:
    lines = message.strip("\n").split("\n")
    faults = []
    if len(lines[0]) > MAX_SUBJECT:
        faults.append(f"subject of {len(lines[0])} characters")
    if len(lines) > 1 and lines[1].strip():
        faults.append("no blank line after the subject")
    return faults


def test_message_rule_refuses_what_it_should():
    assert _message_faults("Short subject\n\nBody.") == []
    assert _message_faults("x" * 72) == []
    assert _message_faults("x" * 73 + "\n\nBody.") == ["subject of 73 characters"]
    assert _message_faults("Subject\nbody at once") == ["no blank line after the subject"]


if os.path.exists(os.path.join(ROOT, ".git")):
    def test_commit_messages_since_the_rule_keep_it():
        faults = {commit[:12]: _message_faults(message)
                  for commit, message in _messages_since_rule()}
        assert not {commit: found for commit, found in faults.items() if found}
elif os.environ.get("CI") == "true":
    def test_ci_runs_from_a_git_clone():
        raise AssertionError("CI runs from a clone: the commit message rule needs its history")
# Elsewhere (an unpacked sdist) there is no history to read: the test of
# the commit messages is not collected.
