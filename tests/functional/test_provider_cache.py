"""The candidate search works from a per-process copy of the providers
(placement.candidates.provider_copy). Every change a client can make must
show in the very next GET /allocation_candidates of the same process, and
what one request computes (its usages) must not leak into the copy."""

from __future__ import annotations

import os
import threading
import time
import uuid as uuid_lib

import pytest
import sqlalchemy as sa

from placement.candidates import follower
from placement.db import tables
from placement.objects import resource_class
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import ProviderApi, in_process


@pytest.fixture
def client(database):
    return ProviderApi(in_process(build_app(database)))


def test_inventory_changes_show_at_once(client):
    compute = client.provider("cn1", VCPU=4)
    assert client.candidate_sets("resources=VCPU:4") == [{compute}]
    client.inventories(compute, VCPU=2)
    assert client.candidate_sets("resources=VCPU:4") == []
    client.inventories(compute, VCPU=8, MEMORY_MB=1024)
    assert client.candidate_sets("resources=VCPU:4,MEMORY_MB:512") == [{compute}]
    client.call("DELETE", f"/resource_providers/{compute}/inventories")
    assert client.candidate_sets("resources=VCPU:1") == []


def test_new_and_deleted_providers_show_at_once(client):
    first = client.provider("cn1", VCPU=4)
    assert client.candidate_sets("resources=VCPU:1") == [{first}]
    second = client.provider("cn2", VCPU=4)
    assert client.candidate_sets("resources=VCPU:1") == [{first}, {second}]
    client.call("DELETE", f"/resource_providers/{first}")
    assert client.candidate_sets("resources=VCPU:1") == [{second}]
    # one gone and one come between two searches: as many providers as before
    third = client.provider("cn3", VCPU=4)
    assert client.candidate_sets("resources=VCPU:1") == [{second}, {third}]
    client.call("DELETE", f"/resource_providers/{second}")
    fourth = client.provider("cn4", VCPU=4)
    assert client.candidate_sets("resources=VCPU:1") == [{third}, {fourth}]


def test_a_new_provider_reusing_a_deleted_id_is_not_mistaken_for_it(client, database):
    """SQLite may give a new row the id of the deleted last one: the new
    provider, with the same id, generation and tree as the copy of the
    deleted one, has no inventory."""
    old = client.provider("old", VCPU=4)
    _rp = tables.resource_providers
    with database.db.reader() as connection:
        old_id, generation = connection.execute(
            sa.select(_rp.c.id, _rp.c.generation).where(_rp.c.uuid == old)).one()
    assert client.candidate_sets("resources=VCPU:1") == [{old}]
    client.call("DELETE", f"/resource_providers/{old}")
    new = str(uuid_lib.uuid4())
    with database.db.writer() as connection:
        # the id reused for certain, on every backend
        connection.execute(sa.insert(_rp).values(
            id=old_id, uuid=new, name="new", generation=generation))
        connection.execute(sa.update(_rp).where(_rp.c.id == old_id)
                           .values(root_provider_id=old_id))
    assert client.candidate_sets("resources=VCPU:1") == []
    client.inventories(new, VCPU=4)
    assert client.candidate_sets("resources=VCPU:1") == [{new}]


def test_traits_changes_show_at_once(client):
    compute = client.provider("cn1", VCPU=4)
    query = "resources=VCPU:1&required=HW_CPU_X86_AVX2"
    assert client.candidate_sets(query) == []
    client.call("PUT", f"/resource_providers/{compute}/traits", {
        "resource_provider_generation": client.generation(compute),
        "traits": ["HW_CPU_X86_AVX2"]})
    assert client.candidate_sets(query) == [{compute}]
    summary = client.candidates(query)["provider_summaries"][compute]
    assert summary["traits"] == ["HW_CPU_X86_AVX2"]
    client.call("DELETE", f"/resource_providers/{compute}/traits")
    assert client.candidate_sets(query) == []


def test_forbidden_traits_changes_show_at_once(client):
    """A trait forbidden to a group's class narrows the trees searched (the
    copy's anchors, kept per shape): a provider losing or gaining it is
    searched again, or no more, at the next request."""
    compute = client.provider("cn1", VCPU=4)
    query = "resources=VCPU:1&required=!HW_CPU_X86_AVX2"
    for traits, expected in ((["HW_CPU_X86_AVX2"], []), ([], [{compute}]),
                             (["HW_CPU_X86_AVX2"], [])):
        client.call("PUT", f"/resource_providers/{compute}/traits", {
            "resource_provider_generation": client.generation(compute), "traits": traits})
        assert client.candidate_sets(query) == expected, traits


def test_aggregates_set_without_a_generation_show_at_once(client):
    """Below 1.19 aggregates change without moving the generation."""
    compute = client.provider("cn1", VCPU=4)
    disk = client.provider("disk", DISK_GB=100)
    aggregate = str(uuid_lib.uuid4())
    client.call("PUT", f"/resource_providers/{disk}/traits", {
        "resource_provider_generation": client.generation(disk),
        "traits": ["MISC_SHARES_VIA_AGGREGATE"]})
    query = "resources=VCPU:1,DISK_GB:10"
    assert client.candidate_sets(query) == []
    generations = client.generation(compute), client.generation(disk)
    for provider_uuid in (compute, disk):
        client.call("PUT", f"/resource_providers/{provider_uuid}/aggregates", [aggregate],
                    version="placement 1.18")
    assert (client.generation(compute), client.generation(disk)) == generations
    assert client.candidate_sets(query) == [{compute, disk}]
    assert client.candidate_sets(f"{query}&member_of={aggregate}") == [{compute, disk}]
    client.call("PUT", f"/resource_providers/{compute}/aggregates", [],
                version="placement 1.18")
    assert client.candidate_sets(query) == []


def test_reparenting_shows_at_once(client):
    """A tree joining another (1.37 re-parenting) changes the anchors."""
    root = client.provider("root", DISK_GB=100)
    numa = client.provider("numa", VCPU=4)
    query = "resources=DISK_GB:10,VCPU:1"
    assert client.candidate_sets(query) == []
    client.call("PUT", f"/resource_providers/{numa}", {
        "name": "numa", "parent_provider_uuid": root})
    assert client.candidate_sets(query) == [{root, numa}]
    summary = client.candidates(query)["provider_summaries"][numa]
    assert summary["root_provider_uuid"] == root
    assert summary["parent_provider_uuid"] == root


def test_usages_follow_allocations_and_stay_out_of_the_copy(client):
    """A deletion of allocations leaves generations alone; usages are read
    per request and one request's usages never show in another's."""
    compute = client.provider("cn1", VCPU=4)
    consumer = str(uuid_lib.uuid4())
    claim = {"allocations": {compute: {"resources": {"VCPU": 3}}},
             "project_id": str(uuid_lib.uuid4()), "user_id": str(uuid_lib.uuid4()),
             "consumer_generation": None, "consumer_type": "INSTANCE"}
    client.call("PUT", f"/allocations/{consumer}", claim)
    body = client.candidates("resources=VCPU:1")
    assert body["provider_summaries"][compute]["resources"]["VCPU"] == {
        "capacity": 4, "used": 3}
    assert client.candidate_sets("resources=VCPU:2") == []
    generation = client.generation(compute)
    client.call("DELETE", f"/allocations/{consumer}")
    assert client.generation(compute) == generation
    assert client.candidate_sets("resources=VCPU:2") == [{compute}]
    body = client.candidates("resources=VCPU:1")
    assert body["provider_summaries"][compute]["resources"]["VCPU"] == {
        "capacity": 4, "used": 0}


def test_usages_of_trees_searched_in_later_batches(client):
    """With a small limit the trees are taken in batches, each with its own
    usages: here the first batch and most of the second are full."""
    computes = [client.provider(f"cn{index}", VCPU=4) for index in range(20)]
    project, user = str(uuid_lib.uuid4()), str(uuid_lib.uuid4())
    for compute in computes[:15]:
        client.call("PUT", f"/allocations/{uuid_lib.uuid4()}", {
            "allocations": {compute: {"resources": {"VCPU": 4}}},
            "project_id": project, "user_id": user, "consumer_generation": None,
            "consumer_type": "INSTANCE"})
    assert client.candidate_sets("resources=VCPU:1&limit=2") == [
        {computes[15]}, {computes[16]}]


def test_results_kept_at_a_tree_follow_every_member(client):
    """The results found at a root are kept for the next search of the same
    kind: a change of any member (a sharing provider serving the tree, a
    child) must make the next search look again."""
    compute = client.provider("cn1", VCPU=4)
    disk = client.provider("disk", DISK_GB=100)
    client.traits(disk, "MISC_SHARES_VIA_AGGREGATE")
    aggregate = str(uuid_lib.uuid4())
    for provider_uuid in (compute, disk):
        client.call("PUT", f"/resource_providers/{provider_uuid}/aggregates",
                    {"aggregates": [aggregate],
                     "resource_provider_generation": client.generation(provider_uuid)})
    query = "resources=VCPU:1,DISK_GB:50"
    assert client.candidate_sets(query) == [{compute, disk}]
    # the sharing provider fills up through a claim of another tree's consumer
    client.claim(str(uuid_lib.uuid4()), disk, DISK_GB=60)
    assert client.candidate_sets(query) == []

    root = client.provider("root")
    gpus = client.provider("gpus", parent=root, VGPU=4)
    assert client.candidate_sets("resources=VGPU:4") == [{gpus}]
    client.inventories(gpus, VGPU=2)  # the root's own record stays the same
    assert client.candidate_sets("resources=VGPU:4") == []
    client.inventories(gpus, VGPU=8)
    assert client.candidate_sets("resources=VGPU:4") == [{gpus}]


def test_trees_kept_across_filters_follow_usages(client):
    """Requests of one set of classes keep the trees they loaded for the
    later ones, whatever their filters (placement.candidates.tree_view):
    a claim on a compute, or on the disk serving every tree, must show in
    the next request of any filter, and a release too."""
    aggregates = [str(uuid_lib.uuid4()) for _ in range(2)]
    disk = client.provider("disk", DISK_GB=100)
    client.traits(disk, "MISC_SHARES_VIA_AGGREGATE")
    client.call("PUT", f"/resource_providers/{disk}/aggregates", {
        "resource_provider_generation": client.generation(disk), "aggregates": aggregates})
    computes = []
    for index in range(6):
        compute = client.provider(f"cn{index}", VCPU=4)
        client.call("PUT", f"/resource_providers/{compute}/aggregates", {
            "resource_provider_generation": client.generation(compute),
            "aggregates": [aggregates[index % 2]]})
        computes.append(compute)
    query = "resources=VCPU:1,DISK_GB:10"

    def computes_of(member_of: str) -> set[str]:
        return {provider for candidate in client.candidate_sets(f"{query}&{member_of}")
                for provider in candidate} - {disk}

    every = set(computes)
    first, second = set(computes[0::2]), set(computes[1::2])
    assert computes_of(f"member_of={aggregates[0]}") == first
    assert computes_of(f"member_of=in:{aggregates[0]},{aggregates[1]}") == every
    client.claim(str(uuid_lib.uuid4()), computes[0], VCPU=4)
    assert computes_of(f"member_of={aggregates[1]}") == second
    assert computes_of(f"member_of={aggregates[0]}") == first - {computes[0]}
    disk_consumer = str(uuid_lib.uuid4())
    client.claim(disk_consumer, disk, DISK_GB=95)
    assert computes_of(f"member_of=in:{aggregates[0]},{aggregates[1]}") == set()
    assert computes_of(f"member_of={aggregates[1]}") == set()
    client.call("DELETE", f"/allocations/{disk_consumer}")
    assert computes_of(f"member_of={aggregates[1]}") == second
    assert computes_of(f"member_of=in:{aggregates[0]},{aggregates[1]}") == every - {
        computes[0]}


def test_many_sharing_providers_in_few_aggregates_are_reached_through_the_aggregates(
        client, database):
    """Where the trees of many sharing providers are found: each aggregate
    is read once, not once per sharing provider in it (at 100 000 computes,
    500 sharing providers in 5 aggregates made a search's first request
    take a second, and overflowed the copy's memo)."""
    aggregates = [str(uuid_lib.uuid4()) for _ in range(2)]

    def in_aggregate(provider_uuid: str, aggregate: str) -> None:
        client.call("PUT", f"/resource_providers/{provider_uuid}/aggregates", {
            "resource_provider_generation": client.generation(provider_uuid),
            "aggregates": [aggregate]})

    reached = set()
    for index in range(4):
        compute = client.provider(f"cn{index}", VCPU=4)
        in_aggregate(compute, aggregates[index % 2])
        reached.add(compute)
    client.provider("alone", VCPU=4)  # in no aggregate: no sharing provider reaches it
    for index in range(30):
        disk = client.provider(f"disk{index}", DISK_GB=1000)
        client.traits(disk, "MISC_SHARES_VIA_AGGREGATE")
        in_aggregate(disk, aggregates[index % 2])
        reached.add(disk)
    with database.db.reader() as connection:
        copy = follower.current(connection)
        disk_gb = resource_class.id_from_name(connection, "DISK_GB")
    anchors = copy.anchors([(disk_gb, frozenset())], (), ())
    assert {copy.providers[root_id].uuid for root_id in anchors} == reached
    # the trees the class reaches (alone, and as the reach of a request's
    # classes), and those of each aggregate's members
    assert len(copy.memo) == 4
    assert len(client.candidate_sets("resources=VCPU:1,DISK_GB:10")) == 4 * 15


def test_the_trees_of_an_aggregate_within_a_class_reach_are_kept_exact(client, database):
    """The anchors of a class within some aggregates are the trees with
    the class in one of them, whichever other aggregates earlier requests
    of the class asked (each aggregate's part of the class's reach is
    kept with it)."""
    aggregates = [str(uuid_lib.uuid4()) for _ in range(3)]
    with_vcpu: dict[str, set[str]] = {aggregate: set() for aggregate in aggregates}
    for index in range(12):
        inventories = {"VCPU": 4} if index % 3 else {"MEMORY_MB": 1024}
        compute = client.provider(f"cn{index}", **inventories)
        # some in two aggregates
        member_of = {aggregates[index % 3], aggregates[0] if index % 4 == 0 else aggregates[1]}
        client.call("PUT", f"/resource_providers/{compute}/aggregates", {
            "resource_provider_generation": client.generation(compute),
            "aggregates": sorted(member_of)})
        for aggregate in member_of if "VCPU" in inventories else ():
            with_vcpu[aggregate].add(compute)
    with database.db.reader() as connection:
        copy = follower.current(connection)
        vcpu = resource_class.id_from_name(connection, "VCPU")
    for asked in ([0, 1], [1, 2], [2], [0, 1, 2], [0]):
        anchors = copy.anchors([(vcpu, frozenset())],
                               [frozenset(aggregates[index] for index in asked)], ())
        assert {copy.providers[root_id].uuid for root_id in anchors} == set().union(
            *(with_vcpu[aggregates[index]] for index in asked)), asked
        assert list(anchors) == sorted(anchors)


@pytest.fixture
def following(database):
    """The database's copy is followed in this process only during the test."""
    yield database.db.engine
    follower._followers.pop(database.db.engine, None)  # its thread ends


def test_the_copy_follows_the_database_between_requests(client, database, following,
                                                         monkeypatch):
    """A serving process's copy follows the change record in the
    background: after a burst of changes no request is left to read
    them (a worker idle meanwhile would otherwise read them all in its
    next candidates request)."""
    client.provider("first", VCPU=4)
    assert len(client.candidate_sets("resources=VCPU:1")) == 1  # the copy, read
    follower.follow(following, interval=0.02)
    for index in range(30):  # changes no request of this process reads
        client.provider(f"cn{index}", VCPU=4)
    cache = follower._cache_of(database.db.engine)
    with database.db.reader() as connection:
        current = follower.provider_changes.total(connection)
    deadline = time.monotonic() + 10
    while cache.current_total() < current and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cache.current_total() == current
    loads = []
    load = follower._load
    monkeypatch.setattr(follower, "_load", lambda *args: loads.append(args) or load(*args))
    assert len(client.candidate_sets("resources=VCPU:1")) == 31
    assert loads == []  # the request found the copy current


def test_a_forked_process_follows_with_a_thread_of_its_own(following):
    engine = following
    follower.follow(engine, interval=60)
    threads = [thread for thread in threading.enumerate()
               if thread.name == "placement-provider-copy"]
    follower.follow(engine, interval=60)  # once per process
    assert [thread for thread in threading.enumerate()
            if thread.name == "placement-provider-copy"] == threads
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: no thread crossed the fork, it starts one
        try:
            before = threading.active_count()
            follower.follow(engine, interval=60)
            os.write(write, bytes([threading.active_count() - before]))
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    assert os.read(read, 1) == bytes([1])
