"""With a limit, the trees are loaded in batches as the search reaches them
(placement.candidates.copy_world.CopyWorld): the answer must be
the first ``limit`` of the answer without a limit, whichever batch the
results come from."""

from __future__ import annotations

import os

import pytest

from placement.candidates import find
from placement.candidates.answers import AllocationRequest
from placement.candidates.filters import TraitFilter
from placement.candidates.model import RequestGroup, SearchOptions
from tests.db import FreshDatabase
from tests.fixtures.candidates import ProviderWriter

TREES = 40


def build_cloud(database: FreshDatabase) -> None:
    """TREES compute trees (root with disk, two NUMA children with VCPU, a
    VF provider under each), then a sharing disk: created last, its own tree
    is the last anchor, but it serves the first ones."""
    with database.db.writer() as connection:
        writer = ProviderWriter(connection)
        for tree in range(TREES):
            root = f"T{tree}"
            writer.provider(root, DISK_GB=100, aggregates=("A",))
            for node in range(2):
                writer.provider(f"{root}N{node}", root, VCPU=8, traits=("HW_NUMA_ROOT",))
                writer.provider(f"{root}N{node}PF", f"{root}N{node}", SRIOV_NET_VF=4)
        writer.provider("SHARED", DISK_GB=1000, traits=("MISC_SHARES_VIA_AGGREGATE",),
                        aggregates=("A",))


@pytest.fixture(scope="module")
def database():
    database = FreshDatabase()
    build_cloud(database)
    yield database
    database.close()


def allocation_requests(database: FreshDatabase, groups: list[RequestGroup],
                        **options) -> list[AllocationRequest]:
    with database.db.reader() as connection:
        return find.find(connection, groups, SearchOptions(**options),
                         summarize_all_classes=True).allocation_requests


REQUESTS = {
    # only the providers holding a requested class are loaded
    "granular": ([RequestGroup("", {"DISK_GB": 10}), RequestGroup("_C", {"VCPU": 1})],
                 {"group_policy": "none"}),
    # whole trees
    "same_subtree": ([RequestGroup("", {"DISK_GB": 10}), RequestGroup("_C", {"VCPU": 1}),
                      RequestGroup("_N", {"SRIOV_NET_VF": 1}),
                      RequestGroup("_NUMA", {}, TraitFilter(required=[{"HW_NUMA_ROOT"}]))],
                     {"group_policy": "none", "same_subtree": [["_NUMA", "_C", "_N"]]}),
}


@pytest.mark.parametrize("name", sorted(REQUESTS))
@pytest.mark.parametrize("limit", [1, 3, 9, 50, 200])
def test_limit_gives_the_first_results(database, name, limit):
    groups, options = REQUESTS[name]
    everything = allocation_requests(database, groups, **options)
    assert len(everything) > 50
    assert allocation_requests(database, groups, limit=limit, **options) == everything[:limit]


def test_results_found_in_a_late_batch(database):
    """Only the 36th tree qualifies: the first batches (8, then 16 trees)
    give nothing, and the sharing disk was loaded with the first."""
    groups = [RequestGroup("", {"DISK_GB": 10}),
              RequestGroup("_C", {"VCPU": 1}, in_tree=os.environ["T35_UUID"])]
    everything = allocation_requests(database, groups, group_policy="none")
    # own disk or shared disk, times the two NUMA nodes
    assert len(everything) == 4
    assert allocation_requests(database, groups, group_policy="none",
                               limit=3) == everything[:3]


@pytest.mark.parametrize("classes", [["VCPU"], ["MEMORY_MB", "VCPU"],
                                     ["DISK_GB", "MEMORY_MB", "VCPU"],
                                     ["DISK_GB", "MEMORY_MB", "VCPU", "VGPU"]])
def test_a_batch_keeps_the_roots_with_room_for_every_class(classes):
    """Which roots of a batch have room is found from the rooms the view
    keeps, a comparison per class (CopyWorld.roots_fitting): a root short
    of any one class, by its usage or by its inventory, gives nothing."""
    database = FreshDatabase()
    try:
        with database.db.writer() as connection:
            writer = ProviderWriter(connection)
            for name in classes:
                writer.provider(f"USED-{name}", **{other: 4 for other in classes})
                writer.allocation(f"USED-{name}", name, 1)
                writer.provider(f"SMALL-{name}",
                                **{other: 3 if other == name else 4 for other in classes})
            writer.provider("FITS", **{name: 4 for name in classes})
        groups = [RequestGroup("", {name: 4 for name in classes})]
        for limit in (None, 10):
            found = allocation_requests(database, groups, limit=limit)
            assert [set(request.allocations) for request in found] == [
                {os.environ["FITS_UUID"]}], limit
    finally:
        database.close()
