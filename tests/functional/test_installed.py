"""The wheel and the sdist of this checkout, each installed into a new
virtual environment outside the checkout, run there as operators run them:
``placement-manage db sync``, ``placement-status upgrade check``,
``placement-api`` with no configuration, and uwsgi serving
``placement.wsgi:application`` by the recipe and the systemd unit that
``placement-manage sample`` prints from the installed package."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
import zipfile

import pytest

from placement import release
from placement.db import migration
from tests.fixtures import deployment, installed, ops

pytestmark = pytest.mark.external("build")

ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.20"}
COMMAND_TIMEOUT = 120


@pytest.fixture(scope="module", params=["wheel", "sdist"])
def venv(request, tmp_path_factory) -> str:
    artifacts = installed.artifacts()
    return installed.install(getattr(artifacts, request.param),
                             str(tmp_path_factory.mktemp(request.param) / "venv"),
                             extras=("uwsgi",))


@pytest.fixture
def workdir(tmp_path) -> str:
    """An empty directory outside the checkout, to run commands from."""
    return str(tmp_path)


def _run(venv: str, command: str, *args: str, cwd: str, env: dict
         ) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(venv, "bin", command), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT)


def test_the_package_is_imported_from_the_virtual_environment(venv, workdir):
    found = _run(venv, "python", "-c", "import placement; print(placement.__file__)",
                 cwd=workdir, env=installed.clean_environment())
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith(os.path.realpath(venv) + "/")
    assert not found.stdout.startswith(ops.REPO_ROOT)


@pytest.fixture(scope="module")
def synced(venv, tmp_path_factory) -> dict:
    """The environment of a database of its own (SQLite, noauth2), created
    by ``placement-manage db sync``."""
    workdir = str(tmp_path_factory.mktemp("synced"))
    env = installed.clean_environment(
        OS_PLACEMENT_CONFIG_DIR=workdir,
        OS_PLACEMENT_DATABASE__CONNECTION=f"sqlite:///{workdir}/placement.sqlite",
        OS_API__AUTH_STRATEGY="noauth2")
    synced = _run(venv, "placement-manage", "db", "sync", cwd=workdir, env=env)
    assert synced.returncode == 0, synced.stderr
    return env


def test_database_version_and_upgrade_check(venv, synced, workdir):
    version = _run(venv, "placement-manage", "db", "version", cwd=workdir, env=synced)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == migration.head_revision()
    checked = _run(venv, "placement-status", "upgrade", "check", cwd=workdir, env=synced)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("Result: Success") == 3, checked.stdout


def _create_and_read_a_provider(url: str) -> None:
    provider = str(uuid.uuid4())
    # a name of its own: the tests of one virtual environment share a database
    name = f"installed-{provider}"
    status, headers, body = ops.request(url + "/resource_providers", method="POST",
                                        headers=ADMIN, body={"name": name, "uuid": provider})
    assert status == 200, body
    status, _, body = ops.request(f"{url}/resource_providers/{provider}", headers=ADMIN)
    assert status == 200, body
    assert json.loads(body)["name"] == name


def _assert_versions(url: str) -> None:
    status, _, body = ops.request(url + "/")
    assert status == 200, body
    (version,) = json.loads(body)["versions"]
    assert (version["min_version"], version["max_version"]) == ("1.0", "1.39")


def test_placement_api_without_configuration(venv, workdir):
    """Nothing configured: the embedded SQLite database under
    $XDG_STATE_HOME, created and migrated, and noauth2 on loopback."""
    state = os.path.join(workdir, "state")
    empty_config_dir = os.path.join(workdir, "etc")
    os.mkdir(empty_config_dir)
    port = ops.free_port()
    env = installed.clean_environment(XDG_STATE_HOME=state,
                                      OS_PLACEMENT_CONFIG_DIR=empty_config_dir)
    command = [os.path.join(venv, "bin", "placement-api"), "--port", str(port)]
    with ops.Server(command, port, env=env, cwd=workdir) as server:
        _assert_versions(server.url)
        _create_and_read_a_provider(server.url)
    assert os.path.exists(os.path.join(state, "placement", "placement.sqlite"))
    assert "Traceback" not in server.output(), server.output()


def _installed_sample(venv: str, name: str, path: str) -> str:
    """``placement-manage sample NAME`` of ``venv``, written to ``path``;
    its text."""
    printed = _run(venv, "placement-manage", "sample", name, cwd=os.path.dirname(path),
                   env=installed.clean_environment())
    assert printed.returncode == 0, printed.stderr
    with open(path, "w") as sample:
        sample.write(printed.stdout)
    return printed.stdout


def test_uwsgi_serves_the_installed_package(venv, synced, workdir):
    recipe = os.path.join(workdir, "uwsgi.ini")
    _installed_sample(venv, "uwsgi", recipe)
    port = ops.free_port()
    command = [os.path.join(venv, "bin", "uwsgi"), "--ini", recipe,
               "--http-socket", f"127.0.0.1:{port}", "--processes", "2", "--threads", "2"]
    with ops.Server(command, port, env=synced, cwd=workdir) as server:
        server.wait_for_output("WSGI app 0 (mountpoint='') ready", count=2)
        _assert_versions(server.url)
        _create_and_read_a_provider(server.url)
    assert "Traceback" not in server.output(), server.output()


def test_the_systemd_unit_serves_and_tells_systemd(venv, synced, workdir):
    """The unit's command and environment, its paths moved into this test's
    directory and the runtime directory made as systemd makes it: uwsgi
    serves, and says READY=1 on systemd's notification socket (the unit is
    Type=notify)."""
    config_dir = os.path.join(workdir, "etc")
    os.mkdir(config_dir)
    recipe = os.path.join(config_dir, "uwsgi.ini")
    _installed_sample(venv, "uwsgi", recipe)
    unit = _installed_sample(venv, "systemd", os.path.join(workdir, "placement-api.service"))
    settings = deployment.service_settings(unit)
    assert settings["RuntimeDirectory"] == ["placement"]
    assert settings["Type"] == ["notify"]
    runtime_dir = os.path.join(workdir, "run")
    os.mkdir(runtime_dir)
    port = ops.free_port()
    command, unit_env = deployment.service_command(unit, {
        "/opt/placement/venv": venv, "/etc/placement/uwsgi.ini": recipe,
        "/etc/placement": config_dir, "/run/placement": runtime_dir,
        "0.0.0.0:8778": f"127.0.0.1:{port}"})
    notify_path = os.path.join(workdir, "notify")
    with deployment.notify_socket(notify_path) as listener, \
            ops.Server(command, port, env={**synced, **unit_env, "NOTIFY_SOCKET": notify_path},
                       cwd=workdir) as server:
        notifications = deployment.wait_for_notification(listener, b"READY=1", timeout=120)
        # the recipe's 4 workers (READY=1 comes once they are forked)
        server.wait_for_output("WSGI app 0 (mountpoint='') ready", count=4)
        _assert_versions(server.url)
        _create_and_read_a_provider(server.url)
    assert f"bound to UNIX address {runtime_dir}/uwsgi.sock" in server.output()
    assert b"READY=1" in notifications
    assert "Traceback" not in server.output(), server.output()


@pytest.mark.parametrize("name, file", [("uwsgi", "uwsgi.ini"),
                                        ("systemd", "placement-api.service"),
                                        ("config", "placement.conf.sample"),
                                        ("policy", "policy.yaml.sample"),
                                        ("grafana", "grafana-capacity.json")])
def test_placement_manage_prints_the_installed_samples(venv, workdir, name, file):
    printed = _installed_sample(venv, name, os.path.join(workdir, file))
    with open(os.path.join(ops.REPO_ROOT, "placement", "samples", file)) as own:
        assert printed == own.read()


def test_the_wheel_holds_the_deployment_samples():
    """The files ``placement-manage sample`` prints, as they are in the
    checkout."""
    with zipfile.ZipFile(installed.artifacts().wheel) as wheel:
        for name in ("uwsgi.ini", "placement-api.service", "placement.conf.sample",
                     "policy.yaml.sample", "grafana-capacity.json"):
            with open(os.path.join(ops.REPO_ROOT, "placement", "samples", name), "rb") as own:
                assert wheel.read(f"placement/samples/{name}") == own.read(), name


def test_the_wheel_holds_the_placement_package_alone():
    """Nothing but ``placement`` at the top of the wheel (the benchmark is
    ``placement.bench``; ``packages = find:`` must pick up nothing else)."""
    with zipfile.ZipFile(installed.artifacts().wheel) as wheel:
        names = wheel.namelist()
        (top_level_file,) = [name for name in names
                             if name.endswith(".dist-info/top_level.txt")]
        top_level = wheel.read(top_level_file).decode().split()
        entry_points = wheel.read(top_level_file.replace("top_level.txt", "entry_points.txt"))
    assert top_level == ["placement"]
    tops = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert tops == {"placement"}, sorted(tops)
    assert "placement/bench/cli.py" in names
    assert "placement-bench = placement.bench.cli:main" in entry_points.decode()


def test_the_artifacts_carry_the_checkouts_version():
    """The wheel and the sdist say the version git gives this checkout
    (placement.release), not a number written by hand."""
    expected = release.version_string()
    artifacts = installed.artifacts()
    with zipfile.ZipFile(artifacts.wheel) as wheel:
        (metadata,) = [name for name in wheel.namelist()
                       if name.endswith(".dist-info/METADATA")]
        assert f"\nVersion: {expected}\n" in wheel.read(metadata).decode()
    with open(os.path.join(artifacts.sdist_tree, "PKG-INFO"), encoding="utf-8") as pkg_info:
        assert f"\nVersion: {expected}\n" in pkg_info.read()
