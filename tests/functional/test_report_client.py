"""A client modelled on how a compute scheduler's report client (Nova's)
uses the service, against a running placement-api: it keeps a cache of
provider generations, ensures its provider tree, sets inventory retrying
on generation conflicts, claims with consumer generations, moves
allocations from one consumer to another with ``POST /allocations`` (a
migration) and heals allocations after a conflict."""

from __future__ import annotations

import uuid

import pytest
from keystoneauth1 import adapter, session, token_endpoint

from tests.fixtures.clients import RunningServer

VERSION = "1.39"
CONFLICT_RETRIES = 3


class Conflict(Exception):
    """A 409 the client could not resolve; ``code`` is placement's."""

    def __init__(self, response):
        self.code = response.json()["errors"][0]["code"]
        super().__init__(response.text)


class ReportClient:
    """What a compute node's agent does with placement."""

    def __init__(self, url: str, project_id: str, user_id: str):
        auth = token_endpoint.Token(url, "admin")
        self.placement = adapter.Adapter(session.Session(auth=auth),
                                         service_type="placement", endpoint_override=url)
        self.project_id, self.user_id = project_id, user_id
        self.generations: dict[str, int] = {}  # provider uuid -> last generation seen
        self.requests: list[tuple[str, str, int]] = []

    def _call(self, method: str, path: str, body: object = None):
        response = self.placement.request(path, method, json=body, microversion=VERSION,
                                          raise_exc=False)
        self.requests.append((method, path, response.status_code))
        if response.status_code >= 400 and response.status_code != 409:
            raise AssertionError(f"{method} {path}: {response.status_code} {response.text}")
        return response

    # --- providers -------------------------------------------------------------

    def ensure_resource_provider(self, provider_uuid: str, name: str,
                                 parent_uuid: str | None = None) -> None:
        """Create the provider unless it exists; refresh the cached generations
        of its whole tree either way."""
        tree = self._call("GET", f"/resource_providers?in_tree={provider_uuid}").json()
        if not tree["resource_providers"]:
            created = self._call("POST", "/resource_providers", {
                "uuid": provider_uuid, "name": name, "parent_provider_uuid": parent_uuid})
            assert created.status_code == 200, created.text
            tree = self._call("GET", f"/resource_providers?in_tree={provider_uuid}").json()
        for provider in tree["resource_providers"]:
            self.generations[provider["uuid"]] = provider["generation"]

    def _refresh_generation(self, provider_uuid: str) -> None:
        provider = self._call("GET", f"/resource_providers/{provider_uuid}").json()
        self.generations[provider_uuid] = provider["generation"]

    def _write_with_generation(self, provider_uuid: str, path: str, body: dict) -> dict:
        """PUT ``body`` with the cached generation; on a generation conflict,
        refresh the generation and try again."""
        for _ in range(CONFLICT_RETRIES):
            response = self._call("PUT", path, {
                **body, "resource_provider_generation": self.generations[provider_uuid]})
            if response.status_code == 200:
                written = response.json()
                self.generations[provider_uuid] = written["resource_provider_generation"]
                return written
            conflict = Conflict(response)
            if conflict.code != "placement.concurrent_update":
                raise conflict
            self._refresh_generation(provider_uuid)
        raise conflict

    def set_inventory_for_provider(self, provider_uuid: str, inventories: dict) -> dict:
        return self._write_with_generation(
            provider_uuid, f"/resource_providers/{provider_uuid}/inventories",
            {"inventories": inventories})

    def set_traits_for_provider(self, provider_uuid: str, traits: list[str]) -> dict:
        return self._write_with_generation(
            provider_uuid, f"/resource_providers/{provider_uuid}/traits", {"traits": traits})

    def set_aggregates_for_provider(self, provider_uuid: str, aggregates: list[str]) -> dict:
        return self._write_with_generation(
            provider_uuid, f"/resource_providers/{provider_uuid}/aggregates",
            {"aggregates": aggregates})

    # --- allocations -------------------------------------------------------------

    def provider_usages(self, provider_uuid: str) -> dict:
        return self._call("GET", f"/resource_providers/{provider_uuid}/usages").json()["usages"]

    def get_allocations_for_consumer(self, consumer_uuid: str) -> dict:
        return self._call("GET", f"/allocations/{consumer_uuid}").json()

    def _consumer_body(self, allocations: dict, generation: int | None,
                       consumer_type: str) -> dict:
        return {"allocations": allocations, "project_id": self.project_id,
                "user_id": self.user_id, "consumer_generation": generation,
                "consumer_type": consumer_type}

    def claim_resources(self, consumer_uuid: str, allocations: dict,
                        consumer_generation: int | None,
                        consumer_type: str = "INSTANCE") -> None:
        """Write the consumer's allocations at the generation the caller
        last saw (None: a new consumer). Raises Conflict on any 409."""
        response = self._call("PUT", f"/allocations/{consumer_uuid}", self._consumer_body(
            allocations, consumer_generation, consumer_type))
        if response.status_code != 204:
            raise Conflict(response)

    def move_allocations(self, source_consumer: str, target_consumer: str) -> None:
        """Give the target consumer (e.g. a migration record) everything the
        source holds, emptying the source, in one request."""
        source = self.get_allocations_for_consumer(source_consumer)
        target = self.get_allocations_for_consumer(target_consumer)
        response = self._call("POST", "/allocations", {
            source_consumer: self._consumer_body(
                {}, source["consumer_generation"], source["consumer_type"]),
            target_consumer: self._consumer_body(
                {provider: {"resources": held["resources"]}
                 for provider, held in source["allocations"].items()},
                target.get("consumer_generation"), "MIGRATION"),
        })
        if response.status_code != 204:
            raise Conflict(response)

    def heal_allocations(self, consumer_uuid: str, wanted: dict) -> None:
        """Make the consumer's allocations ``wanted``, whatever was written
        meanwhile: re-read the consumer and retry on a generation conflict."""
        for _ in range(CONFLICT_RETRIES):
            current = self.get_allocations_for_consumer(consumer_uuid)
            try:
                self.claim_resources(consumer_uuid, wanted, current.get("consumer_generation"))
                return
            except Conflict as conflict:
                if conflict.code != "placement.concurrent_update":
                    raise
        raise AssertionError(f"could not heal {consumer_uuid}")


@pytest.fixture(scope="module")
def server():
    with RunningServer() as running:
        yield running


@pytest.fixture
def client(server) -> ReportClient:
    return ReportClient(server.url, str(uuid.uuid4()), str(uuid.uuid4()))


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


def test_ensure_provider_tree_is_idempotent(client, compute_node):
    again = ReportClient(client.placement.endpoint_override, client.project_id, client.user_id)
    again.ensure_resource_provider(compute_node["numa"], "numa-again",
                                   parent_uuid=compute_node["root"])
    # Found, not re-created: the whole tree's generations come back.
    assert again.generations == client.generations
    assert [request[0] for request in again.requests] == ["GET"]
    assert client.generations[compute_node["root"]] == 1


def test_set_inventory_retries_after_a_generation_conflict(client, compute_node, server):
    other = ReportClient(server.url, client.project_id, client.user_id)
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
    other = ReportClient(server.url, client.project_id, client.user_id)
    other.claim_resources(instance, _instance_allocations(compute_node, vcpu=1),
                          seen_generation)

    with pytest.raises(Conflict):
        client.claim_resources(instance, _instance_allocations(compute_node, vcpu=3),
                               seen_generation)
    client.heal_allocations(instance, _instance_allocations(compute_node, vcpu=3))

    healed = client.get_allocations_for_consumer(instance)
    assert healed["allocations"][compute_node["numa"]]["resources"] == {"VCPU": 3}
    assert healed["consumer_generation"] == seen_generation + 2
