"""The number of SQL statements one allocation-candidates search runs does
not grow with the number of providers."""

from __future__ import annotations

import sqlalchemy as sa

from placement.candidates import find
from placement.candidates.filters import TraitFilter
from placement.candidates.model import RequestGroup, SearchOptions
from tests.db import FreshDatabase
from tests.fixtures.candidates import ProviderWriter


def build_cloud(database: FreshDatabase, trees: int) -> None:
    """``trees`` compute trees (root with disk, two NUMA children with VCPU,
    a VF provider under each) and one sharing disk for all of them."""
    with database.db.writer() as connection:
        writer = ProviderWriter(connection)
        writer.provider("SHARED", DISK_GB=1000, traits=("MISC_SHARES_VIA_AGGREGATE",),
                        aggregates=("A",))
        for tree in range(trees):
            root = f"T{tree}"
            writer.provider(root, DISK_GB=100, aggregates=("A",), traits=("HW_CPU_X86_AVX",))
            for node in range(2):
                writer.provider(f"{root}N{node}", root, VCPU=8, traits=("HW_NUMA_ROOT",))
                writer.provider(f"{root}N{node}PF", f"{root}N{node}", SRIOV_NET_VF=4)
                writer.allocation(f"{root}N{node}", "VCPU", 1)


def statements_for_search(trees: int) -> tuple[int, int]:
    """(statements run, allocation requests found) for a request with an
    unsuffixed, two granular and a resourceless group."""
    database = FreshDatabase()
    try:
        build_cloud(database, trees)
        statements = []
        sa.event.listen(database.db.engine, "before_cursor_execute",
                        lambda *args: statements.append(args[2]))
        groups = [
            RequestGroup("", {"DISK_GB": 10}),
            RequestGroup("_C", {"VCPU": 1}),
            RequestGroup("_N", {"SRIOV_NET_VF": 1}),
            RequestGroup("_NUMA", {}, TraitFilter(required=[{"HW_NUMA_ROOT"}])),
        ]
        options = SearchOptions(group_policy="none", same_subtree=[["_NUMA", "_C", "_N"]],
                                root_traits=TraitFilter(required=[{"HW_CPU_X86_AVX"}]))
        with database.db.reader() as connection:
            found = find.find(connection, groups, options,
                              summarize_all_classes=True)
        return len(statements), len(found.allocation_requests)
    finally:
        database.close()


def test_statements_do_not_grow_with_providers():
    small_statements, small_found = statements_for_search(trees=2)
    large_statements, large_found = statements_for_search(trees=40)
    # own disk or shared disk, times the two NUMA nodes with their VF
    assert small_found == 2 * 2 * 2
    assert large_found == 40 * 2 * 2
    assert large_statements == small_statements
    assert small_statements <= 12
