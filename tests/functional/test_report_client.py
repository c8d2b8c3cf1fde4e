"""The client modelled on Nova's report client (tests/fixtures/report_client.py)
against a running placement-api (noauth2): its provider tree, inventories
set through generation conflicts, claims with consumer generations,
allocations moved to a migration consumer, healing after a conflict."""

from __future__ import annotations

import uuid

import pytest

from tests.fixtures.clients import RunningServer
from tests.fixtures.report_client import Conflict, ReportClient


@pytest.fixture(scope="module")
def server():
    with RunningServer() as running:
        yield running


@pytest.fixture
def client(server) -> ReportClient:
    return ReportClient.noauth(server.url, str(uuid.uuid4()), str(uuid.uuid4()))


@pytest.fixture
def compute_node(client) -> dict:
    """A compute node with a NUMA child, inventories in place."""
    root, numa = str(uuid.uuid4()), str(uuid.uuid4())
    client.ensure_resource_provider(root, "compute-" + root[:8])
    client.ensure_resource_provider(numa, "numa-" + numa[:8], parent_uuid=root)
    client.set_inventory_for_provider(root, {"DISK_GB": {"total": 100},
                                             "MEMORY_MB": {"total": 4096}})
    client.set_inventory_for_provider(numa, {"VCPU": {"total": 8}})
    return {"root": root, "numa": numa}


def _instance_allocations(node: dict, vcpu: int = 2) -> dict:
    return {node["root"]: {"resources": {"DISK_GB": 10, "MEMORY_MB": 1024}},
            node["numa"]: {"resources": {"VCPU": vcpu}}}


def test_ensure_provider_tree_is_idempotent(client, compute_node, server):
    again = ReportClient.noauth(server.url, client.project_id, client.user_id)
    again.ensure_resource_provider(compute_node["numa"], "numa-again",
                                   parent_uuid=compute_node["root"])
    # Found, not re-created: the whole tree's generations come back.
    assert again.generations == client.generations
    assert [request[0] for request in again.requests] == ["GET"]
    assert client.generations[compute_node["root"]] == 1


def test_set_inventory_retries_after_a_generation_conflict(client, compute_node, server):
    other = ReportClient.noauth(server.url, client.project_id, client.user_id)
    other.ensure_resource_provider(compute_node["root"], "ignored")
    other.set_traits_for_provider(compute_node["root"], ["COMPUTE_VOLUME_MULTI_ATTACH"])
    client.requests.clear()

    written = client.set_inventory_for_provider(compute_node["root"], {
        "DISK_GB": {"total": 200}, "MEMORY_MB": {"total": 4096}})

    statuses = [status for method, _, status in client.requests if method == "PUT"]
    assert statuses == [409, 200]  # the stale generation, then the refreshed one
    assert written["inventories"]["DISK_GB"]["total"] == 200
    assert written["resource_provider_generation"] == 3
    aggregate = str(uuid.uuid4())
    assert client.set_aggregates_for_provider(compute_node["root"], [aggregate])[
        "aggregates"] == [aggregate]


def test_claim_with_consumer_generations(client, compute_node):
    instance = str(uuid.uuid4())
    client.claim_resources(instance, _instance_allocations(compute_node), None)
    claimed = client.get_allocations_for_consumer(instance)
    assert claimed["consumer_generation"] == 1
    assert claimed["allocations"][compute_node["numa"]]["resources"] == {"VCPU": 2}

    with pytest.raises(Conflict) as stale:
        client.claim_resources(instance, _instance_allocations(compute_node, vcpu=4), None)
    assert stale.value.code == "placement.concurrent_update"
    with pytest.raises(Conflict) as too_big:
        client.claim_resources(instance, _instance_allocations(compute_node, vcpu=9), 1)
    assert too_big.value.code == "placement.undefined_code"
    assert client.get_allocations_for_consumer(instance) == claimed  # nothing written

    client.claim_resources(instance, _instance_allocations(compute_node, vcpu=4), 1)
    resized = client.get_allocations_for_consumer(instance)
    assert (resized["consumer_generation"],
            resized["allocations"][compute_node["numa"]]["resources"]) == (2, {"VCPU": 4})


def test_move_allocations_to_a_migration_consumer(client, compute_node, server):
    instance, migration = str(uuid.uuid4()), str(uuid.uuid4())
    client.claim_resources(instance, _instance_allocations(compute_node), None)
    usages_before = client.provider_usages(compute_node["numa"])

    client.move_allocations(instance, migration)

    assert client.get_allocations_for_consumer(instance) == {"allocations": {}}
    moved = client.get_allocations_for_consumer(migration)
    assert moved["consumer_type"] == "MIGRATION"
    assert {provider: held["resources"] for provider, held in moved["allocations"].items()} \
        == {provider: held["resources"]
            for provider, held in _instance_allocations(compute_node).items()}
    assert client.provider_usages(compute_node["numa"]) == usages_before

    # The instance claims on the destination (here: the same node again) while
    # the migration still holds the source: capacity counts both.
    client.claim_resources(instance, _instance_allocations(compute_node, vcpu=6), None)
    assert client.provider_usages(compute_node["numa"]) == {"VCPU": 8}


def test_heal_after_a_conflict(client, compute_node, server):
    instance = str(uuid.uuid4())
    client.claim_resources(instance, _instance_allocations(compute_node), None)
    seen_generation = client.get_allocations_for_consumer(instance)["consumer_generation"]
    # Another agent rewrites the consumer meanwhile.
    other = ReportClient.noauth(server.url, client.project_id, client.user_id)
    other.claim_resources(instance, _instance_allocations(compute_node, vcpu=1),
                          seen_generation)

    with pytest.raises(Conflict):
        client.claim_resources(instance, _instance_allocations(compute_node, vcpu=3),
                               seen_generation)
    client.heal_allocations(instance, _instance_allocations(compute_node, vcpu=3))

    healed = client.get_allocations_for_consumer(instance)
    assert healed["allocations"][compute_node["numa"]]["resources"] == {"VCPU": 3}
    assert healed["consumer_generation"] == seen_generation + 2
