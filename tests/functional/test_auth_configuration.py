"""What the service does with the authentication it is configured with:
``placement-api`` refuses to start when it cannot validate tokens, an
application built for a WSGI host (uwsgi, mod_wsgi) answers 503 and fails
its health check instead, and noauth2 beyond loopback is warned about at
every start."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import webob

from placement import conf as placement_conf
from placement import deploy
from tests.db import FreshDatabase
from tests.fixtures import ops

pytestmark = pytest.mark.backend("sqlite")

NOAUTH2_BEYOND_LOOPBACK = "ANYONE WHO CAN REACH IT IS TRUSTED"
MISSING = "the [keystone_authtoken] section is not usable (it sets no auth_type)"


def _clean_env(tmp_path) -> dict:
    """No configuration at all: an empty configuration directory, a state
    directory of its own, no OS_* variable of the caller."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("OS_")}
    return {**env, "OS_PLACEMENT_CONFIG_DIR": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)}


def _start(tmp_path, host: str, config: str = "") -> subprocess.CompletedProcess:
    """placement-api run until it exits by itself (at most a minute); its
    log (standard output) and standard error in ``stdout``."""
    command = [sys.executable, "-m", "placement.cmd.api", "--host", host,
               "--port", str(ops.free_port())]
    if config:
        (tmp_path / "placement.conf").write_text(config)
    return subprocess.run(command, env=_clean_env(tmp_path), cwd=ops.REPO_ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=60)


@pytest.mark.parametrize("config, names", [
    ("", "it sets no auth_type"),
    ("[keystone_authtoken]\nauth_type = password\nusername = placement\n",
     "Auth plugin requires parameters which were not given: auth_url"),
    ("[keystone_authtoken]\nauth_type = no-such-plugin\n", "no-such-plugin"),
], ids=["no-section", "no-auth-url", "unknown-plugin"])
def test_placement_api_beyond_loopback_without_keystone_does_not_start(tmp_path, config,
                                                                        names):
    finished = _start(tmp_path, "0.0.0.0", config)
    assert finished.returncode == 1, finished.stdout
    assert ("placement-api does not start: [api] auth_strategy is keystone but the "
            "[keystone_authtoken] section is not usable") in finished.stdout
    assert names in finished.stdout
    assert "Traceback" not in finished.stdout
    # refused before the database is touched
    assert not (tmp_path / "placement").exists()


def _serving(tmp_path, host: str, env: dict) -> ops.Server:
    command = [sys.executable, "-m", "placement.cmd.api", "--host", host, "--port"]
    port = ops.free_port()
    return ops.Server([*command, str(port)], port, env={**_clean_env(tmp_path), **env},
                      cwd=ops.REPO_ROOT)


@pytest.mark.parametrize("host, explicit, warned", [
    ("0.0.0.0", True, True),
    ("127.0.0.1", True, False),
    ("127.0.0.1", False, False),
], ids=["explicit-beyond-loopback", "explicit-on-loopback", "implicit-on-loopback"])
def test_noauth2_beyond_loopback_is_warned_about(tmp_path, host, explicit, warned):
    env = {"OS_API__AUTH_STRATEGY": "noauth2"} if explicit else {}
    with _serving(tmp_path, host, env) as server:
        status, _, _ = ops.request(server.url + "/resource_providers",
                                   headers={"X-Auth-Token": "admin"})
        assert status == 200
    assert (NOAUTH2_BEYOND_LOOPBACK in server.output()) is warned, server.output()
    # a local service with nothing configured still says how it runs
    assert ("running with noauth2" in server.output()) is (not explicit)


@pytest.fixture
def database():
    database = FreshDatabase()
    yield database
    database.close()


def test_under_a_wsgi_host_a_service_that_cannot_authenticate_answers_503(database,
                                                                          caplog):
    """placement.wsgi builds the application from the configuration as is:
    here the default strategy (keystone) and no [keystone_authtoken]."""
    conf = placement_conf.build_conf(config_files=[])
    application = deploy.build_app(conf, db=database.db)
    assert caplog.text.count("the [keystone_authtoken] section is not usable") == 1

    response = webob.Request.blank("/resource_providers", headers={
        "X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.23"}).get_response(
        application)
    assert response.status_int == 503
    assert response.content_type == "application/json"
    error = json.loads(response.body)["errors"][0]
    assert error["status"] == 503
    assert "the [keystone_authtoken] section is not usable" in error["detail"]
    assert error["request_id"] == response.headers["x-openstack-request-id"]

    probe = webob.Request.blank("/healthcheck").get_response(application)
    assert probe.status_int == 503
    reason = json.loads(probe.body)["reasons"][0]
    assert "the [keystone_authtoken] section is not usable" in reason
    # the version document needs no authentication
    assert webob.Request.blank("/").get_response(application).status_int == 200


def test_identity_timeouts_have_placement_defaults_unless_configured(tmp_path):
    config = tmp_path / "placement.conf"
    config.write_text("[keystone_authtoken]\nhttp_connect_timeout = 20\n")
    configured = placement_conf.build_conf(config_files=[str(config)])
    defaulted = placement_conf.build_conf(config_files=[])
    for conf in (configured, defaulted):
        deploy.authentication_problem(conf)
    assert configured.keystone_authtoken.http_connect_timeout == 20
    assert (defaulted.keystone_authtoken.http_connect_timeout
            == placement_conf.IDENTITY_TIMEOUT_SECONDS)
    assert configured.keystone_authtoken.http_request_max_retries == placement_conf.IDENTITY_RETRIES


@pytest.mark.skipif(not ops.UWSGI, reason="uwsgi is part of the test extra")
def test_under_uwsgi_without_keystone_every_request_needing_a_token_is_a_503(tmp_path):
    """The recipe as deployed, but no [keystone_authtoken]: uwsgi starts,
    and the service says what is missing instead of failing each request."""
    port = ops.free_port()
    command = [ops.UWSGI, "--ini", ops.UWSGI_RECIPE, "--http", f"127.0.0.1:{port}",
               "--processes", "1", "--threads", "1",
               "--virtualenv", sys.prefix, "--pythonpath", ops.REPO_ROOT]
    env = {**_clean_env(tmp_path), "OS_PLACEMENT_DATABASE__CONNECTION":
           f"sqlite:///{tmp_path}/placement.sqlite",
           "OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP": "True"}
    with ops.Server(command, port, env=env, cwd=ops.REPO_ROOT) as server:
        server.wait_for_output("WSGI app 0 (mountpoint='') ready")
        status, headers, body = ops.request(server.url + "/resource_providers",
                                            headers={"X-Auth-Token": "admin"})
        health, _, reasons = ops.request(server.url + "/healthcheck")
    assert status == 503
    assert headers["content-type"] == "application/json"
    assert MISSING in json.loads(body)["errors"][0]["detail"]
    assert health == 503
    assert MISSING in json.loads(reasons)["reasons"][0]
    assert server.output().count(MISSING) == 1  # logged once, at start
