"""``placement-api`` exits promptly on SIGTERM, even while idle keep-alive
clients hold connections open (a deployment stopping or restarting it
must not wait for the clients to go away), and within its shutdown timeout
while requests are being served: a request that finishes within it gets
its answer, one that does not (here: waiting on an identity service that
never answers) is left behind."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time

import pytest

from placement.cmd import api
from tests.fixtures import ops
from tests.fixtures.silent_identity import keystone_authtoken, silent_identity_service

pytestmark = pytest.mark.backend("sqlite")


def _keep_alive_request(port: int) -> socket.socket:
    """A connection that sent one HTTP/1.1 request, got its answer, and
    stays open, idle."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    connection.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
                       b"Connection: keep-alive\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = connection.recv(65536)
        assert chunk, "the server closed the connection"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += connection.recv(65536)
    assert b"connection: close" not in head.lower()
    return connection


def _half_request(port: int) -> socket.socket:
    """A connection that sent the start of a request and then nothing."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    connection.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return connection


@pytest.mark.parametrize("half_request", [False, True],
                         ids=["keep-alive", "keep-alive-and-half-request"])
def test_sigterm_with_idle_keep_alive_clients_exits_within_two_seconds(tmp_path, half_request):
    env = {"OS_PLACEMENT_CONFIG_DIR": str(tmp_path),
           "OS_PLACEMENT_DATABASE__CONNECTION": f"sqlite:///{tmp_path}/placement.sqlite",
           "OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP": "True",
           "OS_API__AUTH_STRATEGY": "noauth2"}
    server = ops.api_server(ops.free_port(), env)
    clients = []
    try:
        server.wait_until_serving()
        clients = [_keep_alive_request(server.port) for _ in range(2)]
        if half_request:
            clients.append(_half_request(server.port))
            time.sleep(0.5)  # a worker thread is now waiting for the rest
        sent = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        try:
            returncode = server.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pytest.fail(f"placement-api still running 5 s after SIGTERM:\n{server.output()}")
        elapsed = time.monotonic() - sent
        assert returncode == 0, server.output()
        assert elapsed < 2, f"exited {elapsed:.1f} s after SIGTERM"
        assert "Traceback" not in server.output(), server.output()
    finally:
        for client in clients:
            client.close()
        server.stop()


def _in_flight(server: ops.Server) -> tuple[threading.Thread, dict]:
    """A request with a token, sent from a thread: its status (or the
    error that ended it) lands in the dict."""
    outcome: dict = {}

    def send():
        try:
            outcome["status"] = ops.request(server.url + "/resource_providers",
                                            headers={"X-Auth-Token": "some-token"})[0]
        except OSError as error:
            outcome["error"] = error

    client = threading.Thread(target=send, daemon=True)
    client.start()
    time.sleep(1)  # the request now waits on the identity service
    return client, outcome


def _sigterm(server: ops.Server, timeout: float) -> float:
    """Seconds from SIGTERM to the exit, which must come within ``timeout``."""
    sent = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    try:
        returncode = server.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"placement-api still running {timeout} s after SIGTERM:\n"
                    f"{server.output()}")
    assert returncode == 0, server.output()
    return time.monotonic() - sent


@pytest.mark.parametrize("identity_timeout, answered", [(2, True), (60, False)],
                         ids=["finishing-within-the-grace", "hanging-beyond-it"])
def test_sigterm_with_a_request_in_flight(tmp_path, identity_timeout, answered):
    grace = api.SHUTDOWN_TIMEOUT_SECONDS
    with silent_identity_service() as identity:
        server = ops.keystone_api_server(
            str(tmp_path), keystone_authtoken(identity, http_connect_timeout=identity_timeout,
                                              http_request_max_retries=0))
        try:
            server.wait_until_serving()
            client, outcome = _in_flight(server)
            elapsed = _sigterm(server, timeout=grace + 5)
            client.join(10)
        finally:
            server.stop()
    if answered:
        # the 503 of its identity timeout, then the exit
        assert outcome == {"status": 503}, server.output()
        assert elapsed < grace, f"exited {elapsed:.1f} s after SIGTERM"
    else:
        assert "error" in outcome, outcome
        assert grace - 0.5 < elapsed < grace + 2, f"exited {elapsed:.1f} s after SIGTERM"
        assert "exiting without them" in server.output()
