"""A small keep-alive HTTP client: one connection per thread, JSON in and out.

Requests are timed from the moment they are sent until the whole body has
been read, which is what a scheduler waits for.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any

API_VERSION = "1.39"
# Failures that mean "the kept-alive connection was closed under us"; the
# request is sent again once on a new connection (and counted).
_STALE_CONNECTION = (http.client.RemoteDisconnected, BrokenPipeError,
                     ConnectionResetError, http.client.CannotSendRequest)


@dataclass
class Response:
    status: int
    body: bytes
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """One keep-alive connection to the service (not thread-safe: one per thread)."""

    def __init__(self, host: str, port: int, api_version: str = API_VERSION,
                 timeout: float = 300.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.reconnects = 0
        self._connection: http.client.HTTPConnection | None = None
        self._headers = {
            "X-Auth-Token": "admin",
            "OpenStack-API-Version": f"placement {api_version}",
            "Accept": "application/json",
        }

    def request(self, method: str, path: str, body: Any = None,
                api_version: str | None = None) -> Response:
        """``api_version``: this request's microversion instead of the client's."""
        headers = dict(self._headers)
        if api_version is not None:
            headers["OpenStack-API-Version"] = f"placement {api_version}"
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        reused = self._connection is not None
        try:
            return self._send(method, path, payload, headers)
        except _STALE_CONNECTION:
            self.close()
            if not reused:
                raise
            self.reconnects += 1
            return self._send(method, path, payload, headers)

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

    def _send(self, method: str, path: str, payload: bytes | None,
              headers: dict[str, str]) -> Response:
        if self._connection is None:
            self._connection = http.client.HTTPConnection(self.host, self.port,
                                                          timeout=self.timeout)
        started = time.perf_counter()
        self._connection.request(method, path, body=payload, headers=headers)
        response = self._connection.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - started
        if response.will_close:
            self.close()
        return Response(response.status, data, elapsed)


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
