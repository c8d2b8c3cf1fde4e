"""Taking over a database that the original OpenStack Placement service
built, and handing it back.

The original (run as a black box, see tests/fixtures/original.py) creates
an empty database of each backend itself and tells a fixed story through its
API; ``placement-manage db sync`` then takes the database over (after
``db sync --check`` reported what it found) and this service must answer a
fixed set of GETs exactly as the original did. It writes more, ``db
handback`` returns the database, and the original must answer what this
service answered; once more the other way round. From the oldest release
that installs here (1.0.0) the first half is enough, on SQLite.

One known failure of the original is set aside: on PostgreSQL, 16.0.0
answers 500 to ``GET /usages`` at 1.38 and later when the answer is grouped
by consumer type (a GROUP BY that PostgreSQL refuses). Where the original
answers 500, this service must answer 200; those requests are not compared.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests import db as test_db
from tests.fixtures import original
from tests.fixtures.servers import REPOSITORY, Client, Servers

pytestmark = [pytest.mark.slow, pytest.mark.external("original-service")]

NEWEST = "16.0.0"
NEWEST_MAX_VERSION = "1.39"
OLDEST = "1.0.0"
OLDEST_MAX_VERSION = "1.31"
MANAGE_TIMEOUT = 600


def manage(url: str, config_dir: str, *args: str) -> subprocess.CompletedProcess:
    """``placement-manage db ARGS`` of this checkout on the database ``url``."""
    environment = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=config_dir,
                       OS_PLACEMENT_DATABASE__CONNECTION=url)
    return subprocess.run([sys.executable, "-m", "placement.cmd.manage", "db", *args],
                          cwd=REPOSITORY, env=environment, capture_output=True, text=True,
                          timeout=MANAGE_TIMEOUT)


def _output(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"


def take_over(url: str, config_dir: str, report, label: str) -> None:
    """``db sync --check`` (which must name the original's revision it
    found), then ``db sync``, timed."""
    revision = original.database_revision(url)
    assert revision, f"{label}: the original recorded no alembic revision"
    check = manage(url, config_dir, "sync", "--check")
    assert check.returncode == 0, f"{label}: db sync --check failed: {_output(check)}"
    assert revision in check.stdout, (
        f"{label}: db sync --check does not mention the original's revision "
        f"{revision}: {_output(check)}")
    started = time.monotonic()
    sync = manage(url, config_dir, "sync")
    seconds = time.monotonic() - started
    assert sync.returncode == 0, f"{label}: db sync failed: {_output(sync)}"
    # the schema is ours, but for the original's provider generation column,
    # which takes NULL and has no default (ours: NOT NULL DEFAULT 0; every
    # writer gives a generation)
    differences = test_db.schema_differences(url)
    assert [change for difference in differences for change in
            (difference if isinstance(difference, list) else [difference])
            if change[:4] not in (("modify_nullable", None, "resource_providers", "generation"),
                                  ("modify_default", None, "resource_providers", "generation"))
            ] == [], differences
    report(f"takeover: placement-manage db sync of {label} (revision {revision}): "
           f"{seconds:.2f} s")


def hand_back(url: str, config_dir: str, label: str) -> None:
    done = manage(url, config_dir, "handback")
    assert done.returncode == 0, f"{label}: db handback failed: {_output(done)}"


@contextlib.contextmanager
def ours(url: str, log_dir: str) -> Iterator[Client]:
    """This service (one placement-api process) on ``url``."""
    servers = Servers(url, log_dir, 1)
    client = servers.client(0)
    try:
        yield client
    finally:
        client.close()
        servers.stop()


def assert_same(expected: dict, actual: dict, what: str, original_side: str,
                report) -> None:
    """``actual`` answers every request of ``expected`` the same way, but
    where the original (``original_side``: "expected" or "actual") failed
    with a 5xx: there this service must have answered 200."""
    originals, others = (expected, actual) if original_side == "expected" else (actual, expected)
    failed = sorted(key for key, (status, _) in originals.items() if status >= 500)
    wrong = [f"{key}: {others[key][0]}" for key in failed
             if key in others and others[key][0] != 200]
    assert not wrong, (f"{what}: where the original failed, this service must answer 200:\n"
                       + "\n".join(wrong))
    if failed:
        shown = "; ".join(failed[:3]) + (f"; and {len(failed) - 3} more" if len(failed) > 3
                                         else "")
        report(f"takeover: {what}: {len(failed)} requests set aside, which the original "
               f"answered with {sorted({originals[key][0] for key in failed})}: {shown}")
    compared_expected = {key: value for key, value in expected.items() if key not in failed}
    compared_actual = {key: value for key, value in actual.items() if key not in failed}
    difference = original.differences(compared_expected, compared_actual)
    assert not difference, f"{what}:\n{difference}"


@pytest.fixture
def directories(tmp_path) -> tuple[str, str]:
    """An empty configuration directory (nothing but the environment
    configures the commands) and one for the servers' logs."""
    config_dir, log_dir = tmp_path / "config", tmp_path / "logs"
    config_dir.mkdir()
    log_dir.mkdir()
    return str(config_dir), str(log_dir)


def test_takeover_and_handback(backend, directories, report):
    config_dir, log_dir = directories
    venv = original.installed(NEWEST)
    newest = NEWEST_MAX_VERSION
    url = test_db.empty_database_url(backend)

    # The original builds the database and tells the first stage.
    with original.running(venv, url, log_dir) as client:
        original.fill(client, newest, "a")
        snapshot_a = original.snapshot(client, newest, ("a",))

    take_over(url, config_dir, report, f"a {backend} database of the original {NEWEST}")
    with ours(url, log_dir) as client:
        assert_same(snapshot_a, original.snapshot(client, newest, ("a",)),
                    f"{backend}: this service after the takeover", "expected", report)
        original.fill(client, newest, "b", earlier="a")
        snapshot_b = original.snapshot(client, newest, ("a", "b"))

    hand_back(url, config_dir, backend)
    with original.running(venv, url, log_dir) as client:
        assert_same(snapshot_b, original.snapshot(client, newest, ("a", "b")),
                    f"{backend}: the original after the hand-back", "actual", report)
        original.fill(client, newest, "c", earlier="b")
        snapshot_c = original.snapshot(client, newest, ("a", "b", "c"))

    take_over(url, config_dir, report,
              f"a {backend} database handed back and written by the original {NEWEST}")
    with ours(url, log_dir) as client:
        assert_same(snapshot_c, original.snapshot(client, newest, ("a", "b", "c")),
                    f"{backend}: this service after the second takeover", "expected", report)


@pytest.mark.backend("sqlite")
def test_takeover_from_the_oldest_release(directories, report):
    config_dir, log_dir = directories
    venv = original.installed(OLDEST)
    newest = OLDEST_MAX_VERSION
    url = test_db.empty_database_url("sqlite")

    with original.running(venv, url, log_dir) as client:
        original.fill(client, newest, "a")
        snapshot_a = original.snapshot(client, newest, ("a",))

    take_over(url, config_dir, report, f"a sqlite database of the original {OLDEST}")
    with ours(url, log_dir) as client:
        assert_same(snapshot_a, original.snapshot(client, newest, ("a",)),
                    f"sqlite: this service after the takeover from {OLDEST}", "expected",
                    report)
