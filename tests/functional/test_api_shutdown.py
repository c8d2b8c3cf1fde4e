"""``placement-api`` exits promptly on SIGTERM, even while idle keep-alive
clients hold connections open (a deployment stopping or restarting it
must not wait for the clients to go away)."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

import pytest

from tests.fixtures import ops

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
