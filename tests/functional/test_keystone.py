"""``[api] auth_strategy = keystone``: placement-api started with
keystonemiddleware's auth_token against a fake identity service that this
test serves on loopback (it answers version discovery, the service user's
password authentication and token validation, like keystone v3)."""

from __future__ import annotations

import datetime
import http.server
import json
import threading

import pytest

from tests.fixtures import ops

VALID_TOKEN = "a-valid-user-token"
MEMBER_TOKEN = "a-valid-token-of-a-mere-member"
SERVICE_TOKEN = "the-placement-service-token"
USER_ID = "0f8c2d1e9a7b4c5d8e6f1a2b3c4d5e6f"
PROJECT_ID = "5a6b7c8d9e0f4a1b2c3d4e5f6a7b8c9d"


class FakeKeystone(http.server.BaseHTTPRequestHandler):
    """Just enough of the identity v3 API for auth_token."""

    validated: list[str] = []

    def log_message(self, *args) -> None:
        """Quiet: the test reads the answers, not the access log."""

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def _answer(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _version(self) -> dict:
        return {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
                "links": [{"rel": "self", "href": self.base + "/v3/"}],
                "media-types": [{"base": "application/json",
                                 "type": "application/vnd.openstack.identity-v3+json"}]}

    def _token(self, user_id: str, project_id: str, roles: list[str]) -> dict:
        expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        domain = {"id": "default", "name": "Default"}
        return {"token": {
            "methods": ["password"],
            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
            "issued_at": "2026-01-01T00:00:00.000000Z",
            "user": {"id": user_id, "name": user_id, "domain": domain},
            "project": {"id": project_id, "name": project_id, "domain": domain},
            "roles": [{"id": name, "name": name} for name in roles],
            "catalog": [{"type": "identity", "name": "keystone", "id": "identity",
                         "endpoints": [{"id": interface, "interface": interface,
                                        "region": "RegionOne", "region_id": "RegionOne",
                                        "url": self.base + "/v3"}
                                       for interface in ("public", "internal", "admin")]}],
        }}

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "":
            self._answer(300, {"versions": {"values": [self._version()]}})
        elif self.path.rstrip("/") == "/v3":
            self._answer(200, {"version": self._version()})
        elif self.path.startswith("/v3/auth/tokens"):
            subject = self.headers.get("X-Subject-Token")
            self.validated.append(subject)
            if self.headers.get("X-Auth-Token") != SERVICE_TOKEN:
                self._answer(401, {"error": {"code": 401, "title": "Unauthorized"}})
            elif subject == VALID_TOKEN:
                self._answer(200, self._token(USER_ID, PROJECT_ID, ["admin", "member"]))
            elif subject == MEMBER_TOKEN:
                self._answer(200, self._token(USER_ID, PROJECT_ID, ["member", "reader"]))
            else:
                self._answer(404, {"error": {"code": 404, "title": "Not Found"}})
        else:
            self._answer(404, {"error": {"code": 404, "title": "Not Found"}})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith("/v3/auth/tokens"):
            self._answer(201, self._token("placement", "service", ["service"]),
                         {"X-Subject-Token": SERVICE_TOKEN})
        else:
            self._answer(404, {"error": {"code": 404, "title": "Not Found"}})


@pytest.fixture(scope="module")
def keystone():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeKeystone)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def placement(keystone, tmp_path_factory):
    directory = tmp_path_factory.mktemp("keystone-mode")
    config_file = directory / "placement.conf"
    config_file.write_text(f"""
[api]
auth_strategy = keystone

[placement_database]
connection = sqlite:///{directory}/placement.sqlite
sync_on_startup = True

[keystone_authtoken]
www_authenticate_uri = {keystone}/v3
auth_url = {keystone}/v3
auth_type = password
username = placement
password = secret
user_domain_name = Default
project_name = service
project_domain_name = Default
interface = internal
""")
    env = {"OS_PLACEMENT_CONFIG_DIR": str(directory)}
    with ops.api_server(ops.free_port(), env, str(config_file)) as server:
        yield server
    assert "Traceback" not in server.output()


def test_root_is_anonymous(placement):
    status, headers, body = ops.request(placement.url + "/")
    assert status == 200
    assert json.loads(body)["versions"][0]["max_version"] == "1.39"
    assert headers["openstack-api-version"] == "placement 1.0"


def test_no_token_is_401(placement, keystone):
    status, headers, _ = ops.request(placement.url + "/resource_providers")
    assert status == 401
    assert headers["www-authenticate"] == f"Keystone uri=\"{keystone}/v3\""
    assert "openstack-api-version" not in headers
    assert headers["x-openstack-request-id"].startswith("req-")


def test_invalid_token_is_401(placement):
    FakeKeystone.validated.clear()
    status, _, _ = ops.request(placement.url + "/resource_providers",
                               headers={"X-Auth-Token": "forged"})
    assert status == 401
    assert FakeKeystone.validated == ["forged"]


def get_resource_classes(placement, token):
    return ops.request(placement.url + "/resource_classes",
                       headers={"X-Auth-Token": token, "Accept": "application/json",
                                "OpenStack-API-Version": "placement 1.2"})


def test_valid_token_is_served(placement):
    FakeKeystone.validated.clear()
    status, headers, body = get_resource_classes(placement, VALID_TOKEN)
    assert status == 200, body
    assert FakeKeystone.validated == [VALID_TOKEN]
    assert {"name": "VCPU", "links": [{"rel": "self", "href": "/resource_classes/VCPU"}]} in (
        json.loads(body)["resource_classes"])
    assert headers["openstack-api-version"] == "placement 1.2"


def test_roles_come_from_the_token(placement):
    status, _, body = get_resource_classes(placement, MEMBER_TOKEN)
    assert status == 403
    assert "Policy does not allow placement:resource_classes:list to be performed." in (
        json.loads(body)["errors"][0]["detail"])
    # ...and the project too: a reader may read the usages of its project only.
    for project, expected in ((PROJECT_ID, 200), ("another-project", 403)):
        status, _, body = ops.request(
            placement.url + f"/usages?project_id={project}",
            headers={"X-Auth-Token": MEMBER_TOKEN, "OpenStack-API-Version": "placement 1.9"})
        assert status == expected, body


def test_health_check_needs_no_token(placement):
    status, _, body = ops.request(placement.url + "/healthcheck",
                                  headers={"Accept": "text/plain"})
    assert (status, body) == (200, b"OK")


def test_identity_headers_from_the_client_are_not_trusted(placement):
    """auth_token strips X-User-Id and friends before validating, so a
    client cannot pose as somebody without a token."""
    status, _, _ = ops.request(placement.url + "/resource_providers",
                               headers={"X-User-Id": USER_ID, "X-Roles": "admin",
                                        "X-Project-Id": PROJECT_ID})
    assert status == 401


