"""openstacksdk's placement proxy end to end against a running
placement-api (noauth2; the connection uses the ``admin_token`` plugin):
a provider tree with inventories, traits and aggregates, allocations set,
shown and moved, candidates listed, at the newest microversions the SDK
negotiates and at an old pinned one."""

from __future__ import annotations

import uuid

import openstack.connection
import openstack.exceptions
import pytest

from tests.fixtures.clients import RunningServer


@pytest.fixture(scope="module")
def server():
    with RunningServer() as running:
        yield running


def _connect(url: str, version: str | None = None) -> openstack.connection.Connection:
    options = {"placement_api_version": version} if version else {}
    return openstack.connection.Connection(
        auth_type="admin_token", auth={"endpoint": url, "token": "admin"},
        placement_endpoint_override=url, **options)


@pytest.fixture(scope="module")
def placement(server):
    return _connect(server.url).placement


@pytest.fixture(scope="module")
def old_placement(server):
    return _connect(server.url, "1.10").placement


def test_sdk_provider_tree(placement):
    root = placement.create_resource_provider(name=f"sdk-root-{uuid.uuid4().hex[:8]}")
    child = placement.create_resource_provider(name=f"sdk-child-{uuid.uuid4().hex[:8]}",
                                               parent_provider_uuid=root.id)
    assert child.root_provider_id == root.id
    assert child.parent_provider_id == root.id
    in_tree = {provider.id for provider in placement.resource_providers(in_tree=child.id)}
    assert in_tree == {root.id, child.id}
    renamed = placement.update_resource_provider(child, name="sdk-renamed-" + child.id[:8])
    assert placement.get_resource_provider(child.id).name == renamed.name
    placement.delete_resource_provider(child)
    placement.delete_resource_provider(root)
    assert placement.find_resource_provider(root.id) is None


def test_sdk_inventories_aggregates_traits(placement):
    provider = placement.create_resource_provider(name=f"sdk-{uuid.uuid4().hex[:8]}")
    placement.create_resource_provider_inventory(provider, "VCPU", total=16,
                                                 allocation_ratio=4.0)
    placement.create_resource_provider_inventory(provider, "MEMORY_MB", total=8192,
                                                 reserved=512)
    inventories = {inventory.resource_class: inventory
                   for inventory in placement.resource_provider_inventories(provider)}
    assert set(inventories) == {"VCPU", "MEMORY_MB"}
    assert inventories["VCPU"].allocation_ratio == 4.0
    memory = placement.get_resource_provider_inventory(inventories["MEMORY_MB"],
                                                       resource_provider=provider)
    assert (memory.total, memory.reserved) == (8192, 512)
    placement.update_resource_provider_inventory(
        memory, resource_provider=provider, total=4096,
        resource_provider_generation=memory.resource_provider_generation)
    assert placement.get_resource_provider_inventory(
        "MEMORY_MB", resource_provider=provider).total == 4096

    aggregate = str(uuid.uuid4())
    with pytest.raises(openstack.exceptions.ConflictException):
        # The object still has generation 0: the inventory writes bumped it.
        placement.set_resource_provider_aggregates(provider, aggregate)
    placement.set_resource_provider_aggregates(placement.get_resource_provider(provider.id),
                                               aggregate)
    assert placement.get_resource_provider_aggregates(provider).aggregates == [aggregate]
    assert [found.id for found in placement.resource_providers(member_of=aggregate)] == [
        provider.id]

    trait_name = f"CUSTOM_SDK_{uuid.uuid4().hex[:8].upper()}"
    placement.create_trait(trait_name)
    assert placement.get_trait(trait_name).id == trait_name
    current = placement.get_resource_provider_trait(provider)
    placement.set_resource_provider_trait(current, traits=[trait_name, "HW_CPU_X86_SSE"])
    assert set(placement.get_resource_provider_trait(provider).traits) == {
        trait_name, "HW_CPU_X86_SSE"}
    assert [found.id for found in placement.resource_providers(required=trait_name)] == [
        provider.id]

    placement.delete_resource_provider_inventory("VCPU", resource_provider=provider)
    assert {inventory.resource_class for inventory in
            placement.resource_provider_inventories(provider)} == {"MEMORY_MB"}
    placement.delete_resource_provider(provider)
    placement.delete_trait(trait_name)


def test_sdk_at_an_old_microversion(old_placement):
    # Below 1.20 the creation answers without a body: the client names the uuid.
    provider = old_placement.create_resource_provider(id=str(uuid.uuid4()),
                                                      name=f"sdk-old-{uuid.uuid4().hex[:8]}")
    fetched = old_placement.get_resource_provider(provider.id)
    assert fetched.generation == 0
    assert fetched.root_provider_id is None  # not shown before 1.14
    old_placement.create_resource_provider_inventory(provider, "DISK_GB", total=100)
    aggregate = str(uuid.uuid4())
    old_placement.set_resource_provider_aggregates(provider, aggregate)
    assert old_placement.get_resource_provider_aggregates(provider).aggregates == [aggregate]
    old_placement.delete_resource_provider(provider)


def test_sdk_allocations_and_candidates(placement):
    provider = placement.create_resource_provider(name=f"sdk-alloc-{uuid.uuid4().hex[:8]}")
    placement.create_resource_provider_inventory(provider, "VCPU", total=4)
    found = list(placement.allocation_candidates(resources="VCPU:3"))
    assert provider.id in {candidate_provider for candidate in found
                           for candidate_provider in candidate.allocations}

    consumer, project, user = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    placement.update_allocation(
        consumer, allocations={provider.id: {"resources": {"VCPU": 3}}},
        project_id=project, user_id=user, consumer_generation=None,
        consumer_type="INSTANCE")
    claimed = placement.get_allocation(consumer)
    assert claimed.allocations[provider.id]["resources"] == {"VCPU": 3}
    assert (claimed.project_id, claimed.consumer_generation) == (project, 1)
    found = list(placement.allocation_candidates(resources="VCPU:3"))
    assert provider.id not in {candidate_provider for candidate in found
                               for candidate_provider in candidate.allocations}

    # A migration: one POST /allocations moves the claim to another consumer.
    migration = str(uuid.uuid4())
    placement.create_allocations({
        consumer: {"allocations": {}, "project_id": project, "user_id": user,
                   "consumer_generation": 1, "consumer_type": "INSTANCE"},
        migration: {"allocations": {provider.id: {"resources": {"VCPU": 3}}},
                    "project_id": project, "user_id": user,
                    "consumer_generation": None, "consumer_type": "MIGRATION"},
    })
    assert placement.get_allocation(migration).consumer_type == "MIGRATION"
    assert placement.get_allocation(consumer).allocations == {}
    placement.delete_allocation(migration)
    placement.delete_resource_provider(provider)
