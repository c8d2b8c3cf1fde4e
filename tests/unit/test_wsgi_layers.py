"""The plain WSGI layers of placement.middleware, each around an
application that records what it received."""

from __future__ import annotations

import io
import socket

import pytest
import webob

from placement import middleware

GLOBAL_ID = "req-12345678-1234-1234-1234-123456789abc"


def recording_app(seen: dict, headers: list | None = None):
    def application(environ, start_response):
        seen.update(environ)
        start_response("200 OK", [("Content-Type", "text/plain"), *(headers or [])])
        return [b"ok"]

    return application


def test_request_id_is_made_returned_and_a_valid_global_one_kept():
    seen: dict = {}
    response = webob.Request.blank("/", headers={"X-OpenStack-Request-ID": GLOBAL_ID}
                                   ).get_response(middleware.RequestId(recording_app(seen)))
    assert response.headers["x-openstack-request-id"] == seen["openstack.request_id"]
    assert seen["openstack.request_id"].startswith("req-")
    assert seen["openstack.request_id"] != GLOBAL_ID
    assert seen["openstack.global_request_id"] == GLOBAL_ID
    assert seen["HTTP_ACCEPT"] == "application/json"
    assert response.body == b"ok"


def test_malformed_global_request_id_is_dropped():
    seen: dict = {}
    webob.Request.blank("/", headers={"X-OpenStack-Request-ID": "req-mine"}).get_response(
        middleware.RequestId(recording_app(seen)))
    assert "openstack.global_request_id" not in seen


def test_request_id_header_of_the_application_is_kept():
    seen: dict = {}
    application = recording_app(seen, [("X-OpenStack-Request-Id", "req-inner")])
    response = webob.Request.blank("/").get_response(middleware.RequestId(application))
    assert response.headers.getall("x-openstack-request-id") == ["req-inner"]


def test_by_path_sends_only_its_paths_elsewhere():
    default: dict = {}
    special: dict = {}
    application = middleware.ByPath(recording_app(default),
                                    {"/healthcheck": recording_app(special)})
    webob.Request.blank("/healthcheck").get_response(application)
    assert special and not default
    special.clear()
    webob.Request.blank("/healthcheck/more").get_response(application)
    assert default and not special


def test_noauth_sets_the_identity_headers():
    seen: dict = {}
    webob.Request.blank("/resource_providers", headers={"X-Auth-Token": "alice:p1"}
                        ).get_response(middleware.NoAuth(recording_app(seen)))
    assert (seen["HTTP_X_USER_ID"], seen["HTTP_X_PROJECT_ID"], seen["HTTP_X_ROLES"]) == (
        "alice", "p1", "")


def _send_buffer(connection: socket.socket) -> int:
    return connection.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


def test_a_large_answer_gets_a_send_buffer_as_large_and_a_small_one_none():
    """AnswerInOnePiece on a real socket pair standing in for uwsgi's
    connection to its router."""
    worker_end, router_end = socket.socketpair()
    with worker_end, router_end:
        default = _send_buffer(worker_end)
        layer = middleware.AnswerInOnePiece(
            recording_app({}, [("Content-Length", "1000")]), worker_end.fileno)
        webob.Request.blank("/").get_response(layer)
        assert _send_buffer(worker_end) == default
        large = 3 * middleware.ROUTER_PIECE_BYTES
        assert default < large
        layer = middleware.AnswerInOnePiece(
            recording_app({}, [("Content-Length", str(large))]), worker_end.fileno)
        response = webob.Request.blank("/").get_response(layer)
        assert response.body == b"ok"
        # Linux doubles what it is given, up to net.core.wmem_max
        assert _send_buffer(worker_end) > default
        worker_end.send(b"still open")  # the layer left the socket to its owner
        assert router_end.recv(100) == b"still open"


class _Answer(list):
    """An application's answer that records its close."""

    def __init__(self, events: list[str]):
        super().__init__([b"ok"])
        self.events = events

    def close(self) -> None:
        self.events.append("answer closed")


def _served(layer, events: list[str]) -> bytes:
    """``layer`` driven as a WSGI server drives it: the body read, then
    ``close``."""
    environ = webob.Request.blank("/resource_providers").environ
    answer = layer(environ, lambda status, headers, exc_info=None: events.append(status))
    body = b"".join(answer)
    events.append("body sent")
    answer.close()
    return body


def test_the_request_line_is_logged_once_the_server_closes_the_answer(caplog):
    events: list[str] = []

    def application(environ, start_response):
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return _Answer(events)

    with caplog.at_level("INFO", logger="placement.middleware"):
        body = _served(middleware.RequestId(application), events)
        logged = [record.getMessage() for record in caplog.records]
    assert body == b"ok"
    assert events == ["404 Not Found", "body sent", "answer closed"]
    assert len(logged) == 1
    assert logged[0].startswith("GET /resource_providers status: 404 time: 0.")


def test_under_uwsgi_the_router_is_let_go_before_the_answer_is_closed():
    events: list[str] = []

    def application(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return _Answer(events)

    layer = middleware.HangUpBeforeClose(application, lambda: events.append("disconnected"))
    assert _served(layer, events) == b"ok"
    assert events == ["200 OK", "body sent", "disconnected", "answer closed"]


def _json_error(response: webob.Response, status: int) -> dict:
    assert response.status_int == status
    assert response.content_type == "application/json"
    error = response.json["errors"][0]
    assert (error["status"], error["title"]) == (status, response.status.split(" ", 1)[1])
    return error


class _Unreadable:
    """A request body that must not be read."""

    def read(self, *args):
        raise AssertionError("the body was read")


def body_app(seen: dict):
    def application(environ, start_response):
        seen["body"] = webob.Request(environ).body
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    return application


def test_a_body_declared_too_large_is_a_413_unread():
    seen: dict = {}
    request = webob.Request.blank("/", method="POST", headers={"Accept": "application/json"})
    request.environ.update({"CONTENT_LENGTH": "11", "wsgi.input": _Unreadable()})
    response = request.get_response(middleware.BodyLimit(body_app(seen), 10))
    assert "The request body is larger than the 10 bytes accepted." in (
        _json_error(response, 413)["detail"])
    assert not seen


def test_a_chunked_body_is_read_only_up_to_the_limit():
    seen: dict = {}
    layer = middleware.BodyLimit(body_app(seen), 10)
    for body, status in ((b"x" * 10, 200), (b"x" * 10**6, 413)):
        request = webob.Request.blank("/", method="POST", headers={"Accept": "application/json"})
        data = io.BytesIO(body)
        # as cheroot hands a chunked body over: no length, input terminated
        request.environ.update({"wsgi.input": data, "wsgi.input_terminated": True})
        request.environ.pop("CONTENT_LENGTH", None)
        assert request.get_response(layer).status_int == status
        assert data.tell() <= 11
    assert seen["body"] == b"x" * 10


@pytest.mark.parametrize("length", ["10", "", "ten"])
def test_other_bodies_pass_untouched(length):
    seen: dict = {}
    request = webob.Request.blank("/", method="POST", body=b"x" * 10)
    request.environ["CONTENT_LENGTH"] = length
    assert request.get_response(middleware.BodyLimit(recording_app(seen), 10)).status_int == 200
    assert seen["CONTENT_LENGTH"] == length


class _IdentityDown(Exception):
    pass


def refusing_authenticator(status: str, raising: bool = False):
    """An authentication layer in the manner of keystonemiddleware's: a
    plain-text refusal of its own (or an exception), else the application."""

    def authenticate(application):
        def layer(environ, start_response):
            if raising:
                raise _IdentityDown("timed out")
            if environ.get("HTTP_X_AUTH_TOKEN") == "valid":
                return application(environ, start_response)
            start_response(status, [("Content-Type", "text/plain"),
                                    ("WWW-Authenticate", 'Keystone uri="http://id"')])
            return [b"refused"]

        return layer

    return authenticate


def _through_authentication(authenticate, application, token: str | None = None):
    headers = {"Accept": "application/json"}
    if token is not None:
        headers["X-Auth-Token"] = token
    layer = middleware.AuthenticationErrors(authenticate, application,
                                            unavailable=(_IdentityDown,))
    return webob.Request.blank("/resource_providers", headers=headers).get_response(layer)


def test_authentication_refusals_become_json_errors():
    response = _through_authentication(refusing_authenticator("401 Unauthorized"),
                                       recording_app({}))
    assert "X-Auth-Token" in _json_error(response, 401)["detail"]
    assert response.headers["WWW-Authenticate"] == 'Keystone uri="http://id"'
    response = _through_authentication(refusing_authenticator("503 Service Unavailable"),
                                       recording_app({}))
    assert "identity service cannot be reached" in _json_error(response, 503)["detail"]
    response = _through_authentication(refusing_authenticator("400 Bad Request"),
                                       recording_app({}))
    _json_error(response, 400)


def test_an_identity_service_failure_is_a_json_503():
    response = _through_authentication(refusing_authenticator("", raising=True),
                                       recording_app({}), token="valid")
    assert "identity service cannot be reached" in _json_error(response, 503)["detail"]


def test_the_answers_of_an_authenticated_request_pass_untouched():
    def not_found(environ, start_response):
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"the application's own"]

    response = _through_authentication(refusing_authenticator("401 Unauthorized"),
                                       not_found, token="valid")
    assert (response.status_int, response.body) == (404, b"the application's own")
