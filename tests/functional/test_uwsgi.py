"""The uwsgi recipe of the README (etc/placement/uwsgi.ini): several
processes and threads serving ``placement.wsgi:application``, driven with
real requests, and its health check while the database goes away and
comes back."""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import sys

import pytest

from placement.db import api as db_api
from placement.db import migration
from tests.fixtures import ops

RECIPE = os.path.join(ops.REPO_ROOT, "etc", "placement", "uwsgi.ini")
PROCESSES = 2
UWSGI = shutil.which("uwsgi", path=os.path.dirname(sys.executable)) or shutil.which("uwsgi")


@pytest.fixture(scope="module")
def database_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("uwsgi") / "placement.sqlite")
    engine = db_api.create_engine("sqlite:///" + path)
    migration.upgrade(engine)
    engine.dispose()
    return path


@pytest.fixture(scope="module")
def uwsgi(database_path):
    assert UWSGI, "uwsgi is part of the test extra: pip install -e '.[test]'"
    port = ops.free_port()
    command = [
        UWSGI, "--ini", RECIPE,
        # The recipe as it is, on a free port, with 2 processes of 2 threads
        # (the machine running the tests is small), importing this checkout
        # from this virtual environment.
        "--http-socket", f"127.0.0.1:{port}", "--processes", str(PROCESSES), "--threads", "2",
        "--virtualenv", sys.prefix, "--pythonpath", ops.REPO_ROOT,
    ]
    env = {
        "OS_PLACEMENT_CONFIG_DIR": os.path.dirname(database_path),
        "OS_PLACEMENT_DATABASE__CONNECTION": "sqlite:///" + database_path,
        "OS_API__AUTH_STRATEGY": "noauth2",
        "OS_CORS__ALLOWED_ORIGIN": ops.ALLOWED_ORIGIN,
    }
    with ops.Server(command, port, env=env, cwd=ops.REPO_ROOT) as server:
        # lazy-apps: every worker imports the application itself after the
        # fork; wait for both so that the requests meet them all.
        server.wait_for_output("WSGI app 0 (mountpoint='') ready", count=PROCESSES)
        yield server
    assert "Traceback" not in server.output(), server.output()


def test_several_workers_serve(uwsgi):
    status, _, _ = ops.request(uwsgi.url + "/")
    assert status == 200
    output = uwsgi.output()
    for worker in range(1, PROCESSES + 1):
        assert f"spawned uWSGI worker {worker} (pid: " in output
    assert output.count("cores: 2)") == PROCESSES  # uwsgi's word for threads


def test_concurrent_requests(uwsgi):
    def fetch(number):
        version = f"1.{number % 40}"
        return ops.request(uwsgi.url + "/", headers={
            "OpenStack-API-Version": f"placement {version}"}), version

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(fetch, range(40)))
    for (status, headers, body), version in answers:
        assert status == 200
        assert headers["openstack-api-version"] == f"placement {version}"
        assert json.loads(body)["versions"][0]["id"] == "v1.0"
    request_ids = {headers["x-openstack-request-id"] for (_, headers, _), _ in answers}
    assert len(request_ids) == len(answers)


def test_writes_are_seen_by_every_worker(uwsgi):
    headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.20"}
    status, _, body = ops.request(uwsgi.url + "/resource_providers", method="POST",
                                  headers=headers, body={"name": "served-by-uwsgi"})
    assert status == 200, body
    created = json.loads(body)

    def names(_):
        status, _, body = ops.request(uwsgi.url + "/resource_providers", headers=headers)
        assert status == 200
        return [provider["name"] for provider in json.loads(body)["resource_providers"]]

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        listings = list(pool.map(names, range(12)))
    assert listings == [["served-by-uwsgi"]] * 12
    assert created["name"] == "served-by-uwsgi"


def test_authentication_and_errors(uwsgi):
    status, headers, _ = ops.request(uwsgi.url + "/resource_providers")
    assert status == 401
    assert "openstack-api-version" not in headers
    status, headers, body = ops.request(uwsgi.url + "/barnabas",
                                        headers={"X-Auth-Token": "admin",
                                                 "OpenStack-API-Version": "placement 1.23"})
    assert status == 404
    error = json.loads(body)["errors"][0]
    assert error["code"] == "placement.undefined_code"
    assert error["request_id"] == headers["x-openstack-request-id"]


def test_environment_configures_cors(uwsgi):
    status, headers, _ = ops.request(
        uwsgi.url + "/resource_providers", method="OPTIONS",
        headers={"Origin": ops.ALLOWED_ORIGIN, "Access-Control-Request-Method": "GET"})
    assert status == 200
    assert headers["access-control-allow-origin"] == ops.ALLOWED_ORIGIN


def test_health_check_follows_the_database(uwsgi, database_path):
    assert ops.request(uwsgi.url + "/healthcheck")[0] == 200
    os.rename(database_path, database_path + ".away")
    try:
        status, _, body = ops.request(uwsgi.url + "/healthcheck")
        assert status == 503
        assert json.loads(body)["reasons"] == ["The database cannot be reached."]
    finally:
        os.rename(database_path + ".away", database_path)
    assert ops.request(uwsgi.url + "/healthcheck")[0] == 200
