"""A small keep-alive HTTP/1.1 client: one connection per thread, JSON in
and out.

It speaks just the HTTP the benchmark needs on a plain socket, without
``http.client``: that one parses every answer's headers with the email
package, about 0.2 ms of the load generator's CPU per request, which at
c=1 was a fifth of a small request's round trip and at higher
concurrencies took cores from the server measured on the same machine.

Requests are timed from the moment they are sent until the whole body has
been read, which is what a scheduler waits for.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

API_VERSION = "1.39"
_RECEIVE_SIZE = 65536
# Answers that have no body whatever their headers say (RFC 9112 6.3).
_NO_BODY_STATUSES = frozenset({204, 304})


class StaleConnection(ConnectionError):
    """The kept-alive connection was closed before the answer began; the
    request is sent again once on a new connection (and counted)."""


class ProtocolError(ConnectionError):
    """The server's answer is not HTTP/1.x as this client reads it."""


@dataclass
class Response:
    status: int
    body: bytes
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body)


class _Connection:
    """One socket and the bytes received on it but not yet read."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.socket = socket.create_connection((host, port), timeout=timeout)
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The timeout in the kernel rather than Python's (a poll before
        # every send and receive): a blocking socket that fails with EAGAIN
        # once ``timeout`` passes without progress.
        self.socket.settimeout(None)
        limit = struct.pack("ll", int(timeout), int(timeout % 1 * 1e6))
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
        self.buffer = b""

    def receive(self) -> bool:
        """Append what arrives to the buffer; False once the peer closed."""
        data = self.socket.recv(_RECEIVE_SIZE)
        self.buffer += data
        return bool(data)

    def take_until(self, marker: bytes) -> bytes:
        """The buffer up to ``marker`` (excluded, consumed with it)."""
        while (end := self.buffer.find(marker)) < 0:
            if not self.receive():
                raise ProtocolError("connection closed inside an answer")
        taken, self.buffer = self.buffer[:end], self.buffer[end + len(marker):]
        return taken

    def take(self, size: int) -> bytes:
        if len(self.buffer) < size:
            # joined once: a candidates answer can be megabytes
            parts, have = [self.buffer], len(self.buffer)
            while have < size:
                data = self.socket.recv(max(size - have, _RECEIVE_SIZE))
                if not data:
                    raise ProtocolError("connection closed inside an answer's body")
                parts.append(data)
                have += len(data)
            self.buffer = b"".join(parts)
        taken, self.buffer = self.buffer[:size], self.buffer[size:]
        return taken

    def take_all(self) -> bytes:
        """Everything until the peer closes (a body without a length)."""
        while self.receive():
            pass
        taken, self.buffer = self.buffer, b""
        return taken

    def close(self) -> None:
        self.socket.close()


def _chunked_body(connection: _Connection) -> bytes:
    chunks = []
    while size := int(connection.take_until(b"\r\n").split(b";", 1)[0], 16):
        chunks.append(connection.take(size))
        connection.take(2)  # the chunk's CRLF
    while connection.take_until(b"\r\n"):  # trailer fields, up to an empty line
        pass
    return b"".join(chunks)


class Client:
    """One keep-alive connection to the service (not thread-safe: one per thread)."""

    def __init__(self, host: str, port: int, api_version: str = API_VERSION,
                 timeout: float = 300.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.reconnects = 0
        self._connection: _Connection | None = None
        self._host_header = f"Host: {host}:{port}\r\n"
        self._api_version = api_version

    def request(self, method: str, path: str, body: Any = None,
                api_version: str | None = None) -> Response:
        """``api_version``: this request's microversion instead of the client's."""
        head = (f"{method} {path} HTTP/1.1\r\n{self._host_header}"
                "X-Auth-Token: admin\r\nAccept: application/json\r\n"
                f"OpenStack-API-Version: placement {api_version or self._api_version}\r\n")
        payload = b""
        if body is not None:
            payload = json.dumps(body).encode()
            head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        elif method in ("PUT", "POST", "PATCH"):
            head += "Content-Length: 0\r\n"
        message = (head + "\r\n").encode() + payload
        reused = self._connection is not None
        try:
            return self._send(method, message)
        except (StaleConnection, BrokenPipeError, ConnectionResetError):
            self.close()
            if not reused:
                raise
            self.reconnects += 1
            return self._send(method, message)

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def put(self, path: str, body: Any) -> Response:
        return self.request("PUT", path, body)

    def post(self, path: str, body: Any) -> Response:
        return self.request("POST", path, body)

    def delete(self, path: str) -> Response:
        return self.request("DELETE", path)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _send(self, method: str, message: bytes) -> Response:
        if self._connection is None:
            self._connection = _Connection(self.host, self.port, self.timeout)
        connection = self._connection
        started = time.perf_counter()
        connection.socket.sendall(message)
        if not connection.buffer and not connection.receive():
            raise StaleConnection("connection closed before the answer")
        status_line, *header_lines = connection.take_until(b"\r\n\r\n").split(b"\r\n")
        try:
            version, status_text = status_line.split(b" ", 2)[:2]
            status = int(status_text)
        except ValueError:
            raise ProtocolError(f"not an HTTP status line: {status_line[:80]!r}") from None
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip().lower()
        closing = (headers.get(b"connection") == b"close"
                   or (version == b"HTTP/1.0" and headers.get(b"connection") != b"keep-alive"))
        if method == "HEAD" or status in _NO_BODY_STATUSES or status < 200:
            data = b""
        elif headers.get(b"transfer-encoding", b"").endswith(b"chunked"):
            data = _chunked_body(connection)
        elif b"content-length" in headers:
            data = connection.take(int(headers[b"content-length"]))
        else:
            data, closing = connection.take_all(), True
        elapsed = time.perf_counter() - started
        if closing:
            self.close()
        return Response(status, data, elapsed)


class UnexpectedResponse(Exception):
    """A seeding or verification request answered something it should not."""

    def __init__(self, method: str, path: str, response: Response) -> None:
        super().__init__(f"{method} {path} -> {response.status}: "
                         f"{response.body[:300].decode(errors='replace')}")


def expect(client: Client, method: str, path: str, body: Any = None,
           status: int = 200) -> Response:
    """Send a request that must succeed with ``status``."""
    response = client.request(method, path, body)
    if response.status != status:
        raise UnexpectedResponse(method, path, response)
    return response
