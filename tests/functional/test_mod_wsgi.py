"""Apache mod_wsgi serving the wheel of this checkout with the site of
README.rst's Apache section, as written but for the port, the paths and the
account: Debian's apache2 and libapache2-mod-wsgi-py3 (.ci/run installs
them), a virtual environment made with Debian's python3 (the Python that
mod_wsgi is built for), daemon mode with several processes. Mounted under
``/``, a few requests and osc-placement commands; under ``/placement``,
the whole osc-placement story (tests/fixtures/osc_story.py)."""

from __future__ import annotations

import contextlib
import getpass
import grp
import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.fixtures import installed, ops
from tests.fixtures.osc_story import NEWEST, Openstack, OscStory

pytestmark = pytest.mark.external("apache")

APACHE = "/usr/sbin/apache2"
MODULES = "/usr/lib/apache2/modules"
# The Python that Debian's mod_wsgi is built for.
DEBIAN_PYTHON = "/usr/bin/python3"
README = os.path.join(ops.REPO_ROOT, "README.rst")
PROCESSES = 4  # the site's processes=

# Apache's own configuration, standing in for Debian's apache2.conf: the
# modules the site needs, and every file in the test's directory.
SERVER_CONFIG = """\
ServerName 127.0.0.1
PidFile {run}/apache2.pid
DefaultRuntimeDir {run}
Mutex file:{run} default
WSGISocketPrefix {run}/wsgi
LoadModule mpm_event_module {modules}/mod_mpm_event.so
LoadModule authz_core_module {modules}/mod_authz_core.so
LoadModule wsgi_module {modules}/mod_wsgi.so
User {user}
Group {group}
ErrorLog {run}/error.log
LogLevel info
Include {site}
"""


def readme_site() -> str:
    """The site configuration of README.rst's Apache section, as written."""
    with open(README) as readme:
        text = readme.read()
    section = text[text.index("Apache mod_wsgi\n---"):]
    start = section.index("::\n", section.index("sites-available/placement-api.conf")) + 3
    lines = []
    for line in section[start:].splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    return "\n".join(lines).strip() + "\n"


def _account() -> tuple[str, str]:
    """The daemon processes' user and group: Debian's www-data as root (no
    account is made for the test), else the user running the tests."""
    user = "www-data" if os.geteuid() == 0 else getpass.getuser()
    return user, grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name


def _as(user: str, command: list[str]) -> list[str]:
    return ["runuser", "-u", user, "--", *command] if os.geteuid() == 0 else command


@pytest.fixture(scope="module")
def deployment() -> Iterator[dict]:
    """The wheel installed as README says, in a directory the daemon
    account can read; its configuration and its database, made by
    ``placement-manage db sync`` as that account. (Without Apache,
    mod_wsgi or Debian's python3, tests/conftest.py deselects this module,
    or fails the run under CI: see its ``external`` marker.)"""
    user, group = _account()
    root = tempfile.mkdtemp(prefix="placement-apache-")
    try:
        os.chmod(root, 0o755)
        venv = installed.install(installed.artifacts().wheel, os.path.join(root, "venv"),
                                 python=DEBIAN_PYTHON)
        config_dir, data = os.path.join(root, "etc"), os.path.join(root, "data")
        os.mkdir(config_dir)
        os.mkdir(data)
        shutil.chown(data, user, group)
        with open(os.path.join(config_dir, "placement.conf"), "w") as conf:
            conf.write(f"[placement_database]\nconnection = sqlite:///{data}/placement.sqlite\n"
                       "[api]\nauth_strategy = noauth2\n")
        env = installed.clean_environment(OS_PLACEMENT_CONFIG_DIR=config_dir)
        subprocess.run(_as(user, [os.path.join(venv, "bin", "placement-manage"), "db", "sync"]),
                       env=env, cwd=root, check=True, capture_output=True, timeout=120)
        site_packages = subprocess.run(
            [os.path.join(venv, "bin", "python"), "-c",
             "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True, capture_output=True, text=True).stdout.strip()
        yield {"root": root, "venv": venv, "site_packages": site_packages, "env": env,
               "user": user, "group": group}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _site(deployment: dict, port: int, mount: str, log: str) -> str:
    site = readme_site()
    replacements = [
        ("8778", str(port)),
        ("/opt/placement/venv/lib/python3.11/site-packages", deployment["site_packages"]),
        ("/opt/placement/venv", deployment["venv"]),
        ("user=placement group=placement",
         f"user={deployment['user']} group={deployment['group']}"),
        ("/var/log/apache2/placement-api.log", log),
    ]
    if mount != "/":
        replacements.append(("WSGIScriptAlias / ", f"WSGIScriptAlias {mount} "))
    for old, new in replacements:
        assert old in site, f"README's site no longer has {old!r}"
        site = site.replace(old, new)
    return site


class Apache:
    """Apache serving the site at ``url``; ``log`` is the site's error log
    (placement's own log lines)."""

    def __init__(self, server: ops.Server, url: str, log: str):
        self.server, self.url, self.log = server, url, log

    def site_log(self) -> str:
        with open(self.log) as log:
            return log.read()


# Seconds for the daemon processes to build the application, all at once,
# on a small busy machine.
START_TIMEOUT = 180


def _wait_until_answering(url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            status, _, body = ops.request(url)
            assert status == 200, body
            return
        except OSError:  # refused or timed out (URLError is one too): not yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@contextlib.contextmanager
def apache(deployment: dict, mount: str) -> Iterator[Apache]:
    run = tempfile.mkdtemp(prefix="apache-", dir=deployment["root"])
    os.chmod(run, 0o755)
    port = ops.free_port()
    log = os.path.join(run, "placement-api.log")
    site = os.path.join(run, "placement-api.conf")
    with open(site, "w") as site_file:
        site_file.write(_site(deployment, port, mount, log))
    server_config = os.path.join(run, "apache2.conf")
    with open(server_config, "w") as config:
        config.write(SERVER_CONFIG.format(run=run, modules=MODULES, site=site,
                                          user=deployment["user"], group=deployment["group"]))
    # OS_PLACEMENT_CONFIG_DIR in Apache's environment, as envvars sets it.
    command = [APACHE, "-f", server_config, "-DFOREGROUND"]
    with ops.Server(command, port, env=deployment["env"], cwd=run) as server:
        served = Apache(server, f"http://127.0.0.1:{port}{mount.rstrip('/')}", log)
        _wait_until_answering(served.url + "/")
        yield served
    with open(os.path.join(run, "error.log")) as error_log:
        server_log = error_log.read()
    assert server_log.count("Starting process 'placement-api'") >= PROCESSES, server_log
    for text in (served.site_log(), server_log, server.output()):
        assert "Traceback" not in text, text


# placement's log lines in the site's error log: "<date> <time> <pid> INFO ...".
_SERVING_PID = re.compile(r"^\S+ \S+ (\d+) INFO placement\.middleware ", re.MULTILINE)
ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.20"}


def test_under_the_root(deployment):
    with apache(deployment, "/") as served:
        status, _, body = ops.request(served.url + "/")
        assert status == 200, body
        assert json.loads(body)["versions"][0]["max_version"] == "1.39"
        status, headers, body = ops.request(
            served.url + "/resource_providers", method="POST",
            headers={**ADMIN, "OpenStack-API-Version": "placement 1.19"},
            body={"name": "under-the-root"})
        assert status == 201, body
        assert headers["location"].startswith(served.url + "/resource_providers/")
        status, _, body = ops.request(headers["location"], headers=ADMIN)
        assert json.loads(body)["name"] == "under-the-root"

        client = Openstack(served.url, NEWEST)
        provider = client.json("resource", "provider", "create", f"osc-{uuid.uuid4().hex[:8]}")
        client.run("resource", "provider", "inventory", "set", provider["uuid"],
                   "--resource", "VCPU=4")
        candidates = client.json("allocation", "candidate", "list", "--resource", "VCPU=2")
        assert provider["uuid"] in {row["resource provider"] for row in candidates}
        # Each daemon process serves its share.
        serving = set(_SERVING_PID.findall(served.site_log()))
    assert len(serving) >= 2, served.site_log()


class TestUnderAPrefix(OscStory):
    """The whole osc-placement story through ``/placement``."""

    @pytest.fixture(scope="class")
    @classmethod
    def endpoint(cls, deployment) -> Iterator[str]:
        with apache(deployment, "/placement") as served:
            status, headers, body = ops.request(
                served.url + "/resource_providers", method="POST",
                headers={**ADMIN, "OpenStack-API-Version": "placement 1.19"},
                body={"name": "under-a-prefix"})
            assert status == 201, body
            assert headers["location"].startswith(
                served.url.replace("/placement", "") + "/placement/resource_providers/")
            yield served.url
