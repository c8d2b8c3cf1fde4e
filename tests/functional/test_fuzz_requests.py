"""Hypothesis mutates valid requests to every write route and to both query
routes (GET /allocation_candidates, GET /resource_providers), at several
microversions, on every backend: bodies broken at the byte level (hostile
tokens such as NaN, 1e400, lone surrogates, invalid UTF-8 and deep nesting
spliced in, bytes cut or repeated) and at the structure level (values
replaced by hostile ones, keys removed or added, another top-level type),
query strings likewise (hostile values, repeated parameters, raw percent
escapes), and the headers (microversion, media types).

Three oracles: no 5xx; a JSON error body on every 4xx a JSON-accepting
client gets; a rejected write leaves the database exactly as it was.
The number of examples is bounded so that the whole run takes a couple of
minutes on the three backends; the summary reports the requests sent."""

from __future__ import annotations

import collections
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

pytestmark = pytest.mark.slow

EXAMPLES_PER_ROUTE = 25
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
LATEST = "1.39"


class World:
    """An application on a database of one backend holding a small
    provider tree; rebuilt only after a request that was accepted
    (rejected ones must not have changed anything, which is checked)."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.database = None
        self.requests: collections.Counter = collections.Counter()

    def fresh(self) -> World:
        self.close()
        self.database = FreshDatabase(self.backend)
        self.application = build_app(self.database)
        self._populate()
        # What every rejected write must leave as it is.
        self.state = self.snapshot()
        return self

    def close(self) -> None:
        if self.database is not None:
            self.database.close()
            self.database = None

    def request(self, method: str, path: str, query: str = "", body: bytes | None = None,
                headers: dict | None = None) -> webob.Response:
        request = webob.Request.blank(path, method=method,
                                      headers={**ADMIN, **(headers or {})})
        # As a WSGI server hands it over: percent escapes left as they are.
        request.environ["QUERY_STRING"] = query
        if body is not None:
            request.body = body
        return request.get_response(self.application)

    def _setup(self, method: str, path: str, body: object) -> None:
        response = self.request(method, path, body=json.dumps(body).encode(), headers={
            "Content-Type": "application/json", "OpenStack-API-Version": "placement latest"})
        assert response.status_int < 300, (method, path, response.text)

    def _populate(self) -> None:
        self._setup("PUT", f"/resource_classes/{CUSTOM_CLASS}", None)
        self._setup("PUT", f"/traits/{CUSTOM_TRAIT}", None)
        self._setup("POST", "/resource_providers", {"name": "root", "uuid": ROOT})
        self._setup("POST", "/resource_providers", {
            "name": "child", "uuid": CHILD, "parent_provider_uuid": ROOT})
        self._setup("PUT", f"/resource_providers/{ROOT}/inventories", {
            "resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 8}, "DISK_GB": {"total": 100, "reserved": 10}}})
        self._setup("PUT", f"/resource_providers/{CHILD}/inventories", {
            "resource_provider_generation": 0, "inventories": {CUSTOM_CLASS: {"total": 4}}})
        self._setup("PUT", f"/resource_providers/{ROOT}/traits", {
            "resource_provider_generation": 1, "traits": [CUSTOM_TRAIT]})
        self._setup("PUT", f"/resource_providers/{ROOT}/aggregates", {
            "resource_provider_generation": 2, "aggregates": [AGGREGATE]})
        self._setup("PUT", f"/allocations/{CONSUMER}", {
            "allocations": {ROOT: {"resources": {"VCPU": 2, "DISK_GB": 10}},
                            CHILD: {"resources": {CUSTOM_CLASS: 1}}},
            "project_id": PROJECT, "user_id": USER, "consumer_generation": None,
            "consumer_type": "INSTANCE"})

    def count(self, response: webob.Response) -> None:
        self.requests["sent"] += 1
        self.requests["rejected" if response.status_int >= 400 else "accepted"] += 1

    def snapshot(self) -> dict:
        with self.database.db.reader() as connection:
            return {table.name: sorted(map(repr, connection.execute(sa.select(table)).all()))
                    for table in tables.metadata.sorted_tables}


class Worlds:
    """A world per backend, one open at a time: the fresh databases of a
    server backend are all one database."""

    def __init__(self) -> None:
        self.by_backend: dict[str, World] = {}

    def of(self, backend: str) -> World:
        world = self.by_backend.setdefault(backend, World(backend))
        if world.database is None:
            self.close()
            world.fresh()
        return world

    def close(self) -> None:
        for world in self.by_backend.values():
            world.close()


@pytest.fixture(scope="module")
def worlds(report):
    made = Worlds()
    yield made
    made.close()
    for backend, world in sorted(made.by_backend.items()):
        counts = world.requests
        report(f"fuzz on {backend}: {counts['sent']} requests, {counts['rejected']} "
               f"rejected, {counts['accepted']} accepted")


# --- hostile material ---------------------------------------------------------------

def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


# Spliced into encoded bodies: each breaks a decoder or a driver somewhere.
HOSTILE_TOKENS = [
    b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999", b"123456789012345678901234567890",
    b"9223372036854775808", b"2147483648", b"-2147483649", b'"\\udfff"', b'"\\u0000"',
    b'"a\\ud800b"', b'"\xed\xa0\x80"', b"\xff", b"\xc3", b"\xef\xbb\xbf", b"[" * 40 + b"]" * 40,
    b"[" * 3000, b"{" * 3000, b'{"a":' * 50 + b"1" + b"}" * 50, b"{", b"]", b'"', b",", b":",
    b"null", b"\\", b"\x00",
]
hostile_values = st.sampled_from([
    float("nan"), float("inf"), -float("inf"), 2**64, -(2**63) - 1, 2**63 - 1, 2**31,
    2**31 - 1, -1, 0, 1.5, 1e308, -3.5e38, "\x00", "a\udfffb", "\ud800", "x" * 5000,
    "urn:uuid:" + AGGREGATE, "{" + AGGREGATE + "}", AGGREGATE.upper(), AGGREGATE.replace("-", ""),
    "", " ", "CUSTOM_" + "X" * 300, "VCPU", CUSTOM_CLASS, CUSTOM_TRAIT, [], {}, None, True,
    _nested(20), _nested(40), list(range(2000)), {str(n): n for n in range(300)},
])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
    | st.text(max_size=12) | hostile_values,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=10)


@st.composite
def mutated(draw, valid: object) -> object:
    """``valid`` with one value somewhere replaced, one key removed or one
    key added, wrapped, or unchanged."""
    if isinstance(valid, dict) and valid:
        key = draw(st.sampled_from(sorted(valid)))
        action = draw(st.sampled_from(["replace", "recurse", "recurse", "remove", "add",
                                       "wrap", "keep"]))
        changed = dict(valid)
        if action == "replace":
            changed[key] = draw(json_values)
        elif action == "recurse":
            changed[key] = draw(mutated(valid[key]))
        elif action == "remove":
            del changed[key]
        elif action == "add":
            changed[draw(st.text(max_size=12) | st.sampled_from(["\x00", "\udfff"]))] = draw(
                json_values)
        elif action == "wrap":
            changed[key] = [valid[key]]
        return changed
    if isinstance(valid, list) and valid:
        return draw(st.lists(st.sampled_from(valid) | json_values, max_size=4))
    return draw(st.just(valid) | json_values)


def _encoded(value: object, ascii_only: bool) -> bytes:
    # surrogatepass: a lone surrogate left unescaped becomes bytes that
    # are not UTF-8, as a broken client would send them.
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def spliced(draw, encoded: bytes, tokens: list[bytes]) -> bytes:
    """``encoded`` with one to three byte-level changes."""
    data = bytearray(encoded)
    for _ in range(draw(st.integers(1, 3))):
        position = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "insert", "overwrite", "delete", "cut",
                                       "repeat"]))
        if action in ("insert", "overwrite"):
            token = draw(st.sampled_from(tokens) | st.binary(min_size=1, max_size=4))
            end = position + (len(token) if action == "overwrite" else 0)
            data[position:end] = token
        elif action == "delete":
            del data[position:position + draw(st.integers(1, 8))]
        elif action == "cut":
            del data[position:]
        else:
            data[position:position] = data[position:position + 8] * draw(st.integers(2, 50))
    return bytes(data)


def bodies(valid: object) -> st.SearchStrategy[bytes | None]:
    structural = st.builds(_encoded, st.one_of(mutated(valid), mutated(valid), json_values),
                           st.booleans())
    return st.one_of(structural, structural, structural,
                     st.builds(_encoded, st.just(valid), st.just(True)).flatmap(
                         lambda encoded: spliced(encoded, HOSTILE_TOKENS)),
                     st.binary(max_size=40), st.none())


# Percent escapes a WSGI server passes on undecoded.
RAW_ESCAPES = [b"%ff", b"%00", b"%ed%a0%80", b"%c3", b"%", b"%zz", b"&&", b"==", b"+", b";"]
hostile_texts = st.sampled_from([
    "\x00", "x" * 20000, "x" * 3000, "!", "in:", "in:,", ",", ":", "!in:", "VCPU:-1",
    "VCPU:" + "9" * 30, "VCPU:" + "9" * 5000, "VCPU:1," * 500, AGGREGATE.upper(),
    "urn:uuid:" + AGGREGATE, "{" + AGGREGATE + "}", "in:" + ",".join([AGGREGATE] * 200),
    ",".join([CUSTOM_TRAIT] * 400), "in:" + ",".join([CUSTOM_TRAIT, "HW_CPU_X86_SSE"] * 100),
    "9" * 40, "0", "-1", "true", "é", "\u2603", "",
]) | st.text(max_size=10)


@st.composite
def queries(draw, valid: list[tuple[str, str]]) -> str:
    """``valid`` (the query as pairs) with a pair's value replaced, a pair
    removed, added or repeated (up to thousands of times), then encoded
    and perhaps spliced with raw percent escapes."""
    pairs = list(valid)
    action = draw(st.sampled_from(["replace", "replace", "remove", "add", "repeat", "keep"]))
    index = draw(st.integers(0, max(len(pairs) - 1, 0)))
    if action == "replace" and pairs:
        pairs[index] = (pairs[index][0], draw(hostile_texts))
    elif action == "remove" and pairs:
        del pairs[index]
    elif action == "add":
        pairs.append((draw(st.sampled_from([key for key, _ in valid] + ["limit", "cow"])
                           | st.text(max_size=8)), draw(hostile_texts)))
    elif action == "repeat" and pairs:
        pairs[index:index + 1] = [pairs[index]] * draw(st.sampled_from([2, 30, 300, 3000]))
    encoded = urllib.parse.urlencode(pairs, encoding="utf-8", errors="surrogatepass").encode()
    if draw(st.booleans()):
        encoded = draw(spliced(encoded, RAW_ESCAPES))
    return encoded.decode("latin-1")


# Half the requests at the route's version of the valid request.
junk_versions = st.sampled_from(
    [f"placement 1.{minor}" for minor in range(40)]
    + ["placement 1.40", "placement cow", "placement 1.", "placement 1.99999999999999999999",
       "placement \xff", "placement 1.2, compute 2.1", "placement 1.10.1", "latest", ""])
content_types = st.sampled_from(
    ["application/json"] * 8 + ["text/plain", "", "application/json; charset=latin-1",
                                "application/json;;", "\xff"])
# The first ones accept JSON; the oracle expects JSON error bodies for them.
JSON_ACCEPTS = [None, "application/json", "*/*", "application/*"]
accepts = st.sampled_from(JSON_ACCEPTS * 3 + ["text/html", "garbage;;q=x", "text/plain"])
providers = st.sampled_from([ROOT, ROOT, ROOT, CHILD, MISSING, ROOT.upper(), "not-a-uuid",
                             "%ff", "%00", "x" * 3000])
consumers = st.sampled_from([CONSUMER, CONSUMER, MISSING, CONSUMER.upper(), "not-a-uuid",
                             "%ff", "urn:uuid:" + CONSUMER])
classes = st.sampled_from(["VCPU", "DISK_GB", "MEMORY_MB", CUSTOM_CLASS, "CUSTOM_NEW", "cow",
                           "custom_fuzz_class", "%00"])
trait_names = st.sampled_from([CUSTOM_TRAIT, "CUSTOM_NEW", "HW_CPU_X86_SSE", "lower", "X" * 300,
                               "custom_fuzz_trait", "CUSTOM_%ff"])

_PUT_ALLOCATIONS_1_28 = {"allocations": {ROOT: {"resources": {"VCPU": 4}}},
                         "project_id": PROJECT, "user_id": USER, "consumer_generation": 1}
_RESHAPE = {
    "inventories": {ROOT: {"resource_provider_generation": 4, "inventories": {
        "DISK_GB": {"total": 100}}},
        CHILD: {"resource_provider_generation": 2, "inventories": {
            CUSTOM_CLASS: {"total": 4}, "VCPU": {"total": 8}}}},
    "allocations": {CONSUMER: {
        "allocations": {ROOT: {"resources": {"DISK_GB": 10}},
                        CHILD: {"resources": {"VCPU": 2, CUSTOM_CLASS: 1}}},
        "project_id": PROJECT, "user_id": USER, "consumer_generation": 1,
        "consumer_type": "INSTANCE"}}}

# (method, path template, [(microversion, body valid there, or None for no body)])
WRITE_ROUTES = [
    ("POST", "/resource_classes", [(LATEST, {"name": "CUSTOM_NEW"})]),
    ("PUT", "/resource_classes/{resource_class}", [("1.2", {"name": "CUSTOM_RENAMED"}),
                                                   (LATEST, None)]),
    ("DELETE", "/resource_classes/{resource_class}", [(LATEST, None)]),
    ("POST", "/resource_providers", [
        ("1.0", {"name": "new", "uuid": NEW_PROVIDER}),
        (LATEST, {"name": "new", "uuid": NEW_PROVIDER, "parent_provider_uuid": ROOT})]),
    ("PUT", "/resource_providers/{provider}", [
        ("1.0", {"name": "renamed"}),
        (LATEST, {"name": "renamed", "parent_provider_uuid": ROOT})]),
    ("DELETE", "/resource_providers/{provider}", [(LATEST, None)]),
    ("POST", "/resource_providers/{provider}/inventories", [(LATEST, {
        "resource_class": "MEMORY_MB", "total": 1024, "reserved": 0, "min_unit": 1,
        "max_unit": 1024, "step_size": 1, "allocation_ratio": 1.5})]),
    ("PUT", "/resource_providers/{provider}/inventories", [(LATEST, {
        "resource_provider_generation": 3,
        "inventories": {"VCPU": {"total": 16, "allocation_ratio": 2.0}}})]),
    ("DELETE", "/resource_providers/{provider}/inventories", [(LATEST, None)]),
    ("PUT", "/resource_providers/{provider}/inventories/{resource_class}", [(LATEST, {
        "resource_provider_generation": 3, "total": 32, "reserved": 1})]),
    ("DELETE", "/resource_providers/{provider}/inventories/{resource_class}",
     [(LATEST, None)]),
    ("PUT", "/resource_providers/{provider}/aggregates", [
        ("1.1", [AGGREGATE, OTHER_AGGREGATE]),
        (LATEST, {"resource_provider_generation": 3,
                  "aggregates": [AGGREGATE, "urn:uuid:" + OTHER_AGGREGATE]})]),
    ("PUT", "/resource_providers/{provider}/traits", [(LATEST, {
        "resource_provider_generation": 3, "traits": [CUSTOM_TRAIT, "HW_CPU_X86_SSE"]})]),
    ("DELETE", "/resource_providers/{provider}/traits", [(LATEST, None)]),
    ("PUT", "/traits/{trait}", [(LATEST, None)]),
    ("DELETE", "/traits/{trait}", [(LATEST, None)]),
    ("PUT", "/allocations/{consumer}", [
        ("1.0", {"allocations": [{"resource_provider": {"uuid": ROOT},
                                  "resources": {"VCPU": 4}}]}),
        ("1.12", {"allocations": {ROOT: {"resources": {"VCPU": 4}}},
                  "project_id": PROJECT, "user_id": USER}),
        ("1.28", _PUT_ALLOCATIONS_1_28),
        (LATEST, {**_PUT_ALLOCATIONS_1_28, "consumer_type": "INSTANCE"})]),
    ("DELETE", "/allocations/{consumer}", [(LATEST, None)]),
    ("POST", "/allocations", [(LATEST, {
        CONSUMER: {"allocations": {}, "project_id": PROJECT, "user_id": USER,
                   "consumer_generation": 1, "consumer_type": "INSTANCE"},
        NEW_CONSUMER: {"allocations": {ROOT: {"resources": {"VCPU": 2, "DISK_GB": 10}},
                                       CHILD: {"resources": {CUSTOM_CLASS: 1}}},
                       "project_id": PROJECT, "user_id": USER,
                       "consumer_generation": None, "consumer_type": "MIGRATION"}})]),
    ("POST", "/reshaper", [(LATEST, _RESHAPE)]),
]

# (path, [(microversion, query valid there as pairs)])
QUERY_ROUTES = [
    ("/allocation_candidates", [
        ("1.10", [("resources", "VCPU:1")]),
        ("1.17", [("resources", "VCPU:1,DISK_GB:10"), ("required", CUSTOM_TRAIT),
                  ("limit", "5")]),
        ("1.21", [("resources", "VCPU:1"), ("member_of", AGGREGATE)]),
        ("1.25", [("resources1", "VCPU:1"), ("resources2", f"{CUSTOM_CLASS}:1"),
                  ("group_policy", "isolate")]),
        ("1.31", [("resources", "VCPU:1"), ("in_tree", ROOT), ("member_of", f"in:{AGGREGATE}")]),
        ("1.36", [("resources_A", "VCPU:1"), ("resources_B", f"{CUSTOM_CLASS}:1"),
                  ("same_subtree", "_A,_B"), ("root_required", CUSTOM_TRAIT),
                  ("group_policy", "none")]),
        (LATEST, [("resources", "VCPU:1"), ("required", f"in:{CUSTOM_TRAIT},HW_CPU_X86_SSE"),
                  ("required", "!HW_CPU_X86_AVX"), ("member_of", f"!{OTHER_AGGREGATE}")]),
    ]),
    ("/resource_providers", [
        ("1.0", [("name", "root"), ("uuid", ROOT)]),
        ("1.4", [("member_of", AGGREGATE), ("resources", "VCPU:1")]),
        ("1.18", [("in_tree", ROOT), ("required", CUSTOM_TRAIT)]),
        (LATEST, [("required", f"in:{CUSTOM_TRAIT},HW_CPU_X86_SSE"), ("required", "!CUSTOM_X"),
                  ("member_of", f"in:{AGGREGATE},{OTHER_AGGREGATE}")]),
    ]),
]


def _filled(template: str, values: dict) -> str:
    return (template.replace("{provider}", values["provider"])
            .replace("{consumer}", values["consumer"])
            .replace("{resource_class}", values["resource_class"])
            .replace("{trait}", urllib.parse.quote(values["trait"], safe="%")))


def _headers(data, version: str, with_body: bool) -> dict:
    headers = {"OpenStack-API-Version": data.draw(
        st.just(f"placement {version}") | junk_versions)}
    accept = data.draw(accepts)
    if accept is not None:
        headers["Accept"] = accept
    content_type = data.draw(content_types) if with_body else ""
    if content_type:
        headers["Content-Type"] = content_type
    return headers


def _check(response: webob.Response, headers: dict, what: tuple) -> None:
    """The first two oracles: no server error, JSON errors for JSON clients."""
    event(f"status {response.status_int}")  # see --hypothesis-show-statistics
    assert response.status_int < 500, (*what, headers, response.text)
    if response.status_int >= 400 and headers.get("Accept") in JSON_ACCEPTS:
        assert response.content_type == "application/json", (*what, response.text)
        error = response.json["errors"][0]
        assert error["status"] == response.status_int, (*what, response.text)
        assert error["title"] and isinstance(error["detail"], str), (*what, response.text)


SETTINGS = settings(
    max_examples=EXAMPLES_PER_ROUTE, deadline=None, derandomize=IN_CI, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large])


@pytest.mark.parametrize("method,template,valid_requests", WRITE_ROUTES,
                         ids=[f"{m} {t}" for m, t, _ in WRITE_ROUTES])
@SETTINGS
@given(data=st.data())
def test_writes_never_fail_on_the_server_and_rejections_change_nothing(
        worlds, backend, method, template, valid_requests, data):
    world = worlds.of(backend)
    version, valid = data.draw(st.sampled_from(valid_requests))
    values = {"provider": data.draw(providers), "resource_class": data.draw(classes),
              "trait": data.draw(trait_names), "consumer": data.draw(consumers)}
    body = data.draw(bodies(valid) if valid is not None else st.none() | st.binary(max_size=20))
    headers = _headers(data, version, body is not None)
    path = _filled(template, values)
    query = data.draw(st.just("") | queries([("cow", "1")]))

    response = world.request(method, path, query, body, headers)

    world.count(response)
    _check(response, headers, (method, path, query, body))
    if response.status_int >= 400:
        assert world.snapshot() == world.state, (method, path, headers, body, response.text)
    else:
        world.fresh()


@pytest.mark.parametrize("path,valid_queries", QUERY_ROUTES, ids=[p for p, _ in QUERY_ROUTES])
@SETTINGS
@given(data=st.data())
def test_queries_never_fail_on_the_server(worlds, backend, path, valid_queries, data):
    world = worlds.of(backend)
    version, valid = data.draw(st.sampled_from(valid_queries))
    query = data.draw(queries(valid))
    headers = _headers(data, version, with_body=False)

    response = world.request("GET", path, query, headers=headers)

    world.count(response)
    _check(response, headers, ("GET", path, query))


# Any request at all: known and unknown paths and methods, any token or
# none, bodies small, absent or past the size limit (declared or not).
any_paths = st.sampled_from([
    "/", "/nowhere", "/resource_providers", f"/resource_providers/{ROOT}",
    f"/resource_providers/{ROOT}/inventories/VCPU", "/allocations", f"/allocations/{CONSUMER}",
    "/traits/CUSTOM_X", "/usages", "/reshaper", "/allocation_candidates", "/openapi.json",
    "/healthcheck/more", "//", "/resource_providers/%ff", "/resource_classes/" + "x" * 300,
]) | st.text(max_size=20).map(lambda text: "/" + urllib.parse.quote(text))
any_methods = st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE",
                               "COW"])
any_tokens = st.sampled_from([None, "", "admin", "mere-user", "admin:project", "\xff"])
LIMIT = 1024 * 1024
any_bodies = st.sampled_from([None, None, b"{}", b"{}", b" " * (LIMIT + 1)]) | st.binary(
    max_size=40)


# Cheap requests (a world is rebuilt only after the few accepted ones).
@settings(SETTINGS, max_examples=4 * EXAMPLES_PER_ROUTE)
@given(data=st.data())
def test_every_error_of_any_request_is_a_json_error(worlds, backend, data):
    """The second oracle on requests of every layer's making: 401 (no or
    empty token), 403, 404 and 405 of routing, 406, 413 (the body size
    limit, by Content-Length or by reading), 415."""
    world = worlds.of(backend)
    method, path, body = data.draw(any_methods), data.draw(any_paths), data.draw(any_bodies)
    headers = _headers(data, data.draw(st.sampled_from(["1.0", "1.22", "1.23", LATEST])),
                       body is not None)
    token = data.draw(any_tokens)
    if token is not None:
        headers["X-Auth-Token"] = token
    request = webob.Request.blank(path, method=method, headers=headers)
    if body is not None:
        request.body = body
    if data.draw(st.integers(0, 9)) == 0:
        request.environ["CONTENT_LENGTH"] = str(LIMIT + data.draw(st.integers(1, 10**9)))

    response = request.get_response(world.application)

    world.count(response)
    _check(response, headers, (method, path))
    if response.status_int >= 400:
        assert world.snapshot() == world.state, (method, path, headers, response.text)
    else:
        world.fresh()


def test_reshaper_refuses_records_under_keys_that_are_no_class(worlds, backend):
    """Found by the fuzzing: such keys escape the schema (patternProperties
    only) and once made a 500."""
    world = worlds.of(backend)
    body = {"inventories": {ROOT: {"resource_provider_generation": 4,
                                   "inventories": {"Infinity": [], "VCPU": {"total": 8}}}},
            "allocations": {}}
    response = world.request("POST", "/reshaper", body=json.dumps(body).encode(), headers={
        "Content-Type": "application/json", "OpenStack-API-Version": "placement latest"})
    assert response.status_int == 400, response.text
    assert "malformed reshaper data: No such resource class Infinity." in response.text
    assert world.snapshot() == world.state
