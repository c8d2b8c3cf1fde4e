"""Prometheus metrics (``[metrics] enabled``): what the application counts,
read back from ``GET /metrics`` (in-process, on every backend), and a uwsgi
server of two worker processes in prometheus_client's multi-process mode,
whose every scrape adds up the requests both workers served.

The metrics of a process are the process's (prometheus_client keeps them
globally): the in-process tests compare values before and after what
they do.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import sys
import uuid

import pytest
import sqlalchemy as sa
import webob
from oslo_db import exception as db_exc

from placement.db import api as db_api
from placement.db import migration, tables
from placement.objects import allocation as allocation_obj
from tests.fixtures import ops
from tests.fixtures.base import build_app
from tests.fixtures.metrics import Changes, parse, scrape, value
from tests.fixtures.provider_api import PROJECT, ProviderApi, in_process, over_http
from tests.functional.test_capacity_gauges import capacity_samples, expected_gauges, seed_cloud

ENABLED = {("metrics", "enabled"): True}
VERSION = "placement 1.39"

def send(app, method: str, path: str, body: object = None, token: str | None = "admin"
         ) -> webob.Response:
    headers = {"OpenStack-API-Version": VERSION, "Accept": "application/json"}
    if token:
        headers["X-Auth-Token"] = token
    request = webob.Request.blank(path, method=method, headers=headers)
    if body is not None:
        request.body = json.dumps(body).encode()
        request.content_type = "application/json"
    return request.get_response(app)


@pytest.fixture
def app(database):
    return build_app(database, ENABLED)


def test_requests_by_route_template_method_and_status(app):
    api = ProviderApi(in_process(app))
    with Changes(app) as changes:
        provider = api.provider("cn1")
        assert send(app, "GET", f"/resource_providers/{provider}").status_int == 200
        for _ in range(2):
            missing = str(uuid.uuid4())
            assert send(app, "GET", f"/resource_providers/{missing}").status_int == 404
        assert send(app, "GET", "/no/such/path").status_int == 404
        assert send(app, "PATCH", "/traits").status_int == 405
        assert send(app, "BREW", "/traits").status_int == 405
        assert send(app, "GET", "/resource_providers", token=None).status_int == 401
    requests = "placement_http_requests_total"
    one_provider = "/resource_providers/{uuid}"
    assert changes(requests, route="/resource_providers", method="POST", status="200") == 1
    assert changes(requests, route=one_provider, method="GET", status="200") == 1
    assert changes(requests, route=one_provider, method="GET", status="404") == 2
    assert changes(requests, route="unmatched", method="GET", status="404") == 1
    assert changes(requests, route="/traits", method="PATCH", status="405") == 1
    assert changes(requests, route="/traits", method="other", status="405") == 1
    # answered by authentication, before the dispatcher
    assert changes(requests, route="/resource_providers", method="GET", status="401") == 1
    latency = "placement_http_request_duration_seconds_count"
    assert changes(latency, route=one_provider, method="GET") == 3
    assert changes("placement_http_request_duration_seconds_bucket", route=one_provider,
                   method="GET", le="+Inf") == 3
    assert changes("placement_http_request_duration_seconds_sum", route=one_provider,
                   method="GET") > 0


def test_served_without_credentials_before_authentication(database):
    app = build_app(database, {**ENABLED, ("api", "auth_strategy"): "keystone"})
    response = webob.Request.blank("/metrics").get_response(app)
    assert response.status_int == 200
    assert response.content_type == "text/plain"
    assert "# TYPE placement_http_requests_total counter" in response.text
    response = webob.Request.blank("/metrics", method="POST").get_response(app)
    assert response.status_int == 405
    assert response.headers["Allow"] == "GET, HEAD"


def test_off_by_default(database):
    app = build_app(database)
    enabled_app = build_app(database, ENABLED)
    missing = str(uuid.uuid4())
    with Changes(enabled_app) as changes:
        assert send(app, "GET", "/metrics").status_int == 404
        assert send(app, "GET", f"/resource_providers/{missing}").status_int == 404
    assert changes("placement_http_requests_total", route="/resource_providers/{uuid}",
                   method="GET", status="404") == 0
    assert changes("placement_http_requests_total", route="unmatched",
                   method="GET", status="404") == 0


def claim(app, consumer: str, provider: str, vcpus: int,
          generation: int | None = None) -> webob.Response:
    return send(app, "PUT", f"/allocations/{consumer}", {
        "allocations": {provider: {"resources": {"VCPU": vcpus}}},
        "consumer_generation": generation, "consumer_type": "INSTANCE", **PROJECT})


def test_claim_conflicts_by_error_code(app):
    api = ProviderApi(in_process(app))
    provider = api.provider("cn1", VCPU=4)
    consumer = str(uuid.uuid4())
    with Changes(app) as changes:
        assert claim(app, consumer, provider, 8).status_int == 409  # over capacity
        assert claim(app, consumer, provider, 1).status_int == 204
        assert claim(app, consumer, provider, 2, generation=7).status_int == 409
        assert send(app, "POST", "/allocations", {str(uuid.uuid4()): {
            "allocations": {provider: {"resources": {"VCPU": 9}}},
            "consumer_generation": None, "consumer_type": "INSTANCE", **PROJECT},
        }).status_int == 409
        # a 409 of another route is no claim conflict
        assert send(app, "POST", "/resource_providers", {"name": "cn1"}).status_int == 409
    conflicts = "placement_claim_conflicts_total"
    assert changes(conflicts, code="placement.undefined_code") == 2
    assert changes(conflicts, code="placement.concurrent_update") == 1
    assert changes(conflicts, code="placement.duplicate_name") == 0


def test_allocation_candidates_returned(app):
    api = ProviderApi(in_process(app))
    for name in ("cn1", "cn2", "cn3"):
        api.provider(name, VCPU=4)
    with Changes(app) as changes:
        assert len(api.candidates("resources=VCPU:1")["allocation_requests"]) == 3
        assert api.candidates("resources=VCPU:8")["allocation_requests"] == []
        assert len(api.candidates("resources=VCPU:1&limit=2")["allocation_requests"]) == 2
    returned = "placement_allocation_candidates_returned"
    assert changes(returned + "_count") == 3
    assert changes(returned + "_sum") == 5
    assert changes(returned + "_bucket", le="0.0") == 1
    assert changes(returned + "_bucket", le="1.0") == 1
    assert changes(returned + "_bucket", le="5.0") == 3


def test_provider_copy_reloads_and_refreshes(app):
    """The first search of a process loads every provider; after a change
    the next one reads the changed provider only; without changes none."""
    api = ProviderApi(in_process(app))
    providers = [api.provider(f"cn{index}", VCPU=4) for index in range(3)]
    with Changes(app) as changes:
        api.candidates("resources=VCPU:1")
        api.inventories(providers[0], VCPU=8)
        assert len(api.candidates("resources=VCPU:6")["allocation_requests"]) == 1
        api.candidates("resources=VCPU:6")
    refreshes = "placement_provider_cache_refreshes_total"
    loaded = "placement_provider_cache_providers_loaded_total"
    assert changes(refreshes, kind="full") == 1
    assert changes(loaded, kind="full") == 3
    assert changes(refreshes, kind="incremental") == 1
    assert changes(loaded, kind="incremental") == 1


def test_kept_answers_given_stale_or_none(app):
    """An answer is kept once its kind was asked before: the third of
    three same requests is given the second's answer; a claim on a
    provider of it makes the kept answer stale."""
    api = ProviderApi(in_process(app))
    providers = [api.provider(f"cn{index}", VCPU=4) for index in range(2)]
    kept = "placement_allocation_candidates_kept_answers_total"
    with Changes(app) as changes:
        first = api.candidates("resources=VCPU:1")
        assert api.candidates("resources=VCPU:1") == first
        assert api.candidates("resources=VCPU:1") == first
        api.claim(str(uuid.uuid4()), providers[0], VCPU=4)
        assert len(api.candidates("resources=VCPU:1")["allocation_requests"]) == 1
    assert changes(kept, outcome="none") == 2
    assert changes(kept, outcome="given") == 1
    assert changes(kept, outcome="stale") == 1


def test_kept_provider_lists_given_stale_or_none(app):
    """The second of two same lists asking for capacity is given the
    first's; a claim makes the kept list stale."""
    api = ProviderApi(in_process(app))
    providers = [api.provider(f"cn{index}", VCPU=4) for index in range(2)]
    kept = "placement_provider_lists_kept_answers_total"
    path = "/resource_providers?resources=VCPU:1"
    with Changes(app) as changes:
        first = api.call("GET", path)
        assert api.call("GET", path) == first
        api.claim(str(uuid.uuid4()), providers[0], VCPU=4)
        assert len(api.call("GET", path)["resource_providers"]) == 1
        api.call("GET", "/resource_providers")  # without resources: never kept
    assert changes(kept, outcome="none") == 1
    assert changes(kept, outcome="given") == 1
    assert changes(kept, outcome="stale") == 1


def test_database_errors_by_kind(app, database):
    with Changes(app) as changes:
        with pytest.raises(db_exc.DBDuplicateEntry):
            with database.db.writer() as connection:
                connection.execute(sa.insert(tables.traits).values(name="HW_CPU_X86_AVX2"))
        with pytest.raises(db_exc.DBReferenceError):
            with database.db.writer() as connection:
                connection.execute(sa.insert(tables.resource_provider_traits).values(
                    trait_id=-1, resource_provider_id=-1))
    assert changes("placement_db_errors_total", kind="DBDuplicateEntry") == 1
    assert changes("placement_db_errors_total", kind="DBReferenceError") == 1


def test_retries_by_reason(app, database, monkeypatch):
    """Transactions run again after a deadlock or a lost connection (the
    retries of placement.db.api), and allocation writes after a lost
    provider generation race (placement.objects.allocation)."""
    db = database.db
    failures = [db_exc.DBDeadlock(), db_exc.DBConnectionError(), db_exc.DBDeadlock()]

    def read_after_failures() -> int:
        if failures:
            raise failures.pop(0)
        with db.reader() as connection:
            return connection.scalar(sa.select(sa.literal(1)))

    api = ProviderApi(in_process(app))
    provider = api.provider("cn1", VCPU=4)
    real_attempt = allocation_obj._attempt
    races = [allocation_obj.ProviderGenerationRace()]

    def losing_first(db, requests):
        if races:
            raise races.pop()
        return real_attempt(db, requests)

    monkeypatch.setattr(allocation_obj, "_attempt", losing_first)
    with Changes(app) as changes:
        assert db.retry_on_db_error(read_after_failures)() == 1
        assert claim(app, str(uuid.uuid4()), provider, 1).status_int == 204
    retries = "placement_db_retries_total"
    assert changes(retries, reason="deadlock") == 2
    assert changes(retries, reason="disconnect") == 1
    assert changes(retries, reason="generation_conflict") == 1
    assert api.call("GET", f"/resource_providers/{provider}/usages")["usages"] == {"VCPU": 1}


def test_capacity_free_slots_of_the_configured_shapes(database):
    app = build_app(database, {**ENABLED, ("capacity", "shapes"): [
        "small=resources=VCPU:1", "large=resources=VCPU:4&required=CUSTOM_GOLD"]})
    api = ProviderApi(in_process(app))
    cn1 = api.provider("cn1", VCPU=8)
    api.provider("cn2", VCPU=4)
    api.claim(str(uuid.uuid4()), cn1, VCPU=3)
    samples = scrape(app)
    assert value(samples, "placement_capacity_free_slots", shape="small") == 9
    assert value(samples, "placement_capacity_free_slots", shape="large") == 0
    assert value(samples, "placement_capacity_free_slots_exact", shape="small") == 1
    assert value(samples, "placement_capacity_stale_shapes") == 0
    assert api.call("GET", "/capacity?resources=VCPU:1")["total"] == 9
    api.claim(str(uuid.uuid4()), cn1, VCPU=2)
    assert value(scrape(app), "placement_capacity_free_slots", shape="small") == 7


def test_a_scrape_within_its_cpu_budget_gives_earlier_values(database):
    """A budget spent at once: each scrape counts one shape (the budget is
    looked at before each), the one the last scrape left first."""
    app = build_app(database, {**ENABLED, ("capacity", "scrape_cpu_seconds"): 1e-9,
                               ("capacity", "shapes"): ["a=resources=VCPU:1",
                                                        "b=resources=VCPU:2"]})
    api = ProviderApi(in_process(app))
    api.provider("cn1", VCPU=8)
    first = scrape(app)
    assert value(first, "placement_capacity_stale_shapes") == 1
    assert value(first, "placement_capacity_free_slots", shape="a") == 8
    second = scrape(app)
    assert value(second, "placement_capacity_free_slots", shape="b") == 4
    assert value(second, "placement_capacity_free_slots", shape="a") == 8


def test_a_bad_shape_stops_the_service(database):
    with pytest.raises(ValueError, match="bad=resources=VCPU"):
        build_app(database, {**ENABLED, ("capacity", "shapes"): ["bad=resources=VCPU"]})


# -- Two uwsgi worker processes ------------------------------------------------

WORKERS = 2
REQUESTS = 24


@pytest.fixture(params=["recipe, option", "recipe, environment", "forked, option"])
def uwsgi_with_metrics(request, tmp_path):
    """Two uwsgi worker processes with metrics enabled: the README's recipe
    (each worker builds its application), or workers forked from the
    master that built it; the metrics directory named by ``[metrics]
    multiprocess_dir`` or by PROMETHEUS_MULTIPROC_DIR. Yields the server,
    the directory and how many processes built the application."""
    assert ops.UWSGI, "uwsgi is part of the test extra: pip install -e '.[test]'"
    workers, directory_from = request.param.split(", ")
    database_path = tmp_path / "placement.sqlite"
    engine = db_api.create_engine(f"sqlite:///{database_path}")
    migration.upgrade(engine)
    engine.dispose()
    directory = tmp_path / "metrics"
    port = ops.free_port()
    # (options after the recipe's override its own)
    command = [ops.UWSGI, *(["--ini", ops.UWSGI_RECIPE] if workers == "recipe" else
                            ["--master", "--module", "placement.wsgi:application",
                             "--die-on-term"]),
               "--http-socket", f"127.0.0.1:{port}", "--processes", str(WORKERS),
               "--threads", "2", "--virtualenv", sys.prefix, "--pythonpath", ops.REPO_ROOT]
    env = {"OS_PLACEMENT_CONFIG_DIR": str(tmp_path),
           "OS_PLACEMENT_DATABASE__CONNECTION": f"sqlite:///{database_path}",
           "OS_API__AUTH_STRATEGY": "noauth2",
           "OS_METRICS__ENABLED": "True"}
    # counted by whichever worker answers the scrape, never summed (a file:
    # oslo.config reads a multi-valued option's variable as characters)
    (tmp_path / "placement.conf").write_text("[capacity]\nshapes = one=resources=VCPU:1\n")
    if directory_from == "option":
        env["OS_METRICS__MULTIPROCESS_DIR"] = str(directory)
    else:
        directory.mkdir()
        env["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    with ops.Server(command, port, env=env, cwd=ops.REPO_ROOT) as server:
        server.wait_for_output("WSGI app 0 (mountpoint='') ready",
                               count=WORKERS if workers == "recipe" else 1)
        server.wait_for_output(f"spawned uWSGI worker {WORKERS}")
        yield server, directory, WORKERS if workers == "recipe" else 1
    assert "Traceback" not in server.output(), server.output()


def test_a_scrape_of_either_worker_counts_the_requests_of_both(uwsgi_with_metrics):
    server, directory, builders = uwsgi_with_metrics
    headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": VERSION}
    status, _, body = ops.request(server.url + "/resource_providers", method="POST",
                                  headers=headers, body={"name": "cn1"})
    assert status == 200, body
    provider = json.loads(body)["uuid"]
    status, _, body = ops.request(
        server.url + f"/resource_providers/{provider}/inventories", method="PUT",
        headers=headers, body={"resource_provider_generation": 0,
                               "inventories": {"VCPU": {"total": 4}}})
    assert status == 200, body

    def fetch(number: int) -> int:
        path = (f"/resource_providers/{provider}" if number % 2
                else "/allocation_candidates?resources=VCPU:1")
        return ops.request(server.url + path, headers=headers)[0]

    # Whichever worker accepts first takes a connection: on a busy machine
    # one worker can take a whole round, so rounds go on (a bounded number)
    # until both have served.
    sent = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(10):
            assert list(pool.map(fetch, range(REQUESTS))) == [200] * REQUESTS
            sent += REQUESTS
            if len(ops.uwsgi_serving_pids(server.output())) == WORKERS:
                break
    # Both workers served and wrote their values to the directory, and so
    # did a master that built the application (it read the provider copy).
    assert len(ops.uwsgi_serving_pids(server.output())) == WORKERS, server.output()
    assert len({name.rsplit("_", 1)[1] for name in os.listdir(directory)
                if name.startswith("counter_")}) == (WORKERS if builders == WORKERS
                                                     else WORKERS + 1)
    for _ in range(4):  # whichever worker answers the scrape
        status, headers_seen, body = ops.request(server.url + "/metrics")
        assert status == 200
        assert headers_seen["content-type"].startswith("text/plain")
        samples = parse(body.decode())
        requests = "placement_http_requests_total"
        assert value(samples, requests, route="/resource_providers", method="POST",
                     status="200") == 1
        assert value(samples, requests, route="/resource_providers/{uuid}", method="GET",
                     status="200") == sent / 2
        assert value(samples, requests, route="/allocation_candidates", method="GET",
                     status="200") == sent / 2
        assert value(samples, "placement_http_request_duration_seconds_count",
                     route="/resource_providers/{uuid}", method="GET") == sent / 2
        assert value(samples, "placement_allocation_candidates_returned_count") == sent / 2
        assert value(samples, "placement_capacity_free_slots", shape="one") == 4
        # each process that built the application loaded the copy once, at
        # start-up; the workers that searched then read only the provider
        # created since
        assert value(samples, "placement_provider_cache_refreshes_total",
                     kind="full") == builders
        assert 1 <= value(samples, "placement_provider_cache_refreshes_total",
                          kind="incremental") <= WORKERS


@pytest.mark.parametrize("uwsgi_with_metrics", ["recipe, option"], indirect=True)
def test_capacity_gauges_say_the_cloud_once_whichever_worker_answers(uwsgi_with_metrics):
    """Each worker works the gauges out from its own provider copy at the
    scrape it answers; nothing of them is in the multi-process files, so
    two workers do not count the cloud twice."""
    server, directory, _ = uwsgi_with_metrics
    api = ProviderApi(over_http(server.url))
    seed_cloud(api)
    expected = expected_gauges(api)
    assert expected

    def capacity(_: int) -> dict:
        status, _, body = ops.request(server.url + "/metrics")
        assert status == 200
        return capacity_samples(parse(body.decode()))

    scrapes_by = re.compile(r"^\S+ \S+ (\d+) \w+ placement\.middleware .*GET /metrics ",
                            re.MULTILINE)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(10):  # rounds until both workers answered scrapes
            assert list(pool.map(capacity, range(12))) == [expected] * 12
            if len(set(scrapes_by.findall(server.output()))) == WORKERS:
                break
    assert len(set(scrapes_by.findall(server.output()))) == WORKERS, server.output()
    assert not any("capacity" in name for name in os.listdir(directory))
