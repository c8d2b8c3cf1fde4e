"""The capacity gauges of GET /metrics (``[capacity] resource_gauges``), on
every backend: what they say of the whole cloud and of each aggregate is
what the API's per-provider inventories, usages and aggregates add up to
(worked out here from those routes, not from the service's own sums)."""

from __future__ import annotations

import types
import uuid
from collections import defaultdict

import pytest
import sqlalchemy as sa

from placement.db import api as db_api
from tests import db as test_db
from tests.fixtures import ops
from tests.fixtures.base import build_app
from tests.fixtures.metrics import scrape
from tests.fixtures.provider_api import ProviderApi, in_process

GAUGES = ("placement_capacity_total", "placement_capacity_used", "placement_capacity_free")
AGG_BIG, AGG_SMALL = str(uuid.uuid4()), str(uuid.uuid4())


def _app(database, **capacity):
    overrides = {("metrics", "enabled"): True,
                 **{("capacity", name): value for name, value in capacity.items()}}
    return build_app(database, overrides)


def _aggregates(api: ProviderApi, provider: str, *aggregates: str) -> None:
    api.call("PUT", f"/resource_providers/{provider}/aggregates", {
        "resource_provider_generation": api.generation(provider),
        "aggregates": list(aggregates)})


def seed_cloud(api: ProviderApi) -> None:
    """Computes in two aggregates (one in both), a nested tree whose root
    only is in an aggregate, a sharing disk, claims, and an inventory
    shrunk below its usage."""
    computes = [api.provider(f"cn{index}", VCPU=8, MEMORY_MB=4096) for index in range(3)]
    api.call("PUT", f"/resource_providers/{computes[0]}/inventories", {
        "resource_provider_generation": api.generation(computes[0]),
        "inventories": {"VCPU": {"total": 8, "reserved": 2, "allocation_ratio": 4.0},
                        "MEMORY_MB": {"total": 4096, "reserved": 512,
                                      "allocation_ratio": 1.5}}})
    _aggregates(api, computes[0], AGG_BIG)
    _aggregates(api, computes[1], AGG_BIG, AGG_SMALL)
    root = api.provider("nested", DISK_GB=100)
    numa = api.provider("nested-numa", parent=root, VCPU=4)
    _aggregates(api, root, AGG_BIG)
    disk = api.provider("shared-disk", DISK_GB=1000)
    _aggregates(api, disk, AGG_SMALL)
    api.claim(str(uuid.uuid4()), computes[0], VCPU=10, MEMORY_MB=1024)
    api.claim(str(uuid.uuid4()), computes[1], VCPU=6)
    api.claim(str(uuid.uuid4()), numa, VCPU=3)
    api.claim(str(uuid.uuid4()), disk, DISK_GB=100)
    # cn2's VCPU over-committed: 6 used of a capacity shrunk to 4
    api.claim(str(uuid.uuid4()), computes[2], VCPU=6)
    api.call("PUT", f"/resource_providers/{computes[2]}/inventories/VCPU", {
        "resource_provider_generation": api.generation(computes[2]), "total": 4})


def expected_gauges(api: ProviderApi) -> dict[tuple[str, str, str], float]:
    """(gauge, resource class, aggregate) -> value, from the per-provider
    routes: a provider counts in its own aggregates and its root's."""
    providers = api.call("GET", "/resource_providers")["resource_providers"]
    aggregates = {provider["uuid"]: set(api.call(
        "GET", f"/resource_providers/{provider['uuid']}/aggregates")["aggregates"])
        for provider in providers}
    values: dict[tuple[str, str, str], float] = defaultdict(float)
    for provider in providers:
        base = f"/resource_providers/{provider['uuid']}"
        usages = api.call("GET", base + "/usages")["usages"]
        labels = {"", *aggregates[provider["uuid"]],
                  *aggregates[provider["root_provider_uuid"]]}
        for name, inventory in api.call("GET", base + "/inventories")["inventories"].items():
            capacity = int((inventory["total"] - inventory["reserved"])
                           * inventory["allocation_ratio"])
            for label in labels:
                values["placement_capacity_total", name, label] += capacity
                values["placement_capacity_used", name, label] += usages[name]
                values["placement_capacity_free", name, label] += max(
                    0, capacity - usages[name])
    return dict(values)


def capacity_samples(samples: dict) -> dict[tuple[str, str, str], float]:
    """The capacity gauges of a parsed scrape, as ``expected_gauges`` keys them."""
    found = {}
    for (name, labels), value in samples.items():
        if name in GAUGES:
            labels = dict(labels)
            assert set(labels) == {"resource_class", "aggregate"}
            found[name, labels["resource_class"], labels["aggregate"]] = value
    return found


def test_the_cloud_and_each_aggregate_add_up(database):
    app = _app(database)
    api = ProviderApi(in_process(app))
    seed_cloud(api)
    expected = expected_gauges(api)
    assert capacity_samples(scrape(app)) == expected
    # spot checks of the sums themselves
    # cn0 (8 - 2) * 4, cn1 8, cn2 shrunk to 4, the NUMA node 4
    assert expected["placement_capacity_total", "VCPU", ""] == 24 + 8 + 4 + 4
    assert expected["placement_capacity_free", "VCPU", ""] == 14 + 2 + 0 + 1
    assert expected["placement_capacity_used", "VCPU", AGG_BIG] == 10 + 6 + 3
    assert ("placement_capacity_total", "DISK_GB", AGG_BIG) in expected  # the root's disk
    # a claim moves used and free at the next scrape
    cn1 = next(provider["uuid"] for provider in api.call(
        "GET", "/resource_providers?name=cn1")["resource_providers"])
    api.claim(str(uuid.uuid4()), cn1, VCPU=2)
    after = capacity_samples(scrape(app))
    assert after["placement_capacity_used", "VCPU", AGG_SMALL] == 8
    assert after["placement_capacity_free", "VCPU", ""] == expected[
        "placement_capacity_free", "VCPU", ""] - 2
    assert after == expected_gauges(api)
    # and a new inventory moves the capacities
    api.call("PUT", f"/resource_providers/{cn1}/inventories/VCPU", {
        "resource_provider_generation": api.generation(cn1), "total": 16})
    moved = capacity_samples(scrape(app))
    assert moved["placement_capacity_total", "VCPU", AGG_SMALL] == 16
    assert moved == expected_gauges(api)


@pytest.mark.parametrize("limit, aggregates", [(0, {""}), (1, {"", AGG_BIG}),
                                                (5, {"", AGG_BIG, AGG_SMALL})])
def test_aggregates_beyond_the_limit_have_no_series(database, limit, aggregates):
    app = _app(database, aggregate_gauges_limit=limit)
    api = ProviderApi(in_process(app))
    seed_cloud(api)
    expected = {key: value for key, value in expected_gauges(api).items()
                if key[2] in aggregates}
    assert capacity_samples(scrape(app)) == expected


def test_off_when_configured(database):
    app = _app(database, resource_gauges=False)
    seed_cloud(ProviderApi(in_process(app)))
    samples = scrape(app)
    assert capacity_samples(samples) == {}
    assert any(name.startswith("placement_http_requests") for name, _ in samples)


def test_left_out_while_the_database_cannot_be_reached(server_backend):
    """A scrape still answers, with the other metrics, when the capacity
    cannot be read (the run's database server, at a port nobody listens on)."""
    url = sa.engine.make_url(test_db.SERVER_URLS[server_backend]).set(
        port=ops.free_port(), database="placement").render_as_string(hide_password=False)
    db = db_api.Database(db_api.create_engine(url), max_retries=1)
    try:
        app = build_app(types.SimpleNamespace(url=url, db=db), {("metrics", "enabled"): True})
        samples = scrape(app)
    finally:
        db.dispose()
    assert capacity_samples(samples) == {}
    assert any(name.startswith("placement_") for name, _ in samples)
