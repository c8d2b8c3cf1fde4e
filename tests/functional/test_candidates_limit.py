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
