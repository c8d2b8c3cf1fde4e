"""A candidates answer is kept whole for the next request of the same kind
and given again while the provider copy and every usage its search read are the
same; so is a provider list asking for capacity, while the provider change
counters, the usages of its classes and the providers' generations are.
Proof that neither is ever stale: a process keeping answers and one
keeping nothing (its own engine, ``allocation_candidates_cache_mb = 0``)
answer every query alike through a run of changes of every kind."""

from __future__ import annotations

import random
import uuid as uuid_lib
from collections.abc import Callable

import pytest

from placement import deploy
from placement.candidates import batches
from placement.db import api as db_api
from tests.fixtures.base import build_app, make_conf
from tests.fixtures.metrics import Changes
from tests.fixtures.provider_api import MICROVERSION, PROJECT, ProviderApi, in_process

AGGREGATE = "00000000-0000-4000-8000-000000000002"
QUERIES = [
    "resources=VCPU:2,MEMORY_MB:1024,DISK_GB:10&limit=3",
    "resources=VCPU:2,MEMORY_MB:1024,DISK_GB:10",
    "resources=VCPU:1&required=CUSTOM_FAST&limit=2",
    "resources=VCPU:1&required=!CUSTOM_FAST",
    f"resources=VCPU:1,DISK_GB:10&member_of={AGGREGATE}",
    "resources1=VCPU:1&resources2=VCPU:1&resources=DISK_GB:5&group_policy=isolate&limit=4",
]

LIST_QUERIES = [
    "resources=VCPU:2,MEMORY_MB:1024",
    "resources=VCPU:1,DISK_GB:10&required=!CUSTOM_FAST",
    f"resources=DISK_GB:5&member_of={AGGREGATE}",
]


@pytest.fixture
def apps(database):
    """The application keeping answers, and one on an engine of its own
    (so a provider copy and kept store of its own) keeping nothing."""
    unkept_db = db_api.Database(db_api.create_engine(database.url))
    yield build_app(database, {("metrics", "enabled"): True}), deploy.build_app(
        make_conf(database, {("placement", "allocation_candidates_cache_mb"): 0}),
        db=unkept_db)
    unkept_db.dispose()


def _cloud(client: ProviderApi) -> dict[str, list[str]]:
    """Flat computes, nested ones and a sharing disk, some in an aggregate."""
    flat = [client.provider(f"cn{index}", VCPU=8, MEMORY_MB=8192, DISK_GB=100)
            for index in range(6)]
    nested_roots, numa = [], []
    for index in range(3):
        root = client.provider(f"nested{index}", DISK_GB=100)
        nested_roots.append(root)
        numa += [client.provider(f"nested{index}-numa{node}", root, VCPU=4, MEMORY_MB=4096)
                 for node in (0, 1)]
    disk = client.provider("shared-disk", DISK_GB=1000)
    client.traits(disk, "MISC_SHARES_VIA_AGGREGATE")
    for provider_uuid in (disk, flat[0], flat[1], nested_roots[0]):
        client.call("PUT", f"/resource_providers/{provider_uuid}/aggregates", {
            "aggregates": [AGGREGATE],
            "resource_provider_generation": client.generation(provider_uuid)})
    client.call("PUT", "/traits/CUSTOM_FAST")
    return {"flat": flat, "vcpu": flat + numa, "disk": [*flat, *nested_roots, disk]}


def _change(client: ProviderApi, cloud: dict[str, list[str]], claims: list[str],
            rng: random.Random) -> str:
    """One change of a kind a cloud sees: a claim, a delete, a claim of
    the same amounts again, an inventory or trait change, a rename.
    Returns what it did, for the failure message."""
    kind = rng.choice(["claim", "claim", "delete", "claim again", "inventory", "traits",
                       "rename"])
    if kind == "claim":
        consumer = str(uuid_lib.uuid4())
        provider = rng.choice(cloud["vcpu"])
        status, _ = client.send("PUT", f"/allocations/{consumer}", {
            "allocations": {provider: {"resources": {"VCPU": rng.randint(1, 3)}}},
            "consumer_generation": None, "consumer_type": "INSTANCE", **PROJECT}, MICROVERSION)
        assert status in (204, 409), status  # 409: the provider is full
        if status == 204:
            claims.append(consumer)
        return f"claim {consumer} on {provider}: {status}"
    if kind == "delete" and claims:
        consumer = claims.pop(rng.randrange(len(claims)))
        client.call("DELETE", f"/allocations/{consumer}")
        return f"delete {consumer}"
    if kind == "claim again" and claims:
        # the same amounts: the providers' generations move, their usages do not
        consumer = rng.choice(claims)
        held = client.call("GET", f"/allocations/{consumer}")
        client.call("PUT", f"/allocations/{consumer}", {
            "allocations": {provider: {"resources": entry["resources"]}
                            for provider, entry in held["allocations"].items()},
            "consumer_generation": held["consumer_generation"], "consumer_type": "INSTANCE",
            **PROJECT})
        return f"claim {consumer} again"
    if kind == "rename":
        provider = rng.choice(cloud["vcpu"])
        client.call("PUT", f"/resource_providers/{provider}", {"name": uuid_lib.uuid4().hex})
        return f"rename {provider}"
    if kind == "inventory":
        provider = rng.choice(cloud["flat"])
        # a total below what is used is refused: claims leave at most 3 x 8
        client.inventories(provider, VCPU=rng.randint(24, 32), MEMORY_MB=8192,
                           DISK_GB=rng.choice([5, 100]))
        return f"inventory of {provider}"
    provider = rng.choice(cloud["vcpu"])
    client.traits(provider, *rng.choice([[], ["CUSTOM_FAST"]]))
    return f"traits of {provider}"


def _asked_through_changes(apps, seed: int, steps: int,
                           queries: Callable[[random.Random], list[str]],
                           answer: Callable[[ProviderApi, str], object], metric: str
                           ) -> tuple[float, float]:
    """Before each of ``steps`` changes, every query of ``queries`` is asked
    twice (the second answer is the kept one when nothing moved) of both
    processes, which must answer alike. The (given, stale) counts of
    ``metric``."""
    kept, unkept = (ProviderApi(in_process(app)) for app in apps)
    cloud = _cloud(kept)
    rng = random.Random(seed)
    claims: list[str] = []
    done = ["nothing yet"]
    with Changes(apps[0]) as changes:
        for step in range(steps):
            for query in queries(rng):
                for _ in range(2):
                    assert answer(kept, query) == answer(unkept, query), (
                        step, query, done[-1])
            done.append(_change(kept, cloud, claims, rng))
    return changes(metric, outcome="given"), changes(metric, outcome="stale")


def test_kept_answers_are_the_answers_of_a_process_keeping_nothing(apps):
    given, stale = _asked_through_changes(
        apps, 7, 60, lambda rng: rng.sample(QUERIES, 3), ProviderApi.candidates,
        "placement_allocation_candidates_kept_answers_total")
    assert given >= 60 and stale >= 10, (given, stale)  # both ways were taken


def test_new_flavors_are_answered_as_by_a_process_keeping_nothing(apps, monkeypatch):
    """Every request a new flavor of the same classes: the first batch of
    trees is kept (the providers of its trees) and the room left in its
    roots answers which fit, while claims and changes go on."""
    answered_from_room = []
    with_room = batches.RootCapacities.with_room
    monkeypatch.setattr(batches.RootCapacities, "with_room", lambda self, amount: (
        answered_from_room.append(amount) or with_room(self, amount)))

    def flavors(rng: random.Random) -> list[str]:
        # VCPU up to 10: past the max_unit (8) of every inventory
        return [f"resources=VCPU:{rng.randint(1, 10)},MEMORY_MB:{rng.randint(1, 9000)},"
                f"DISK_GB:{rng.randint(1, 120)}&limit={rng.choice([2, 5, 100])}"
                for _ in range(3)]

    _asked_through_changes(apps, 13, 40, flavors, ProviderApi.candidates,
                           "placement_allocation_candidates_kept_answers_total")
    assert answered_from_room


def test_kept_provider_lists_are_the_lists_of_a_process_keeping_nothing(apps):
    given, stale = _asked_through_changes(
        apps, 11, 40, lambda rng: LIST_QUERIES,
        lambda client, query: client.call("GET", f"/resource_providers?{query}"),
        "placement_provider_lists_kept_answers_total")
    assert given >= 40 * len(LIST_QUERIES) and stale >= 20, (given, stale)


def test_a_kept_list_shows_a_provider_a_delete_freed(apps):
    """A delete moves usages only (no generation, no provider change)."""
    kept = ProviderApi(in_process(apps[0]))
    compute = kept.provider("cn", VCPU=4)
    consumer = str(uuid_lib.uuid4())
    kept.claim(consumer, compute, VCPU=4)
    path = "/resource_providers?resources=VCPU:1"
    for _ in range(2):  # the second is the kept list
        assert kept.call("GET", path)["resource_providers"] == []
    kept.call("DELETE", f"/allocations/{consumer}")
    assert [provider["uuid"] for provider in kept.call("GET", path)["resource_providers"]
            ] == [compute]


def test_a_kept_answer_is_not_given_for_another_microversion_or_limit(apps):
    kept, unkept = (ProviderApi(in_process(app)) for app in apps)
    _cloud(kept)
    for query in ("resources=VCPU:1&limit=2", "resources=VCPU:1&limit=5",
                  "resources=VCPU:1"):
        for version in ("placement 1.16", "placement 1.28", "placement 1.39"):
            assert kept.candidates(query, version) == unkept.candidates(query, version), (
                query, version)


def test_full_trees_come_back_as_soon_as_they_have_room(apps):
    """Full computes give no candidate; a delete or a larger inventory
    makes them candidates again at the next request, whatever was kept."""
    kept, unkept = (ProviderApi(in_process(app)) for app in apps)
    computes = [kept.provider(f"cn{index}", VCPU=4, DISK_GB=100) for index in range(5)]
    held = {}
    for compute in computes[:2]:
        held[compute] = str(uuid_lib.uuid4())
        kept.claim(held[compute], compute, VCPU=4)
    query = "resources=VCPU:1,DISK_GB:1&limit=2"

    def ask_after(change: Callable[[], None]) -> list[str]:
        """The providers of the answer after ``change``."""
        change()
        answer = kept.candidates(query)
        assert answer == unkept.candidates(query)
        return [next(iter(request["allocations"])) for request in answer["allocation_requests"]]

    def claim(compute: str, **amounts: int) -> Callable[[], None]:
        return lambda: kept.claim(str(uuid_lib.uuid4()), compute, **amounts)

    assert ask_after(lambda: None) == [computes[2], computes[3]]
    assert ask_after(claim(computes[4], VCPU=1)) == [computes[2], computes[3]]
    assert ask_after(claim(computes[3], VCPU=1)) == [computes[2], computes[3]]
    # a full compute still takes disk: its usage grows, it stays full
    assert ask_after(claim(computes[0], DISK_GB=10)) == [computes[2], computes[3]]
    assert ask_after(lambda: kept.call("DELETE", f"/allocations/{held[computes[1]]}")) == [
        computes[1], computes[2]]
    assert ask_after(lambda: kept.inventories(computes[0], VCPU=8, DISK_GB=100)) == [
        computes[0], computes[1]]
