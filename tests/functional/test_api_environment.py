"""``placement-api`` configured only through OS_<GROUP>__<OPTION> environment
variables, the way outside test suites start it: policy and CORS options
included."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.fixtures import ops


@pytest.fixture(scope="module")
def placement(tmp_path_factory):
    directory = tmp_path_factory.mktemp("api-environment")
    policy_file = directory / "policy.yaml"
    policy_file.write_text(yaml.safe_dump({"placement:resource_classes:list": "@"}))
    env = {
        "OS_PLACEMENT_CONFIG_DIR": str(directory),
        "OS_PLACEMENT_DATABASE__CONNECTION": f"sqlite:///{directory}/placement.sqlite",
        "OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP": "True",
        "OS_API__AUTH_STRATEGY": "noauth2",
        "OS_OSLO_POLICY__ENFORCE_NEW_DEFAULTS": "True",
        "OS_OSLO_POLICY__ENFORCE_SCOPE": "False",
        "OS_OSLO_POLICY__POLICY_FILE": str(policy_file),
        "OS_CORS__ALLOWED_ORIGIN": ops.ALLOWED_ORIGIN,
        "OS_CORS__ALLOW_HEADERS": "x-auth-token,openstack-api-version",
    }
    with ops.api_server(ops.free_port(), env) as server:
        yield server


def call(placement, path, token="user", method="GET", headers=None):
    return ops.request(placement.url + path, method=method, headers={
        "X-Auth-Token": token, "OpenStack-API-Version": "placement 1.7", **(headers or {})})


def test_policy_file_from_the_environment(placement):
    status, _, body = call(placement, "/resource_classes")
    assert status == 200, body
    status, _, body = call(placement, "/resource_classes/VCPU")
    assert status == 403
    assert "placement:resource_classes:show" in json.loads(body)["errors"][0]["detail"]


def test_enforce_scope_from_the_environment(placement):
    status, _, body = call(placement, "/resource_classes/VCPU", token="admin",
                           headers={"OpenStack-System-Scope": "all"})
    assert status == 200, body


def test_cors_from_the_environment(placement):
    status, headers, _ = call(placement, "/resource_classes", method="OPTIONS", headers={
        "Origin": ops.ALLOWED_ORIGIN, "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "x-auth-token,openstack-api-version"})
    assert status == 200
    assert headers["access-control-allow-origin"] == ops.ALLOWED_ORIGIN
    assert headers["access-control-allow-headers"] == "x-auth-token,openstack-api-version"
