"""Hypothesis-generated requests to every write route: bodies (valid ones
mutated, arbitrary JSON, undecodable bytes), query strings, media types and
microversions, against existing and missing targets. The service must
never answer 5xx, and a rejected request (4xx) must leave the database
exactly as it was."""

from __future__ import annotations

import json
import os
import urllib.parse

import pytest
import sqlalchemy as sa
import webob
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from placement.db import tables
from tests.db import FreshDatabase
from tests.fixtures.base import build_app

EXAMPLES_PER_ROUTE = 60
# Reproducible runs in CI; fresh examples on every local run.
IN_CI = bool(os.environ.get("CI"))
# Admin and service: allowed everything, POST /reshaper included.
ADMIN = {"X-Auth-Token": "admin", "X-Roles": "admin,service"}
CUSTOM_CLASS = "CUSTOM_FUZZ_CLASS"
CUSTOM_TRAIT = "CUSTOM_FUZZ_TRAIT"
AGGREGATE = "5a5c5d3e-0000-4000-8000-00000000a661"
# Fixed uuids: every world looks the same, so hypothesis can replay examples.
ROOT, CHILD = "5a5c5d3e-0000-4000-8000-000000000001", "5a5c5d3e-0000-4000-8000-000000000002"
CONSUMER = "5a5c5d3e-0000-4000-8000-0000000000c1"
NEW_CONSUMER = "5a5c5d3e-0000-4000-8000-0000000000c2"
NEW_PROVIDER = "5a5c5d3e-0000-4000-8000-000000000003"
MISSING = "5a5c5d3e-0000-4000-8000-0000000000ff"
OTHER_AGGREGATE = "5a5c5d3e-0000-4000-8000-00000000a662"
PROJECT, USER = "fuzz-project", "fuzz-user"


class World:
    """An application on a database holding a small provider tree; rebuilt
    only after a request that was accepted (rejected ones must not have
    changed anything, which is what the tests check)."""

    def __init__(self) -> None:
        self.database = None

    def fresh(self) -> World:
        if self.database is not None:
            self.database.close()
        self.database = FreshDatabase()
        self.application = build_app(self.database)
        self.root, self.child, self.consumer = ROOT, CHILD, CONSUMER
        self._populate()
        return self

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None) -> webob.Response:
        request = webob.Request.blank(path, method=method,
                                      headers={**ADMIN, **(headers or {})})
        if body is not None:
            request.body = body
        return request.get_response(self.application)

    def _setup(self, method: str, path: str, body: object) -> None:
        response = self.request(method, path, json.dumps(body).encode(), {
            "Content-Type": "application/json", "OpenStack-API-Version": "placement latest"})
        assert response.status_int < 300, (method, path, response.text)

    def _populate(self) -> None:
        self._setup("PUT", f"/resource_classes/{CUSTOM_CLASS}", None)
        self._setup("PUT", f"/traits/{CUSTOM_TRAIT}", None)
        self._setup("POST", "/resource_providers", {"name": "root", "uuid": self.root})
        self._setup("POST", "/resource_providers", {
            "name": "child", "uuid": self.child, "parent_provider_uuid": self.root})
        self._setup("PUT", f"/resource_providers/{self.root}/inventories", {
            "resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 8}, "DISK_GB": {"total": 100, "reserved": 10}}})
        self._setup("PUT", f"/resource_providers/{self.child}/inventories", {
            "resource_provider_generation": 0, "inventories": {CUSTOM_CLASS: {"total": 4}}})
        self._setup("PUT", f"/resource_providers/{self.root}/traits", {
            "resource_provider_generation": 1, "traits": [CUSTOM_TRAIT]})
        self._setup("PUT", f"/resource_providers/{self.root}/aggregates", {
            "resource_provider_generation": 2, "aggregates": [AGGREGATE]})
        self._setup("PUT", f"/allocations/{self.consumer}", {
            "allocations": {self.root: {"resources": {"VCPU": 2, "DISK_GB": 10}},
                            self.child: {"resources": {CUSTOM_CLASS: 1}}},
            "project_id": PROJECT, "user_id": USER, "consumer_generation": None,
            "consumer_type": "INSTANCE"})

    def snapshot(self) -> dict:
        with self.database.db.reader() as connection:
            return {table.name: sorted(map(repr, connection.execute(sa.select(table)).all()))
                    for table in tables.metadata.sorted_tables}


@pytest.fixture(scope="module")
def world():
    made = World().fresh()
    yield made
    made.database.close()


# --- strategies -------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False)
    | st.text(max_size=12) | st.sampled_from(["VCPU", CUSTOM_CLASS, CUSTOM_TRAIT, AGGREGATE]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12)


@st.composite
def mutated(draw, valid: object) -> object:
    """``valid`` with one value somewhere replaced, one key removed or one
    key added (or unchanged)."""
    if isinstance(valid, dict) and valid:
        key = draw(st.sampled_from(sorted(valid)))
        action = draw(st.sampled_from(["replace", "recurse", "remove", "add", "keep", "keep"]))
        changed = dict(valid)
        if action == "replace":
            changed[key] = draw(json_values)
        elif action == "recurse":
            changed[key] = draw(mutated(valid[key]))
        elif action == "remove":
            del changed[key]
        elif action == "add":
            changed[draw(st.text(max_size=12))] = draw(json_values)
        return changed
    if isinstance(valid, list) and valid:
        return draw(st.lists(st.sampled_from(valid) | json_values, max_size=4))
    return draw(st.just(valid) | json_values)


def bodies(valid: object) -> st.SearchStrategy[bytes | None]:
    encoded = st.one_of(mutated(valid), mutated(valid), mutated(valid), json_values).map(
        lambda value: json.dumps(value).encode())
    return encoded | st.binary(max_size=40) | st.none()


# Half the requests at the newest version, whose bodies the valid ones are.
versions = st.just("placement latest") | st.sampled_from(
    [f"placement 1.{minor}" for minor in range(40)] + ["placement 1.40", "placement cow"])
content_types = st.sampled_from(["application/json"] * 6 + ["text/plain", ""])
query_strings = st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3).map(
    urllib.parse.urlencode)
providers = st.sampled_from(["root", "root", "root", "child", "missing", "not-a-uuid"])
consumers = st.sampled_from(["consumer", "consumer", "missing", "not-a-uuid"])
classes = st.sampled_from(["VCPU", "DISK_GB", "MEMORY_MB", CUSTOM_CLASS, "CUSTOM_NEW", "cow"])
trait_names = st.sampled_from([CUSTOM_TRAIT, "CUSTOM_NEW", "HW_CPU_X86_SSE", "lower", "X" * 300])

# (method, path template, body valid at the newest version or None for no body)
WRITE_ROUTES = [
    ("POST", "/resource_classes", {"name": "CUSTOM_NEW"}),
    ("PUT", "/resource_classes/{resource_class}", {"name": "CUSTOM_RENAMED"}),
    ("DELETE", "/resource_classes/{resource_class}", None),
    ("POST", "/resource_providers", {"name": "new", "uuid": NEW_PROVIDER,
                                     "parent_provider_uuid": "{root}"}),
    ("PUT", "/resource_providers/{provider}", {"name": "renamed",
                                               "parent_provider_uuid": "{root}"}),
    ("DELETE", "/resource_providers/{provider}", None),
    ("POST", "/resource_providers/{provider}/inventories",
     {"resource_class": "MEMORY_MB", "total": 1024, "reserved": 0, "min_unit": 1,
      "max_unit": 1024, "step_size": 1, "allocation_ratio": 1.5}),
    ("PUT", "/resource_providers/{provider}/inventories",
     {"resource_provider_generation": 3,
      "inventories": {"VCPU": {"total": 16, "allocation_ratio": 2.0}}}),
    ("DELETE", "/resource_providers/{provider}/inventories", None),
    ("PUT", "/resource_providers/{provider}/inventories/{resource_class}",
     {"resource_provider_generation": 3, "total": 32, "reserved": 1}),
    ("DELETE", "/resource_providers/{provider}/inventories/{resource_class}", None),
    ("PUT", "/resource_providers/{provider}/aggregates",
     {"resource_provider_generation": 3, "aggregates": [AGGREGATE, OTHER_AGGREGATE]}),
    ("PUT", "/resource_providers/{provider}/traits",
     {"resource_provider_generation": 3, "traits": [CUSTOM_TRAIT, "HW_CPU_X86_SSE"]}),
    ("DELETE", "/resource_providers/{provider}/traits", None),
    ("PUT", "/traits/{trait}", None),
    ("DELETE", "/traits/{trait}", None),
    ("PUT", "/allocations/{consumer}",
     {"allocations": {"{root}": {"resources": {"VCPU": 4}}}, "project_id": PROJECT,
      "user_id": USER, "consumer_generation": 1, "consumer_type": "INSTANCE"}),
    ("DELETE", "/allocations/{consumer}", None),
    ("POST", "/allocations",
     {"{consumer}": {"allocations": {}, "project_id": PROJECT, "user_id": USER,
                     "consumer_generation": 1, "consumer_type": "INSTANCE"},
      "{new_consumer}": {"allocations": {"{root}": {"resources": {"VCPU": 2, "DISK_GB": 10}},
                                         "{child}": {"resources": {CUSTOM_CLASS: 1}}},
                         "project_id": PROJECT, "user_id": USER,
                         "consumer_generation": None, "consumer_type": "MIGRATION"}}),
    ("POST", "/reshaper",
     {"inventories": {"{root}": {"resource_provider_generation": 4, "inventories": {
         "DISK_GB": {"total": 100}}},
                      "{child}": {"resource_provider_generation": 2, "inventories": {
         CUSTOM_CLASS: {"total": 4}, "VCPU": {"total": 8}}}},
      "allocations": {"{consumer}": {
          "allocations": {"{root}": {"resources": {"DISK_GB": 10}},
                          "{child}": {"resources": {"VCPU": 2, CUSTOM_CLASS: 1}}},
          "project_id": PROJECT, "user_id": USER, "consumer_generation": 1,
          "consumer_type": "INSTANCE"}}}),
]


def _filled(template: str, world: World, values: dict) -> str:
    provider = {"root": world.root, "child": world.child,
                "missing": MISSING}.get(values["provider"], values["provider"])
    consumer = {"consumer": world.consumer,
                "missing": MISSING}.get(values["consumer"], values["consumer"])
    return (template.replace("{provider}", provider).replace("{root}", world.root)
            .replace("{child}", world.child).replace("{consumer}", consumer)
            .replace("{new_consumer}", NEW_CONSUMER)
            .replace("{resource_class}", values["resource_class"])
            .replace("{trait}", urllib.parse.quote(values["trait"])))


@pytest.mark.parametrize("method,template,valid", WRITE_ROUTES,
                         ids=[f"{m} {t}" for m, t, _ in WRITE_ROUTES])
@settings(max_examples=EXAMPLES_PER_ROUTE, deadline=None, derandomize=IN_CI, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_server_error_and_rejections_change_nothing(world, method, template, valid, data):
    values = {"provider": data.draw(providers), "resource_class": data.draw(classes),
              "trait": data.draw(trait_names), "consumer": data.draw(consumers)}
    body = data.draw(bodies(json.loads(_filled(json.dumps(valid), world, values)))
                     if valid is not None else st.none() | st.binary(max_size=20))
    headers = {"OpenStack-API-Version": data.draw(versions)}
    content_type = data.draw(content_types)
    if content_type:
        headers["Content-Type"] = content_type
    path = _filled(template, world, values)
    query = data.draw(query_strings)
    before = world.snapshot()

    response = world.request(method, path + ("?" + query if query else ""), body, headers)

    event(f"status {response.status_int}")  # see --hypothesis-show-statistics
    assert response.status_int < 500, (method, path, headers, body, response.text)
    if response.status_int >= 400:
        assert world.snapshot() == before, (method, path, headers, body, response.text)
    else:
        world.fresh()


def test_reshaper_refuses_records_under_keys_that_are_no_class(world):
    """Found by the fuzzing: such keys escape the schema (patternProperties
    only) and once made a 500."""
    before = world.snapshot()
    body = {"inventories": {world.root: {"resource_provider_generation": 4,
                                         "inventories": {"Infinity": [], "VCPU": {"total": 8}}}},
            "allocations": {}}
    response = world.request("POST", "/reshaper", json.dumps(body).encode(), {
        "Content-Type": "application/json", "OpenStack-API-Version": "placement latest"})
    assert response.status_int == 400, response.text
    assert "malformed reshaper data: No such resource class Infinity." in response.text
    assert world.snapshot() == before
