"""The benchmark's HTTP client against a scripted server: every way an
answer can be framed, and a kept-alive connection the server closed."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from placement.bench import client as bench_client


class ScriptedServer:
    """Accepts connections and answers each request with the next of
    ``answers`` (raw bytes; ``None``: close the connection instead of
    answering). Keeps every request it received."""

    def __init__(self, answers: list[bytes | None]) -> None:
        self.answers = list(answers)
        self.requests: list[bytes] = []
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers:
            connection, _ = self.listener.accept()
            self.connections += 1
            with connection:
                self._converse(connection)

    def _converse(self, connection: socket.socket) -> None:
        received = b""
        while self.answers:
            while b"\r\n\r\n" not in received:
                data = connection.recv(65536)
                if not data:
                    return
                received += data
            head, _, received = received.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(received) < length:
                received += connection.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + received[:length])
            received = received[length:]
            answer = self.answers.pop(0)
            if answer is None:
                return
            connection.sendall(answer)
            if b"Connection: close" in answer.split(b"\r\n\r\n")[0]:
                return


@pytest.fixture
def serve() -> Iterator:
    servers = []

    def start(*answers: bytes | None) -> tuple[ScriptedServer, bench_client.Client]:
        server = ScriptedServer(list(answers))
        servers.append(server)
        return server, bench_client.Client("127.0.0.1", server.port, timeout=10)

    yield start
    for server in servers:
        server.listener.close()


def _answer(status: str, body: bytes, *headers: str) -> bytes:
    head = "".join(f"{header}\r\n" for header in headers)
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body


def test_answers_with_a_length_share_one_connection(serve):
    large = json.dumps({"items": ["x" * 100] * 20000}).encode()  # beyond one receive
    server, client = serve(
        _answer("200 OK", b'{"a": 1}', "Content-Length: 8"),
        _answer("200 OK", large, f"Content-Length: {len(large)}"),
        _answer("204 No Content", b"", "Content-Length: 0"))
    first = client.get("/first")
    assert (first.status, first.json()) == (200, {"a": 1})
    assert first.seconds > 0
    assert client.get("/second").body == large
    assert client.delete("/third").status == 204
    assert server.connections == 1
    assert [request.split(b"\r\n")[0] for request in server.requests] == [
        b"GET /first HTTP/1.1", b"GET /second HTTP/1.1", b"DELETE /third HTTP/1.1"]


def test_a_body_is_sent_as_json_with_its_length_and_microversion(serve):
    server, client = serve(_answer("200 OK", b"{}", "Content-Length: 2"),
                           _answer("200 OK", b"{}", "Content-Length: 2"))
    client.put("/allocations/x", {"allocations": {}})
    client.request("GET", "/usages", api_version="1.9")
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    assert json.loads(body) == {"allocations": {}}
    assert f"Content-Length: {len(body)}".encode() in head.split(b"\r\n")
    assert b"Content-Type: application/json" in head.split(b"\r\n")
    assert b"OpenStack-API-Version: placement 1.39" in head.split(b"\r\n")
    assert b"OpenStack-API-Version: placement 1.9" in server.requests[1].split(b"\r\n")


def test_a_chunked_answer_is_joined(serve):
    chunked = b"4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\nTrailer: x\r\n\r\n"
    server, client = serve(_answer("200 OK", chunked, "Transfer-Encoding: chunked"),
                           _answer("200 OK", b"next", "Content-Length: 4"))
    assert client.get("/chunked").body == b"abcdefg"
    assert client.get("/next").body == b"next"  # the trailer was consumed
    assert server.connections == 1


def test_an_answer_closing_the_connection_is_read_and_the_next_reconnects(serve):
    server, client = serve(
        _answer("200 OK", b"closing", "Content-Length: 7", "Connection: close"),
        _answer("200 OK", b"until the end", "Connection: close"),
        _answer("200 OK", b"x", "Content-Length: 1"))
    assert client.get("/one").body == b"closing"
    assert client.get("/two").body == b"until the end"  # no length: read to the close
    assert client.get("/three").body == b"x"
    assert server.connections == 3
    assert client.reconnects == 0  # closed by the answers, not found stale


def test_a_kept_alive_connection_closed_by_the_server_is_retried_once(serve):
    server, client = serve(_answer("200 OK", b"1", "Content-Length: 1"),
                           None,
                           _answer("200 OK", b"2", "Content-Length: 1"))
    assert client.get("/one").body == b"1"
    assert client.get("/two").body == b"2"
    assert client.reconnects == 1
    assert server.connections == 2
    assert [request.split(b"\r\n")[0] for request in server.requests] == [
        b"GET /one HTTP/1.1", b"GET /two HTTP/1.1", b"GET /two HTTP/1.1"]


def test_a_new_connection_closed_at_once_is_an_error(serve):
    server, client = serve(None)
    with pytest.raises(bench_client.StaleConnection):
        client.get("/one")
    assert client.reconnects == 0


def test_an_answer_cut_short_is_an_error(serve):
    server, client = serve(_answer("200 OK", b"short", "Content-Length: 50", "Connection: close"))
    with pytest.raises(bench_client.ProtocolError):
        client.get("/one")


def test_a_non_http_answer_is_an_error(serve):
    server, client = serve(b"SSH-2.0-OpenSSH\r\n\r\n")
    with pytest.raises(bench_client.ProtocolError):
        client.get("/one")
