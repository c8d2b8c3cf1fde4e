"""The real ``placement-api`` server over real HTTP, configured as the
outside test suites configure it (environment variables only: SQLite file,
schema sync on start-up, noauth2).

These check what an in-process test cannot see: the HTTP framing the WSGI
server adds (Content-Length, bodiless 204s, keep-alive after every kind of
response, chunked request bodies, bodies on GET), HEAD and OPTIONS, absolute
Location URLs built from the Host the client used.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import pytest

from tests.fixtures.ops import free_port

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
STARTUP_SECONDS = 60
ADMIN = {"X-Auth-Token": "admin"}


def _wait_until_serving(process: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"placement-api exited with {process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/")
            connection.getresponse().read()
            connection.close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"placement-api did not answer within {STARTUP_SECONDS}s")


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with tempfile.TemporaryDirectory() as workdir:
        port = free_port()
        env = dict(os.environ,
                   OS_PLACEMENT_DATABASE__CONNECTION=f"sqlite:///{workdir}/placement.sqlite",
                   OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP="True",
                   OS_API__AUTH_STRATEGY="noauth2")
        with open(os.path.join(workdir, "server.log"), "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "placement.cmd.api",
                 "--host", "127.0.0.1", "--port", str(port)],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                _wait_until_serving(process, port)
                yield port
            finally:
                process.kill()
                process.wait(timeout=30)


@pytest.fixture
def connection(port: int) -> Iterator[http.client.HTTPConnection]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    yield connection
    connection.close()


def _request(connection: http.client.HTTPConnection, method: str, path: str,
             body: bytes | None = None, **headers: str) -> tuple[http.client.HTTPResponse, bytes]:
    headers = {name.replace("_", "-"): value for name, value in headers.items()}
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    return response, response.read()


def _raw(port: int, request: bytes) -> bytes:
    """Send bytes as they are, read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        raw.sendall(request)
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    return received


def test_root_document(connection):
    response, body = _request(connection, "GET", "/")
    assert response.status == 200
    assert response.getheader("Content-Type") == "application/json"
    assert json.loads(body)["versions"][0]["max_version"] == "1.39"
    assert response.getheader("openstack-api-version") == "placement 1.0"
    assert response.getheader("vary") == "openstack-api-version"
    assert response.getheader("x-openstack-request-id").startswith("req-")
    assert response.getheader("last-modified") is None
    assert response.getheader("cache-control") is None


def test_root_cache_headers_at_1_15(connection):
    response, _ = _request(connection, "GET", "/", OpenStack_API_Version="placement 1.15")
    assert response.getheader("cache-control") == "no-cache"
    assert response.getheader("last-modified").endswith(" GMT")


def test_head_is_405_without_body(connection):
    response, body = _request(connection, "HEAD", "/")
    assert response.status == 405
    assert response.getheader("Allow") == "GET"
    assert body == b""
    # The connection is still usable after the bodiless answer to HEAD.
    response, _ = _request(connection, "HEAD", "/resource_classes", **ADMIN)
    assert response.status == 405
    assert response.getheader("Allow") == "GET, POST"
    response, _ = _request(connection, "GET", "/")
    assert response.status == 200


def test_options_is_405(connection):
    response, body = _request(connection, "OPTIONS", "/resource_classes", **ADMIN)
    assert response.status == 405
    assert response.getheader("Allow") == "GET, POST"
    assert response.getheader("openstack-api-version") == "placement 1.0"
    detail = json.loads(body)["errors"][0]["detail"]
    assert "The method OPTIONS is not allowed for this resource." in detail


def test_no_token_is_a_json_401(connection):
    response, body = _request(connection, "GET", "/resource_classes")
    assert response.status == 401
    assert "X-Auth-Token" in json.loads(body)["errors"][0]["detail"]
    assert response.getheader("x-openstack-request-id").startswith("req-")
    assert response.getheader("openstack-api-version") is None


def test_request_id_is_not_echoed(connection):
    sent = "req-11111111-2222-3333-4444-555555555555"
    response, body = _request(connection, "GET", "/nowhere", X_OpenStack_Request_ID=sent,
                              **ADMIN)
    assert response.status == 404
    returned = response.getheader("x-openstack-request-id")
    assert returned != sent
    assert json.loads(body)["errors"][0]["request_id"] == returned


def test_bad_microversion_has_no_version_header(connection):
    response, body = _request(connection, "GET", "/", OpenStack_API_Version="placement 1.99")
    assert response.status == 406
    assert response.getheader("openstack-api-version") is None
    error = json.loads(body)["errors"][0]
    assert (error["min_version"], error["max_version"]) == ("1.0", "1.39")


def test_bodiless_responses_keep_the_connection_usable(connection, port):
    version = {"OpenStack-API-Version": "placement 1.7", **ADMIN}
    path = "/resource_classes/CUSTOM_LIVE"

    created, body = _request(connection, "PUT", path, **version)
    assert created.status == 201
    assert body == b""
    assert created.getheader("Content-Type") is None
    assert created.getheader("Content-Length") == "0"
    assert created.getheader("Location") == f"http://127.0.0.1:{port}{path}"

    existed, body = _request(connection, "PUT", path, **version)
    assert existed.status == 204
    assert body == b""
    assert existed.getheader("Content-Type") is None
    assert existed.getheader("Location") == f"http://127.0.0.1:{port}{path}"

    deleted, body = _request(connection, "DELETE", path, **version)
    assert deleted.status == 204
    assert body == b""
    assert deleted.getheader("Content-Type") is None
    assert deleted.getheader("Last-Modified") is None

    gone, _ = _request(connection, "GET", path, **version)
    assert gone.status == 404


def test_chunked_request_body(port):
    body = b'{"name": "CUSTOM_CHUNKED"}'
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:7], body[7:]))
    answer = _raw(port, (
        b"POST /resource_classes HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"X-Auth-Token: admin\r\nOpenStack-API-Version: placement 1.2\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: close\r\n\r\n" + chunks + b"0\r\n\r\n"))
    assert answer.startswith(b"HTTP/1.1 201 ")
    assert b"\r\nLocation: http://127.0.0.1/resource_classes/CUSTOM_CHUNKED\r\n" in answer


def test_body_on_get_is_ignored(port):
    answer = _raw(port, (
        b"GET /resource_classes/VCPU HTTP/1.1\r\nHost: h\r\nX-Auth-Token: admin\r\n"
        b"OpenStack-API-Version: placement 1.2\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\n\r\n{}"
        b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"))
    assert answer.count(b"HTTP/1.1 200 OK") == 2
    assert b'"name":"VCPU"' in answer
    assert b'"max_version":"1.39"' in answer


def test_content_length_without_content_type(connection):
    response, body = _request(connection, "POST", "/resource_classes", body=b"{}",
                              OpenStack_API_Version="placement 1.2", **ADMIN)
    assert response.status == 400
    assert "content-type header required when content-length > 0" in body.decode()


def test_bodiless_put_needing_json_is_415(connection):
    response, body = _request(connection, "PUT", "/resource_providers/x/inventories",
                              body=None, **ADMIN)
    assert response.status == 415
    assert "The media type None is not supported, use application/json" in body.decode()


def test_unread_body_of_an_error_does_not_break_keep_alive(connection):
    """415, 401 and 404 answer without reading the body; the next request
    on the same connection must still be understood."""
    version = {"OpenStack-API-Version": "placement 1.2"}
    refused, _ = _request(connection, "POST", "/resource_classes", body=b'{"name": "x"}',
                          Content_Type="text/plain", **version, **ADMIN)
    assert refused.status == 415
    unauthorized, _ = _request(connection, "POST", "/resource_classes", body=b'{"a": 1}',
                               Content_Type="application/json", **version)
    assert unauthorized.status == 401
    missing, _ = _request(connection, "POST", "/nowhere", body=b'{"a": 1}',
                          Content_Type="application/json", **ADMIN)
    assert missing.status == 404
    response, body = _request(connection, "GET", "/")
    assert response.status == 200
    assert json.loads(body)["versions"][0]["id"] == "v1.0"


def test_provider_and_inventory_round_trip(connection, port):
    """201 without body (provider below 1.20), 201 with a JSON body
    (inventory), 200 and 204 on one keep-alive connection."""
    json_headers = {"Content-Type": "application/json", **ADMIN}
    created, body = _request(connection, "POST", "/resource_providers",
                             body=b'{"name": "live", "uuid": "'
                                  b'0b1e7b9e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"}',
                             **json_headers)
    assert created.status == 201
    assert body == b""
    assert created.getheader("Content-Type") is None
    provider = "/resource_providers/0b1e7b9e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
    assert created.getheader("Location") == f"http://127.0.0.1:{port}{provider}"

    added, body = _request(connection, "POST", provider + "/inventories",
                           body=b'{"resource_class": "VCPU", "total": 8}', **json_headers)
    assert added.status == 201
    assert added.getheader("Content-Type") == "application/json"
    assert int(added.getheader("Content-Length")) == len(body)
    assert json.loads(body)["resource_provider_generation"] == 1
    assert added.getheader("Location") == f"http://127.0.0.1:{port}{provider}/inventories/VCPU"

    deleted, body = _request(connection, "DELETE", provider + "/inventories/VCPU", **ADMIN)
    assert deleted.status == 204
    assert body == b""
    assert deleted.getheader("Content-Type") is None

    listed, body = _request(connection, "GET", provider + "/inventories", **ADMIN)
    assert listed.status == 200
    assert json.loads(body) == {"resource_provider_generation": 2, "inventories": {}}


def test_non_integer_content_length_is_the_api_json_400(port):
    answer = _raw(port, (
        b"GET /resource_providers HTTP/1.1\r\nHost: h\r\nX-Auth-Token: admin\r\n"
        b"Content-Length: cow\r\n\r\n"))
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"x-openstack-request-id: req-" in answer
    assert b"content-length header must be an integer" in answer
    assert b"\r\nConnection: close\r\n" in answer


def test_unread_chunked_body_does_not_break_keep_alive(port):
    chunk = b'{"name": "CUSTOM_X"}'
    answer = _raw(port, (
        b"POST /resource_classes HTTP/1.1\r\nHost: h\r\nX-Auth-Token: admin\r\n"
        b"OpenStack-API-Version: placement 1.2\r\nContent-Type: text/plain\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(chunk), chunk)
        + b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"))
    assert answer.startswith(b"HTTP/1.1 415 ")
    assert answer.count(b"HTTP/1.1 200 OK") == 1
    assert b'"max_version":"1.39"' in answer


TOO_LARGE = b"HTTP/1.1 413 Request Entity Too Large\r\n"


def test_a_body_declared_too_large_is_refused_before_it_is_sent(port):
    """200 MB announced, none sent: the 413 comes at once and the server
    closes the connection (the rest of it cannot be told from a request)."""
    started = time.monotonic()
    answer = _raw(port, (
        b"POST /resource_providers HTTP/1.1\r\nHost: h\r\nX-Auth-Token: admin\r\n"
        b"Content-Type: application/json\r\nContent-Length: 200000000\r\n\r\n"))
    assert time.monotonic() - started < 2
    assert answer.startswith(TOO_LARGE)
    error = json.loads(answer.partition(b"\r\n\r\n")[2])["errors"][0]
    assert error["detail"].endswith("The request body is larger than the 1048576 bytes "
                                    "accepted.  ")


def test_a_chunked_body_too_large_is_refused_once_past_the_limit(port):
    # One byte past the limit, and no more: the server reads it all (a
    # socket closed with bytes unread would answer the client with a reset).
    chunk = b"x" * 65536
    chunks = b"%x\r\n%s\r\n" % (len(chunk), chunk) * 16 + b"1\r\nx\r\n"
    answer = _raw(port, (
        b"POST /resource_providers HTTP/1.1\r\nHost: h\r\nX-Auth-Token: admin\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks))
    assert answer.startswith(TOO_LARGE)
    assert answer.count(b"HTTP/1.1") == 1
