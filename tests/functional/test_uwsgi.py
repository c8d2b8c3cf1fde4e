"""The uwsgi recipe (placement/samples/uwsgi.ini, ``placement-manage sample
uwsgi``): several
processes and threads serving ``placement.wsgi:application``, driven with
real requests, and its health check while the database goes away and
comes back. Then two workers on a fresh database, each building its own
application (lazy-apps) or forked from the master that built it, writing
concurrently."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import signal
import sys
import time
import uuid

import pytest

from placement.db import api as db_api
from placement.db import migration
from tests import db as test_db
from tests.fixtures import ops, silent_identity

pytestmark = pytest.mark.slow

PROCESSES = 2


@pytest.fixture(scope="module")
def database_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("uwsgi") / "placement.sqlite")
    engine = db_api.create_engine("sqlite:///" + path)
    migration.upgrade(engine)
    engine.dispose()
    return path


@pytest.fixture(scope="module")
def uwsgi(database_path):
    assert ops.UWSGI, "uwsgi is part of the test extra: pip install -e '.[test]'"
    port = ops.free_port()
    workers_socket = os.path.join(os.path.dirname(database_path), "uwsgi.sock")
    command = [
        ops.UWSGI, "--ini", ops.UWSGI_RECIPE,
        # The recipe as it is, serving HTTP as the deployment guide says
        # (the router reaching the workers over a Unix socket), on a free
        # port, with 2 processes of 2 threads (the machine running the
        # tests is small), importing this checkout from this virtual
        # environment.
        "--http", f"127.0.0.1:{port}", "--socket", workers_socket, "--http-to", workers_socket,
        "--processes", str(PROCESSES), "--threads", "2",
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
    # the router's only way to the workers is the recipe's Unix socket
    assert output.count("bound to UNIX address") == 1, output
    assert "bound to TCP address" not in output, output
    for worker in range(1, PROCESSES + 1):
        assert f"spawned uWSGI worker {worker} (pid: " in output
    assert output.count("cores: 2)") == PROCESSES  # uwsgi's word for threads


def test_each_request_is_logged_once_with_the_recipes_backlog(uwsgi):
    """placement's request line alone (uwsgi's own is off), and a listen
    queue past uwsgi's default of 100."""
    path = f"/resource_providers/{uuid.uuid4()}"
    status, _, _ = ops.request(uwsgi.url + path, headers={"X-Auth-Token": "admin"})
    assert status == 404
    uwsgi.wait_for_output(path)  # logged once the answer is out
    output = uwsgi.output()
    assert output.count(path) == 1, output
    # uwsgi's request lines, of this request or the earlier tests' ones
    assert "=> generated" not in output, output
    assert "listen backlog is limited to 1024 connections" in output, output


def test_sigterm_lets_the_requests_in_flight_finish(tmp_path):
    """The recipe's SIGTERM: a request hung on the identity service gets its
    answer (the 503 of the identity timeout) before uwsgi exits."""
    with silent_identity.silent_identity_service() as identity:
        (tmp_path / "placement.conf").write_text(f"""
[api]
auth_strategy = keystone
[placement_database]
connection = sqlite:///{tmp_path}/placement.sqlite
sync_on_startup = True
{silent_identity.keystone_authtoken(identity, http_connect_timeout=2,
                                    http_request_max_retries=0)}""")
        port = ops.free_port()
        command = [ops.UWSGI, "--ini", ops.UWSGI_RECIPE, "--http", f"127.0.0.1:{port}",
                   "--processes", "1", "--threads", "2",
                   "--virtualenv", sys.prefix, "--pythonpath", ops.REPO_ROOT]
        with ops.Server(command, port, env={"OS_PLACEMENT_CONFIG_DIR": str(tmp_path)},
                        cwd=str(tmp_path)) as server:
            server.wait_for_output("WSGI app 0 (mountpoint='') ready")
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                answer = pool.submit(ops.request, server.url + "/resource_providers",
                                     headers={"X-Auth-Token": "a-token"})
                time.sleep(1)  # the request waits on the identity service
                server.process.send_signal(signal.SIGTERM)
                status, _, _ = answer.result(timeout=30)
            assert server.process.wait(timeout=30) == 0
    assert status == 503, server.output()
    assert "graceful shutdown triggered" in server.output()


def _get_on(connection: http.client.HTTPConnection, path: str) -> None:
    connection.request("GET", path, headers={"Accept": "application/json",
                                             "X-Auth-Token": "admin"})
    response = connection.getresponse()
    response.read()
    assert response.status == 200, path
    assert not response.will_close, path


def test_a_client_keeps_its_connection(uwsgi):
    """--http with http-keepalive: a keep-alive client (keystoneauth's
    sessions) sends request after request on one connection."""
    connection = http.client.HTTPConnection("127.0.0.1", uwsgi.port, timeout=30)
    try:
        for path in ("/", "/resource_providers", "/", "/resource_providers?name=x"):
            _get_on(connection, path)
        first_socket = connection.sock
        _get_on(connection, "/")
        assert connection.sock is first_socket
    finally:
        connection.close()


def test_more_open_connections_than_workers_are_all_served(uwsgi):
    """Every compute keeps a connection open: a worker must not belong to
    one connection while it is idle (as with --http11-socket, where the
    third of two workers' clients waits until another one closes)."""
    connections = [http.client.HTTPConnection("127.0.0.1", uwsgi.port, timeout=10)
                   for _ in range(4 * PROCESSES * 2)]
    try:
        for _ in range(3):
            for connection in connections:
                _get_on(connection, "/")
    finally:
        for connection in connections:
            connection.close()


def test_every_request_is_logged_once_answered(uwsgi):
    """The request line is written after the worker let the router go
    (middleware.HangUpBeforeClose): once per request, status included."""
    path = f"/resource_providers/{uuid.uuid4()}"
    for _ in range(3):
        status, _, _ = ops.request(uwsgi.url + path, headers={"X-Auth-Token": "admin"})
        assert status == 404
    line = f"GET {path} status: 404 time: "
    uwsgi.wait_for_output(line, count=3)
    assert uwsgi.output().count(line) == 3, uwsgi.output()


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


ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}
CLAIMS = 48
VCPU_TOTAL = 1000


@pytest.fixture(params=["lazy-apps", "forked"])
def fresh_uwsgi(request, backend, tmp_path):
    """Two single-threaded workers on a database without schema, migrated at
    start-up: by each worker (lazy-apps, the two migrations race) or by the
    master before it forks them."""
    assert ops.UWSGI, "uwsgi is part of the test extra: pip install -e '.[test]'"
    port = ops.free_port()
    command = [
        ops.UWSGI, "--http-socket", f"127.0.0.1:{port}", "--master", "--processes", "2",
        "--module", "placement.wsgi:application", "--die-on-term",
        "--virtualenv", sys.prefix, "--pythonpath", ops.REPO_ROOT,
    ]
    if request.param == "lazy-apps":
        command.append("--lazy-apps")
    env = {
        "OS_PLACEMENT_CONFIG_DIR": str(tmp_path),
        "OS_PLACEMENT_DATABASE__CONNECTION": test_db.empty_database_url(backend),
        "OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP": "True",
        "OS_API__AUTH_STRATEGY": "noauth2",
    }
    with ops.Server(command, port, env=env, cwd=ops.REPO_ROOT) as server:
        server.wait_for_output("WSGI app 0 (mountpoint='') ready",
                               count=2 if request.param == "lazy-apps" else 1)
        server.wait_for_output("spawned uWSGI worker 2")
        yield server
    output = server.output()
    for failure in ("Traceback", "database is locked", "Internal Server Error"):
        assert failure not in output, output


def _claim_one_vcpu(url: str, provider_uuid: str) -> int:
    consumer = str(uuid.uuid4())
    status, _, body = ops.request(f"{url}/allocations/{consumer}", method="PUT", headers=ADMIN,
                                  body={"allocations": {provider_uuid: {"resources": {"VCPU": 1}}},
                                        "project_id": "project", "user_id": "user",
                                        "consumer_generation": None, "consumer_type": "INSTANCE"})
    assert status == 204, body
    status, _, body = ops.request(f"{url}/resource_providers/{provider_uuid}/usages",
                                  headers=ADMIN)
    assert status == 200, body
    return json.loads(body)["usages"]["VCPU"]


def test_two_workers_write_to_a_fresh_database(fresh_uwsgi):
    url = fresh_uwsgi.url
    provider_uuid = str(uuid.uuid4())
    status, _, body = ops.request(url + "/resource_providers", method="POST", headers=ADMIN,
                                  body={"name": "shared-by-two-workers", "uuid": provider_uuid})
    assert status == 200, body
    status, _, body = ops.request(
        f"{url}/resource_providers/{provider_uuid}/inventories", method="PUT", headers=ADMIN,
        body={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": VCPU_TOTAL}}})
    assert status == 200, body

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        usages_seen = list(pool.map(lambda _: _claim_one_vcpu(url, provider_uuid),
                                    range(CLAIMS)))
    # Every claim saw its own write at least, and none saw more than all.
    assert all(1 <= used <= CLAIMS for used in usages_seen)
    status, _, body = ops.request(f"{url}/resource_providers/{provider_uuid}/usages",
                                  headers=ADMIN)
    assert json.loads(body)["usages"] == {"VCPU": CLAIMS}
    status, _, body = ops.request(f"{url}/resource_providers/{provider_uuid}/allocations",
                                  headers=ADMIN)
    assert len(json.loads(body)["allocations"]) == CLAIMS
    # Both workers took part.
    serving = ops.uwsgi_serving_pids(fresh_uwsgi.output())
    assert len(serving) == 2, fresh_uwsgi.output()
