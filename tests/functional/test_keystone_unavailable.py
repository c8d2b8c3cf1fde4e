"""``[api] auth_strategy = keystone`` with an identity service that accepts
connections and never answers: every request with a token gets a JSON 503
within seconds (placement.placement_conf.IDENTITY_TIMEOUT_SECONDS) instead of
hanging, and a request without one its JSON 401 at once."""

from __future__ import annotations

import json
import time

import pytest

from placement import conf as placement_conf
from tests.fixtures import ops
from tests.fixtures.silent_identity import keystone_authtoken, silent_identity_service

pytestmark = pytest.mark.backend("sqlite")

# Service authentication, then token validation and its retry, each timing
# out; the rest is slack for a loaded machine.
WORST_SECONDS = placement_conf.IDENTITY_TIMEOUT_SECONDS * (2 + placement_conf.IDENTITY_RETRIES) + 5


@pytest.fixture(scope="module")
def identity():
    with silent_identity_service() as url:
        yield url


@pytest.fixture(scope="module")
def placement(identity, tmp_path_factory):
    directory = tmp_path_factory.mktemp("silent-keystone")
    with ops.keystone_api_server(str(directory), keystone_authtoken(identity)) as server:
        yield server


def _error(body: bytes, status: int) -> dict:
    error = json.loads(body)["errors"][0]
    assert error["status"] == status
    assert error["request_id"].startswith("req-")
    return error


def test_a_token_gets_a_json_503_within_seconds(placement):
    for _ in range(2):  # nothing learnt by the first attempt shortens the second
        started = time.monotonic()
        status, headers, body = ops.request(placement.url + "/resource_providers",
                                            headers={"X-Auth-Token": "some-token"})
        elapsed = time.monotonic() - started
        assert status == 503, body
        assert headers["content-type"] == "application/json"
        assert "The identity service cannot be reached" in _error(body, 503)["detail"]
        assert elapsed < WORST_SECONDS, f"503 after {elapsed:.1f} s"
    assert "The identity service failed while authenticating GET /resource_providers" in (
        placement.output())


def test_no_token_is_a_json_401_at_once(placement, identity):
    started = time.monotonic()
    status, headers, body = ops.request(placement.url + "/resource_providers")
    assert time.monotonic() - started < 2
    assert status == 401
    assert headers["www-authenticate"] == f'Keystone uri="{identity}/v3"'
    assert "X-Auth-Token" in _error(body, 401)["detail"]


def test_anonymous_documents_and_health_check_are_served(placement):
    assert ops.request(placement.url + "/")[0] == 200
    assert ops.request(placement.url + "/healthcheck")[0] == 200
