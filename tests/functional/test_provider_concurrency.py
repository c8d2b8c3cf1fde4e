"""Racing writers on one provider: the generation lets exactly one win."""

from __future__ import annotations

import json
import threading
import uuid as uuid_lib

import pytest
import webob

from tests.db import FreshDatabase
from tests.fixtures.base import build_app

HEADERS = {"x-auth-token": "admin", "accept": "application/json",
           "content-type": "application/json", "openstack-api-version": "placement 1.19"}


@pytest.fixture
def app():
    database = FreshDatabase()
    yield build_app(database)
    database.close()


def call(app, method: str, path: str, body: object = None) -> webob.Response:
    request = webob.Request.blank(path, method=method, headers=HEADERS)
    if body is not None:
        request.body = json.dumps(body).encode()
    return request.get_response(app)


def race(app, method: str, path: str, bodies: list[object]) -> list[webob.Response]:
    """Send one request per body from as many threads, released together."""
    barrier = threading.Barrier(len(bodies))
    responses: list[webob.Response | None] = [None] * len(bodies)

    def send(index: int) -> None:
        barrier.wait()
        responses[index] = call(app, method, path, bodies[index])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return responses


@pytest.mark.parametrize("route, body_of", [
    ("aggregates", lambda: {"aggregates": [str(uuid_lib.uuid4())],
                            "resource_provider_generation": 0}),
    ("traits", lambda: {"traits": ["HW_CPU_X86_SSE"], "resource_provider_generation": 0}),
])
def test_only_one_writer_with_the_same_generation_wins(app, route, body_of):
    provider_uuid = str(uuid_lib.uuid4())
    assert call(app, "POST", "/resource_providers",
                {"name": "racer", "uuid": provider_uuid}).status_int == 201
    path = f"/resource_providers/{provider_uuid}/{route}"
    bodies = [body_of() for _ in range(4)]
    responses = race(app, "PUT", path, bodies)
    statuses = sorted(response.status_int for response in responses)
    assert statuses == [200, 409, 409, 409]
    winner = next(r for r, b in zip(responses, bodies, strict=True) if r.status_int == 200)
    assert winner.json["resource_provider_generation"] == 1
    assert call(app, "GET", path).json == winner.json
