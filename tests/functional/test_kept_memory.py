"""What candidate requests and provider lists keep for later ones (the kept
store) is bounded in bytes by ``[placement] allocation_candidates_cache_mb``:
the sizes the store counts must be about what its entries really take, and
a full store must answer as an empty one does."""

from __future__ import annotations

import gc
import random
import tracemalloc
import weakref
from collections.abc import Callable

import pytest

from placement.candidates import copy_world, follower, tree_view
from placement.candidates.kept import VIEW_BYTES, KeptStore
from placement.candidates.provider_copy import ProviderCopy
from placement.objects import resource_class
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import ProviderApi, in_process

pytestmark = pytest.mark.backend("sqlite")  # memory, not SQL, is measured

COMPUTES = 60


def _cloud(client: ProviderApi) -> None:
    """Flat computes, nested ones (two NUMA children) and a sharing disk
    pool, so that results allocate from one, two or three providers."""
    pool = client.provider("pool", DISK_GB=100000)
    aggregate = "00000000-0000-4000-8000-000000000001"
    client.call("PUT", f"/resource_providers/{pool}/traits", {
        "resource_provider_generation": client.generation(pool),
        "traits": ["MISC_SHARES_VIA_AGGREGATE"]})
    for index in range(COMPUTES):
        if index % 3:
            compute = client.provider(f"cn{index}", VCPU=64, MEMORY_MB=65536, DISK_GB=2000)
        else:
            compute = client.provider(f"cn{index}", DISK_GB=2000)
            for numa in range(2):
                client.provider(f"cn{index}-numa{numa}", compute, VCPU=32, MEMORY_MB=32768)
        if index % 2:
            client.call("PUT", f"/resource_providers/{compute}/aggregates", {
                "resource_provider_generation": client.generation(compute),
                "aggregates": [aggregate]})
    client.call("PUT", f"/resource_providers/{pool}/aggregates", {
        "resource_provider_generation": client.generation(pool), "aggregates": [aggregate]})


def _queries(seed: int) -> list[str]:
    """Distinct queries of the shapes schedulers send: every one is of a
    shape of its own, so each keeps new entries."""
    rng = random.Random(seed)
    flat = [f"resources=VCPU:{rng.randint(1, 16)},MEMORY_MB:{512 * rng.randint(1, 64)},"
            f"DISK_GB:{rng.randint(1, 200)}&limit={rng.choice([10, 100, 1000])}"
            for _ in range(15)]
    granular = [f"resources1=VCPU:{rng.randint(1, 4)},MEMORY_MB:{512 * rng.randint(1, 8)}"
                f"&resources2=VCPU:{rng.randint(1, 4)}&resources=DISK_GB:{rng.randint(1, 50)}"
                f"&group_policy=isolate&limit=1000" for _ in range(15)]
    return list(dict.fromkeys(flat + granular))


def _asked_twice(queries: list[str]) -> list[str]:
    """Each query twice in a row: an answer is kept once its kind was
    asked before (find.find)."""
    return [query for query in queries for _ in range(2)]


def _copy(database) -> ProviderCopy:
    with database.db.reader() as connection:
        return follower.current(connection)


def _store(database) -> KeptStore:
    return _copy(database).kept


@pytest.fixture
def cloud(database):
    client = ProviderApi(in_process(build_app(database)))
    _cloud(client)
    return database


def _assert_counted_as_traced(store: KeptStore, keep: Callable[[], object]) -> None:
    """The sizes ``store`` counts for what ``keep`` makes it keep are about
    the memory traced meanwhile."""
    gc.collect()
    tracemalloc.start()
    try:
        traced_before, counted_before = tracemalloc.get_traced_memory()[0], store.size
        keep()
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - traced_before
    finally:
        tracemalloc.stop()
    counted = store.size - counted_before
    assert counted > 1_000_000  # enough was kept to be measured
    assert 0.6 < traced / counted < 1.5, (traced, counted)


def test_the_sizes_counted_are_about_the_memory_the_entries_take(cloud):
    client = ProviderApi(in_process(build_app(cloud)))
    # queries of other amounts first: what requests make once per provider
    # and set of classes (search records, summaries) is not in the store
    for query in _queries(1):
        client.candidates(query)
    _assert_counted_as_traced(_store(cloud), lambda: [
        client.candidates(query) for query in _asked_twice(_queries(2))])


def test_the_sizes_counted_for_providers_memos_and_entries_are_about_their_memory(cloud):
    """The first requests on a new copy make search records, members and
    summaries (providers' memos, counted in the store's size) besides
    entries."""
    client = ProviderApi(in_process(build_app(cloud)))
    assert _store(cloud).size == 0  # the copy, loaded
    _assert_counted_as_traced(_store(cloud), lambda: [
        client.candidates(query) for query in _asked_twice(_queries(1))])


def test_the_sizes_counted_for_provider_lists_are_about_their_memory(cloud):
    client = ProviderApi(in_process(build_app(cloud)))
    client.call("GET", "/resource_providers?resources=VCPU:1")  # the copy, loaded
    _assert_counted_as_traced(_store(cloud), lambda: [  # each list of its own
        client.call("GET", f"/resource_providers?resources=DISK_GB:{amount}")
        for amount in range(1, 21)])


def test_the_size_counted_for_a_tree_view_is_about_its_memory(cloud):
    """A tree view of every tree of the cloud (what requests of one set
    of classes keep, whatever their filters): VIEW_BYTES per record."""
    client = ProviderApi(in_process(build_app(cloud)))
    client.candidates("resources=VCPU:1,MEMORY_MB:512,DISK_GB:10")  # memos made
    with cloud.db.reader() as connection:
        copy, usages = follower.current_with_usages(connection)
        class_ids = resource_class.ids_from_names(connection, ["VCPU", "MEMORY_MB", "DISK_GB"])
    class_names = {class_id: name for name, class_id in class_ids.items()}
    gc.collect()
    tracemalloc.start()
    try:
        traced_before = tracemalloc.get_traced_memory()[0]
        view = tree_view.TreeView(copy, usages, class_names, whole_trees=False)
        for root_id in copy.trees:
            view.members[root_id], view.rooms[root_id]
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - traced_before
    finally:
        tracemalloc.stop()
    counted = VIEW_BYTES * len(view.records)
    assert len(view.records) == len(copy.providers)
    assert 0.6 < traced / counted < 1.5, (traced, counted)


def test_a_store_at_its_bound_answers_as_no_store(cloud):
    # more kinds than fit, each asked twice in a row (the second keeps its
    # answer), then once more (given, unless dropped since)
    kinds = list(dict.fromkeys(query for seed in range(3, 7) for query in _queries(seed)))
    queries = _asked_twice(kinds) + kinds
    # the bound is the process's, for the database: the application built
    # last sets it
    bounded = ProviderApi(in_process(build_app(
        cloud, {("placement", "allocation_candidates_cache_mb"): 1})))
    bounded_answers = [bounded.candidates(query) for query in queries]
    store = _store(cloud)
    # full but for less than an answer (whole answers are kept, tens of kB)
    assert 0.9 * 1024 * 1024 < store.size <= 1024 * 1024
    unkept = ProviderApi(in_process(build_app(
        cloud, {("placement", "allocation_candidates_cache_mb"): 0})))
    assert store.size == 0
    unkept_answers = [unkept.candidates(query) for query in queries]
    assert store.size == 0
    # a bound of 0 keeps nothing in providers' memos either: each memo is
    # emptied as the next is put
    assert sum(len(provider.memo) for provider in _copy(cloud).providers.values()) <= 1
    assert bounded_answers == unkept_answers


def test_a_searchs_world_is_freed_as_its_request_ends(cloud, monkeypatch):
    """Without waiting for the garbage collector: a world holds the
    request's usages and records, and servers collect cycles rarely
    (deploy.GC_THRESHOLDS)."""
    worlds = []
    making = copy_world.CopyWorld.__init__

    def recording(world, *args, **kwargs):
        making(world, *args, **kwargs)
        worlds.append(weakref.ref(world))

    monkeypatch.setattr(copy_world.CopyWorld, "__init__", recording)
    client = ProviderApi(in_process(build_app(cloud)))
    gc.disable()
    try:
        for query in _queries(4)[:5]:
            client.candidates(query)
        assert len(worlds) == 5
        assert [world() for world in worlds] == [None] * 5
    finally:
        gc.enable()


def test_a_tree_view_kept_past_its_copy_lets_the_copy_go(cloud):
    """The view of a set of classes stays in the store after a provider
    changed (a new copy) until those classes are asked again: it must not
    hold the old copy, a copy of the whole cloud the store does not count."""
    client = ProviderApi(in_process(build_app(cloud)))
    client.candidates("resources=VCPU:1,MEMORY_MB:512&member_of=in:"
                      "00000000-0000-4000-8000-000000000001")
    old_copy = weakref.ref(_copy(cloud))
    client.provider("new", VCPU=8)  # a new copy
    client.candidates("resources=DISK_GB:10")  # other classes: another view
    gc.collect()
    assert old_copy() is None
