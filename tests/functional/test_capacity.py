"""GET /capacity on small clouds whose answers can be counted by hand:
exact counts per root and their binding class, nested trees, sharing
providers (a stated lower bound), aggregates, drains and who may ask."""

from __future__ import annotations

import uuid

import jsonschema
import pytest
import webob

from placement import openapi, router, versions
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import PROJECT, ProviderApi, in_process

AGGREGATE = str(uuid.uuid4())


@pytest.fixture
def cloud(database):
    """cn1 (VCPU 8, MEMORY_MB 4096, 2 VCPU used), cn2 (VCPU 4, MEMORY_MB
    8192) in AGGREGATE, and cn3 with two NUMA children (VCPU 4, MEMORY_MB
    2048 each)."""
    api = ProviderApi(in_process(build_app(database)))
    cn1 = api.provider("cn1", VCPU=8, MEMORY_MB=4096)
    cn2 = api.provider("cn2", VCPU=4, MEMORY_MB=8192)
    cn3 = api.provider("cn3")
    api.provider("cn3-numa0", cn3, VCPU=4, MEMORY_MB=2048)
    api.provider("cn3-numa1", cn3, VCPU=4, MEMORY_MB=2048)
    api.claim(str(uuid.uuid4()), cn1, VCPU=2, MEMORY_MB=1024)
    api.call("PUT", f"/resource_providers/{cn2}/aggregates", {
        "aggregates": [AGGREGATE], "resource_provider_generation": api.generation(cn2)})
    return api, {"cn1": cn1, "cn2": cn2, "cn3": cn3}


def _counts(answer: dict) -> dict[str, tuple[int, str]]:
    return {root["uuid"]: (root["count"], root["binding"]) for root in answer["roots"]}


def test_each_root_counts_its_scarcest_class(cloud):
    api, roots = cloud
    answer = api.call("GET", "/capacity?resources=VCPU:2,MEMORY_MB:1024&group_by=aggregate")
    # cn1: VCPU 6 left (3), MEMORY_MB 3072 (3); cn2: VCPU 2, MEMORY_MB 8;
    # cn3: VCPU from either NUMA node, 4 in all, MEMORY_MB 4
    assert _counts(answer) == {roots["cn1"]: (3, "VCPU"), roots["cn2"]: (2, "VCPU"),
                               roots["cn3"]: (4, "VCPU")}
    assert answer["total"] == 9 and answer["exact"] is True
    assert answer["aggregates"] == {AGGREGATE: 2}
    assert answer["binding"] == {"VCPU": 3}
    limited = api.call("GET", "/capacity?resources=VCPU:2,MEMORY_MB:1024&limit=1")
    assert [root["uuid"] for root in limited["roots"]] == [roots["cn3"]]
    assert limited["total"] == 9 and limited["roots_counted"] == 3


def test_granular_groups_count_by_simulated_claims(cloud):
    api, roots = cloud
    answer = api.call("GET", "/capacity?resources1=VCPU:1&resources2=VCPU:1"
                             "&group_policy=isolate")
    # only cn3 has two providers to isolate the groups on: 4 + 4 VCPU
    assert answer["exact"] is False
    assert _counts(answer)[roots["cn3"]] == (4, "VCPU")
    assert answer["total"] == 4


def test_a_sharing_provider_is_counted_by_simulated_claims(database):
    api = ProviderApi(in_process(build_app(database)))
    computes = [api.provider(f"cn{index}", VCPU=4) for index in range(2)]
    disk = api.provider("disk", DISK_GB=30)
    api.traits(disk, "MISC_SHARES_VIA_AGGREGATE")
    for provider in [*computes, disk]:
        api.call("PUT", f"/resource_providers/{provider}/aggregates", {
            "aggregates": [AGGREGATE],
            "resource_provider_generation": api.generation(provider)})
    answer = api.call("GET", "/capacity?resources=VCPU:1,DISK_GB:10")
    # the disk runs out first: 3 instances, on the first compute's VCPU
    assert answer["exact"] is False
    assert answer["total"] == 3
    assert _counts(answer) == {computes[0]: (3, "DISK_GB"), computes[1]: (0, "DISK_GB")}


def test_a_drain_counts_without_the_tree_and_places_its_consumers(cloud):
    api, roots = cloud
    usages_before = api.call("GET", f"/resource_providers/{roots['cn1']}/usages")
    answer = api.call("GET", "/capacity?resources=VCPU:2,MEMORY_MB:1024"
                             f"&drain_provider={roots['cn1']}")
    assert roots["cn1"] not in _counts(answer)
    assert answer["total"] == 6
    assert answer["drain"] == {"providers": [roots["cn1"]], "consumers": 1, "placed": 1,
                               "all_placed": True, "unplaced": []}
    # read-only: nothing claimed
    assert api.call("GET", f"/resource_providers/{roots['cn1']}/usages") == usages_before


def test_a_consumer_too_large_for_the_rest_is_named_with_why(cloud):
    api, roots = cloud
    big = str(uuid.uuid4())
    api.claim(big, roots["cn2"], MEMORY_MB=6000)
    answer = api.call("GET", f"/capacity?resources=VCPU:1&drain_aggregate={AGGREGATE}"
                             "&group_by=aggregate")
    # the answer is the one the OpenAPI document describes
    document = openapi.document(router.ROUTES)
    jsonschema.validate(answer, openapi.response_schema(document, "/capacity", "GET", 200,
                                                        versions.MIN_VERSION))
    assert answer["drain"]["all_placed"] is False
    assert answer["drain"]["unplaced"] == [{
        "consumer": big, "resources": {"MEMORY_MB": 6000},
        "reason": "no provider outside the drain has room for MEMORY_MB:6000"}]


def _status(database, query: str, token: str = "admin", version: str = "placement 1.0"):
    request = webob.Request.blank(f"/capacity?{query}", headers={
        "X-Auth-Token": token, "OpenStack-API-Version": version, "Accept": "application/json"})
    response = request.get_response(build_app(database))
    return response.status_int, response.json


def test_admin_only_at_every_microversion_and_bad_queries_refused(database):
    assert _status(database, "resources=VCPU:1")[0] == 200
    assert _status(database, "resources=VCPU:1", version="placement 1.39")[0] == 200
    assert _status(database, "resources=VCPU:1", token="mere-user")[0] == 403
    assert _status(database, "resources=VCPU:x")[0] == 400
    assert _status(database, "resources=NOT_A_CLASS:1")[0] == 400
    assert _status(database, f"resources=VCPU:1&drain_provider={uuid.uuid4()}")[0] == 400
    assert _status(database, "resources=VCPU:1&group_by=host")[0] == 400


def test_a_lower_bound_may_be_below_the_true_maximum(database):
    """The shared disk comes first in cn1's tree (it was created first):
    the first candidate there takes it, leaving cn2, which has no disk of
    its own, nothing. Claiming the first candidate each time fits 1; the
    best packing (cn1's own disk for cn1) fits 2. The answer says it is a
    lower bound."""
    api = ProviderApi(in_process(build_app(database)))
    disk = api.provider("disk", DISK_GB=10)
    api.traits(disk, "MISC_SHARES_VIA_AGGREGATE")
    cn1 = api.provider("cn1", VCPU=1, DISK_GB=10)
    cn2 = api.provider("cn2", VCPU=1)
    for provider in (disk, cn1, cn2):
        api.call("PUT", f"/resource_providers/{provider}/aggregates", {
            "aggregates": [AGGREGATE],
            "resource_provider_generation": api.generation(provider)})
    answer = api.call("GET", "/capacity?resources=VCPU:1,DISK_GB:10")
    assert answer["exact"] is False
    assert _counts(answer) == {cn1: (1, "VCPU"), cn2: (0, "DISK_GB")}
    # and two do fit
    api.claim(str(uuid.uuid4()), cn1, VCPU=1, DISK_GB=10)
    api.call("PUT", f"/allocations/{uuid.uuid4()}", {
        "allocations": {cn2: {"resources": {"VCPU": 1}},
                        disk: {"resources": {"DISK_GB": 10}}},
        "consumer_generation": None, "consumer_type": "INSTANCE", **PROJECT})


def test_root_required_and_in_tree_narrow_the_roots_counted(cloud):
    api, roots = cloud
    api.call("PUT", "/traits/CUSTOM_RACK_A")
    api.traits(roots["cn2"], "CUSTOM_RACK_A")
    answer = api.call("GET", "/capacity?resources=VCPU:1&root_required=CUSTOM_RACK_A")
    assert _counts(answer) == {roots["cn2"]: (4, "VCPU")} and answer["exact"] is True
    answer = api.call("GET", f"/capacity?resources=VCPU:1&in_tree={roots['cn3']}")
    assert _counts(answer) == {roots["cn3"]: (8, "VCPU")} and answer["exact"] is True
