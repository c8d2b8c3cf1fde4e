"""The deploy guide (doc/source/admin/deploy.rst, "From the wheel to a
claim"), its named shell blocks run as written, in order: the wheel into a
new virtual environment, a MariaDB database and a non-root user (binary
logging on, as the guide says to configure it), Keystone registration,
placement.conf, ``db sync --check`` and ``db sync``, the uwsgi recipe and
the systemd unit, and a claim with osc-placement through a real Keystone.

What a test cannot do on the machine it shares, it does otherwise, and
only that: the paths are moved into a directory of the test
(``PATHS``); ``useradd``, ``chown`` and ``systemctl`` lines are left out,
and the unit's ``ExecStart`` runs as systemd would run it (its environment,
its runtime directory, ``NOTIFY_SOCKET``); ``mysql`` and ``psql`` reach the
test's own servers as their administrators; ``pip`` installs from the
tests' wheel house (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``). The guide's
PostgreSQL block runs too, as far as the schema.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid

import pytest
import sqlalchemy as sa

from tests import db_servers
from tests.fixtures import deployment, installed, keystone_server, ops

pytestmark = [pytest.mark.slow, pytest.mark.external("build")]

GUIDE = os.path.join(ops.REPO_ROOT, "doc", "source", "admin", "deploy.rst")
# Lines left out: they need the host's accounts or systemd.
LEFT_OUT = ("useradd ", "chown ", "systemctl ")
BLOCK_TIMEOUT = 600
# The recipe's worker processes.
WORKERS = 4


def guide_blocks() -> dict[str, str]:
    """name -> the commands of each ``.. code-block:: shell`` of the guide
    that has a ``:name:``, in the guide's order."""
    blocks: dict[str, str] = {}
    with open(GUIDE, encoding="utf-8") as guide:
        lines = guide.read().splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() != ".. code-block:: shell":
            index += 1
            continue
        index += 1
        name = None
        while lines[index].strip().startswith(":"):
            option, _, value = lines[index].strip()[1:].partition(": ")
            if option == "name":
                name = value.strip()
            index += 1
        body = []
        while index < len(lines) and (not lines[index].strip()
                                      or lines[index].startswith("   ")):
            body.append(lines[index])
            index += 1
        if name:
            blocks[name] = textwrap.dedent("\n".join(body)).strip() + "\n"
    return blocks


class Host:
    """A host the guide's blocks run on: its paths under ``root``, its
    environment (the guide's shell variables, the administrator's ``OS_*``
    credentials) and the substitutions of ``PATHS``."""

    def __init__(self, root: str, env: dict[str, str], moves: dict[str, str]):
        self.root = root
        self.env = env
        self.moves = moves
        self.blocks = guide_blocks()

    def run(self, name: str, cwd: str | None = None) -> str:
        """The block ``name`` in bash (``set -euo pipefail``); its output."""
        text = deployment.moved(self.blocks[name], self.moves)
        script = "\n".join(line for line in text.splitlines()
                           if not line.lstrip().startswith(LEFT_OUT))
        finished = subprocess.run(["bash", "-euo", "pipefail", "-c", script],
                                  env=self.env, cwd=cwd or self.root, capture_output=True,
                                  text=True, timeout=BLOCK_TIMEOUT)
        assert finished.returncode == 0, (
            f"{name} failed:\n{script}\n{finished.stdout}\n{finished.stderr}")
        return finished.stdout + finished.stderr


def _paths(root: str) -> dict[str, str]:
    """The host's paths the guide names, moved under ``root``."""
    paths = {path: root + path for path in (
        "/opt/placement", "/etc/placement", "/etc/systemd/system", "/run/placement",
        "/var/lib/placement")}
    for path in paths.values():
        os.makedirs(path, exist_ok=True)
    return paths


@pytest.fixture(scope="module")
def mariadb():
    """A MariaDB of the test's own, binary logging on, configured as the
    guide says for placement's triggers."""
    server = db_servers.PrivateMariaDB("--log-bin", "--log-bin-trust-function-creators=1")
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def keystone(tmp_path_factory):
    """A Keystone of the module's own: the guide creates the ``placement``
    user and service, which the session's Keystone may hold already."""
    with keystone_server.Keystone(tmp_path_factory.mktemp("keystone")) as running:
        yield running


def _host_environment(keystone: keystone_server.Keystone, root: str, **variables: str
                      ) -> dict[str, str]:
    admin = keystone.admin
    return installed.clean_environment(
        PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        # the moved /etc/placement, where placement's commands look
        OS_PLACEMENT_CONFIG_DIR=root + "/etc/placement",
        OS_AUTH_TYPE="password", OS_AUTH_URL=admin.auth_url, OS_IDENTITY_API_VERSION="3",
        OS_REGION_NAME=keystone_server.REGION, OS_USERNAME=admin.username,
        OS_PASSWORD=admin.password, OS_PROJECT_NAME=admin.project_name,
        OS_USER_DOMAIN_NAME=keystone_server.DOMAIN,
        OS_PROJECT_DOMAIN_NAME=keystone_server.DOMAIN,
        **installed.offline_pip_environment(installed.artifacts().wheel, ("uwsgi",)),
        **variables)


def _scalar(url: str, query: str) -> object:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.exec_driver_sql(query).scalar()
    finally:
        engine.dispose()


def test_the_guide_from_the_wheel_to_a_claim(mariadb, keystone, tmp_path):
    root = str(tmp_path / "host")
    port = ops.free_port()
    placement_url = f"http://127.0.0.1:{port}"
    moves = {**_paths(root),
             "mysql <<EOF": f"mysql --host=127.0.0.1 --port={mariadb.port} --user=root <<EOF",
             "0.0.0.0:8778": f"127.0.0.1:{port}"}
    host = Host(root, _host_environment(
        keystone, root, PLACEMENT_DB_PASSWORD=uuid.uuid4().hex,
        PLACEMENT_PASSWORD=uuid.uuid4().hex, DB_HOST=f"127.0.0.1:{mariadb.port}",
        KEYSTONE_URL=keystone.auth_url, PLACEMENT_URL=placement_url), moves)
    assert list(host.blocks) == ["deploy-install", "deploy-mariadb", "deploy-postgresql",
                                 "deploy-keystone", "deploy-config", "deploy-db-sync",
                                 "deploy-systemd", "deploy-check"]

    wheel = installed.artifacts().wheel
    host.run("deploy-install", cwd=os.path.dirname(wheel))
    host.run("deploy-mariadb")
    assert _scalar(mariadb.admin_url, "SELECT @@log_bin") == 1
    host.run("deploy-keystone")
    host.run("deploy-config")
    synced = host.run("deploy-db-sync")
    assert synced.count("Result: Success") == 3, synced
    host.run("deploy-systemd")

    with open(root + "/etc/systemd/system/placement-api.service", encoding="utf-8") as unit_file:
        unit = unit_file.read()
    command, unit_env = deployment.service_command(unit, moves)
    notify_path = os.path.join(root, "notify")
    with deployment.notify_socket(notify_path) as listener, \
            ops.Server(command, port, env={**host.env, **unit_env,
                                           "NOTIFY_SOCKET": notify_path}, cwd=root) as server:
        deployment.wait_for_notification(listener, b"READY=1", timeout=120)
        server.wait_for_output("WSGI app 0 (mountpoint='') ready", count=WORKERS)
        checked = host.run("deploy-check")
    assert re.search(r"\|\s*VCPU\s*\|\s*2\s*\|", checked), checked
    output = server.output()
    assert "Traceback" not in output, output
    assert "ignored" not in output, output  # no option of the guide's file unused
    # the claim and the reads went through keystonemiddleware
    assert re.search(r"PUT /allocations/\S+ status: 204", output), output


def test_the_guides_postgresql_user_makes_the_schema(keystone, tmp_path):
    """The guide's PostgreSQL block, then ``db sync`` as the user it makes:
    the database's owner creates the tables and the triggers' functions."""
    server = db_servers.PrivatePostgreSQL()
    try:
        server.start()
        root = str(tmp_path / "host")
        password = uuid.uuid4().hex
        host = Host(root, _host_environment(keystone, root, PLACEMENT_DB_PASSWORD=password), {
            **_paths(root), "runuser -u postgres -- psql <<EOF":
            f"psql --host=127.0.0.1 --port={server.port} --username=postgres <<EOF"})
        host.run("deploy-postgresql")
        url = f"postgresql://placement:{password}@127.0.0.1:{server.port}/placement"
        synced = subprocess.run([sys.executable, "-m", "placement.cmd.manage", "db", "sync"],
                                env={**host.env, "OS_PLACEMENT_DATABASE__CONNECTION": url},
                                cwd=root, capture_output=True, text=True,
                                timeout=BLOCK_TIMEOUT)
        assert synced.returncode == 0, synced.stderr
        owner_url = f"postgresql+psycopg://placement@127.0.0.1:{server.port}/placement"
        assert _scalar(owner_url, "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal") > 0
        assert _scalar(owner_url, "SELECT DISTINCT tableowner FROM pg_tables "
                                  "WHERE schemaname = 'public'") == "placement"
    finally:
        server.close()
