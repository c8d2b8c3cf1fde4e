"""``[api] auth_strategy = keystone``: placement-api with keystonemiddleware's
auth_token in front, validating tokens with a real Keystone
(tests/fixtures/keystone_server.py) as the ``placement`` service user, which
has the ``service`` role and no other; secure RBAC. The tokens here are
Keystone's own, of users made for each test."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.fixtures import ops

RECENT = "placement 1.39"


def call(placement, path: str, token: str | None = None, method: str = "GET",
         body: dict | None = None, version: str = RECENT, **headers: str):
    if token is not None:
        headers["X-Auth-Token"] = token
    return ops.request(placement.url + path, method=method, body=body, headers={
        "Accept": "application/json", "OpenStack-API-Version": version, **headers})


def json_error(answer: tuple[int, dict, bytes], status: int) -> dict:
    """The one error of a placement JSON error document answering ``status``."""
    code, headers, body = answer
    assert code == status, body
    assert headers["content-type"].startswith("application/json")
    [error] = json.loads(body)["errors"]
    assert error["status"] == status
    assert error["request_id"] == headers["x-openstack-request-id"]
    return error


@pytest.fixture(scope="module")
def member(keystone):
    """A user with only ``member`` and ``reader`` on a project of its own."""
    name = f"member-{uuid.uuid4().hex[:8]}"
    return keystone.create_user(name, name + "-project", ["member", "reader"])


def test_root_is_anonymous(keystone_placement):
    status, headers, body = ops.request(keystone_placement.url + "/")
    assert status == 200
    assert json.loads(body)["versions"][0]["max_version"] == "1.39"
    assert headers["openstack-api-version"] == "placement 1.0"


def test_health_check_needs_no_token(keystone_placement):
    status, _, body = ops.request(keystone_placement.url + "/healthcheck",
                                  headers={"Accept": "text/plain"})
    assert (status, body) == (200, b"OK")


def test_no_token_is_401_naming_keystone(keystone_placement, keystone):
    answer = call(keystone_placement, "/resource_providers")
    assert json_error(answer, 401)["title"] == "Unauthorized"
    headers = answer[1]
    assert headers["www-authenticate"] == f"Keystone uri=\"{keystone.auth_url}\""
    assert "openstack-api-version" not in headers
    assert headers["x-openstack-request-id"].startswith("req-")


def test_tokens_keystone_did_not_issue_are_401(keystone_placement, keystone, member):
    # A token keystone never issued, and one it issued and then revoked
    # (placement had not seen it yet, so no cache answers for keystone).
    revoked = member.token()
    keystone.revoke_token(revoked)
    for token in ("forged", revoked):
        json_error(call(keystone_placement, "/resource_providers", token), 401)


def test_admin_token_is_served(keystone_placement, keystone):
    status, headers, body = call(keystone_placement, "/resource_classes",
                                 keystone.admin.token(), version="placement 1.2")
    assert status == 200, body
    assert {"name": "VCPU", "links": [{"rel": "self", "href": "/resource_classes/VCPU"}]} in (
        json.loads(body)["resource_classes"])
    assert headers["openstack-api-version"] == "placement 1.2"


def test_member_is_denied_in_the_json_error_format(keystone_placement, member):
    token = member.token()
    for method, path, body, rule in (
            ("GET", "/resource_classes", None, "resource_classes:list"),
            ("POST", "/resource_providers", {"name": "not-mine"}, "resource_providers:create"),
            ("GET", f"/allocations/{uuid.uuid4()}", None, "allocations:list")):
        error = json_error(call(keystone_placement, path, token, method, body), 403)
        assert error["title"] == "Forbidden"
        assert f"Policy does not allow placement:{rule} to be performed." in error["detail"]


def test_a_reader_reads_the_usages_of_its_own_project_only(keystone_placement, member,
                                                           keystone):
    token = member.token()
    for project_id, expected in ((member.project_id, 200), (keystone.admin.project_id, 403)):
        status, _, body = call(keystone_placement, f"/usages?project_id={project_id}", token)
        assert status == expected, body
    assert json.loads(call(keystone_placement, f"/usages?project_id={member.project_id}",
                           token)[2]) == {"usages": {}}


def test_only_the_service_role_reshapes(keystone_placement, keystone):
    """Secure RBAC: ``placement:reshaper:reshape`` is the service's alone,
    the admin included out; the ``service`` role alone passes the policy
    (the empty body then fails validation: 400, not 403)."""
    service = keystone.create_user(f"nova-{uuid.uuid4().hex[:8]}", "service", ["service"])
    for user, expected in ((keystone.admin, 403), (service, 400)):
        status, _, body = call(keystone_placement, "/reshaper", user.token(), "POST", {})
        assert status == expected, body


def test_a_system_scoped_token_is_refused(keystone_placement, keystone):
    """Every placement rule is for project scope: the bootstrap admin's
    system-scoped token is valid to keystone and still denied."""
    status, _, body = call(keystone_placement, "/resource_providers",
                           keystone.system_admin_token())
    assert status == 403, body


def test_identity_headers_from_the_client_are_not_trusted(keystone_placement, keystone):
    """auth_token strips X-User-Id, X-Roles and friends before validating, so
    a client cannot pose as somebody without a token."""
    status, _, _ = call(keystone_placement, "/resource_providers", **{
        "X-User-Id": keystone.admin.user_id, "X-Roles": "admin,service",
        "X-Project-Id": keystone.admin.project_id, "X-Identity-Status": "Confirmed"})
    assert status == 401
