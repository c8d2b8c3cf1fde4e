"""GET /capacity/providers, on every backend: each provider it lists says
exactly what GET /resource_providers/{uuid}, .../inventories and .../usages
say of it, and its filters list exactly the providers GET /resource_providers
lists with the same query string at the newest microversion."""

from __future__ import annotations

import uuid

import pytest

from tests.fixtures.base import build_app
from tests.fixtures.provider_api import ProviderApi, in_process

# fixed: it names parametrized tests, which every xdist worker must collect alike
AGGREGATE = "3f2a1c64-5b7e-4d1a-9c0e-7a8b9c0d1e2f"
LATEST = "placement latest"


@pytest.fixture
def cloud(database):
    """A small cloud: flat computes with unusual inventory fields, claims,
    a nested tree, a sharing disk in an aggregate, a provider without
    inventory and a custom class."""
    api = ProviderApi(in_process(build_app(database)))
    api.call("PUT", "/resource_classes/CUSTOM_GPU")
    computes = []
    for index in range(4):
        compute = api.provider(f"cn{index}")
        api.call("PUT", f"/resource_providers/{compute}/inventories", {
            "resource_provider_generation": api.generation(compute),
            "inventories": {
                "VCPU": {"total": 8 + index, "allocation_ratio": 16.0, "max_unit": 8},
                "MEMORY_MB": {"total": 4096, "reserved": 512, "allocation_ratio": 1.5,
                              "step_size": 256, "min_unit": 256},
                "CUSTOM_GPU": {"total": index + 1}}})
        computes.append(compute)
    api.traits(computes[0], "HW_CPU_X86_AVX2")
    root = api.provider("nested-root", DISK_GB=100)
    numa = api.provider("nested-numa", parent=root, VCPU=4)
    sharing = api.provider("shared-disk", DISK_GB=1000)
    api.traits(sharing, "MISC_SHARES_VIA_AGGREGATE")
    for member in (sharing, computes[1]):
        api.call("PUT", f"/resource_providers/{member}/aggregates", {
            "resource_provider_generation": api.generation(member),
            "aggregates": [AGGREGATE]})
    api.provider("empty")
    api.claim(str(uuid.uuid4()), computes[0], VCPU=2, MEMORY_MB=512)
    api.claim(str(uuid.uuid4()), computes[1], VCPU=8, CUSTOM_GPU=2)
    api.claim(str(uuid.uuid4()), numa, VCPU=1)
    api.claim(str(uuid.uuid4()), sharing, DISK_GB=100)
    return api


def _per_provider(api: ProviderApi, provider_uuid: str) -> dict:
    """What the original's routes say of one provider, in the bulk form."""
    base = f"/resource_providers/{provider_uuid}"
    provider = api.call("GET", base, version=LATEST)
    inventories = api.call("GET", base + "/inventories")
    usages = api.call("GET", base + "/usages")
    # one generation for the three reads: nothing moves meanwhile
    assert (inventories["resource_provider_generation"] == usages["resource_provider_generation"]
            == provider["generation"])
    return {**{key: provider[key] for key in ("uuid", "name", "generation",
                                              "parent_provider_uuid", "root_provider_uuid")},
            "inventories": inventories["inventories"], "usages": usages["usages"]}


def test_every_provider_as_the_per_provider_routes_show_it(cloud):
    listed = cloud.call("GET", "/capacity/providers")["resource_providers"]
    every = cloud.call("GET", "/resource_providers", version=LATEST)["resource_providers"]
    # all of them, in the same (creation) order
    assert [entry["uuid"] for entry in listed] == [entry["uuid"] for entry in every]
    assert len(listed) == 8
    for entry in listed:
        assert entry == _per_provider(cloud, entry["uuid"])
    by_name = {entry["name"]: entry for entry in listed}
    assert by_name["cn1"]["usages"] == {"VCPU": 8, "MEMORY_MB": 0, "CUSTOM_GPU": 2}
    assert by_name["cn0"]["inventories"]["MEMORY_MB"] == {
        "total": 4096, "reserved": 512, "min_unit": 256, "max_unit": 2147483647,
        "step_size": 256, "allocation_ratio": 1.5}
    assert by_name["empty"]["inventories"] == by_name["empty"]["usages"] == {}


@pytest.mark.parametrize("query", [
    "name=cn2", "member_of=" + AGGREGATE, "member_of=!" + AGGREGATE,
    "required=HW_CPU_X86_AVX2", "required=!HW_CPU_X86_AVX2",
    "resources=VCPU:7", "resources=CUSTOM_GPU:1,MEMORY_MB:1024",
    "required=MISC_SHARES_VIA_AGGREGATE&member_of=in:" + AGGREGATE,
])
def test_filters_list_what_the_provider_list_lists(cloud, query):
    expected = [entry["uuid"] for entry in cloud.call(
        "GET", "/resource_providers?" + query, version=LATEST)["resource_providers"]]
    assert expected  # the query selects something ...
    # ... and the extension takes the newest filters even at 1.0
    for version in ("placement 1.0", LATEST):
        listed = cloud.call("GET", "/capacity/providers?" + query,
                            version=version)["resource_providers"]
        assert [entry["uuid"] for entry in listed] == expected


def test_in_tree_and_uuid(cloud):
    every = cloud.call("GET", "/capacity/providers")["resource_providers"]
    by_name = {entry["name"]: entry for entry in every}
    root = by_name["nested-root"]["uuid"]
    tree = cloud.call("GET", f"/capacity/providers?in_tree={root}")["resource_providers"]
    assert [entry["name"] for entry in tree] == ["nested-root", "nested-numa"]
    assert tree[1] == by_name["nested-numa"]
    assert tree[1]["usages"] == {"VCPU": 1}
    one = cloud.call("GET", f"/capacity/providers?uuid={root}")["resource_providers"]
    assert one == [by_name["nested-root"]]
