"""The provider object layer: trees, deletion, and the reusable filter
conditions, against a real (SQLite) database."""

from __future__ import annotations

import dataclasses
import uuid as uuid_lib

import pytest
import sqlalchemy as sa

from placement import exceptions
from placement.db import tables
from placement.objects import aggregate as aggregate_obj
from placement.objects import resource_provider as rp_obj
from placement.objects import trait as trait_obj
from tests.fixtures.providers import VCPU
from tests.fixtures.seed import insert_allocation, insert_inventory

SOME_TRAITS = ["HW_CPU_X86_SSE", "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2"]


@pytest.fixture
def db(database):
    return database.db


def new_uuid() -> str:
    return str(uuid_lib.uuid4())


def make(db, name: str, parent: rp_obj.ResourceProvider | None = None
         ) -> rp_obj.ResourceProvider:
    with db.writer() as conn:
        return rp_obj.create(conn, name, new_uuid(), parent.uuid if parent else None)


def reload(db, provider: rp_obj.ResourceProvider) -> rp_obj.ResourceProvider:
    with db.reader() as conn:
        return rp_obj.get_by_uuid(conn, provider.uuid)


def test_create_normalises_the_uuid(db):
    with db.writer() as conn:
        provider = rp_obj.create(conn, "cn", "urn:uuid:7A4EC4E1C0D44F8C8B7CA1B1B1B1B1B1")
    assert provider.uuid == "7a4ec4e1-c0d4-4f8c-8b7c-a1b1b1b1b1b1"
    assert provider.root_provider_uuid == provider.uuid
    assert provider.parent_provider_uuid is None
    assert provider.generation == 0
    assert provider.created_at is not None


def test_create_refuses_duplicates(db):
    first = make(db, "cn")
    with db.writer() as conn, pytest.raises(rp_obj.DuplicateProvider, match="uuid"):
        rp_obj.create(conn, "other", first.uuid)
    with db.writer() as conn, pytest.raises(rp_obj.DuplicateProvider, match="name: cn"):
        rp_obj.create(conn, "cn", new_uuid())


def test_child_gets_the_root_of_its_parent(db):
    root = make(db, "root")
    child = make(db, "child", root)
    grandchild = make(db, "grandchild", child)
    assert grandchild.parent_provider_uuid == child.uuid
    assert grandchild.root_provider_uuid == root.uuid


def test_moving_a_subtree_rewrites_every_root(db):
    root = make(db, "root")
    other_root = make(db, "other")
    child = make(db, "child", root)
    grandchild = make(db, "grandchild", child)
    great = make(db, "great", grandchild)
    sibling = make(db, "sibling", root)
    with db.writer() as conn:
        rp_obj.update(conn, child.uuid, "child", other_root.uuid, allow_reparenting=True)
    assert reload(db, great).root_provider_uuid == other_root.uuid
    assert reload(db, grandchild).root_provider_uuid == other_root.uuid
    assert reload(db, sibling).root_provider_uuid == root.uuid
    with db.writer() as conn:
        rp_obj.update(conn, grandchild.uuid, "grandchild", None, allow_reparenting=True)
    assert reload(db, great).root_provider_uuid == grandchild.uuid
    assert reload(db, child).root_provider_uuid == other_root.uuid


def test_moving_needs_permission_when_there_is_a_parent(db):
    root = make(db, "root")
    other_root = make(db, "other")
    child = make(db, "child", root)
    with db.writer() as conn, pytest.raises(rp_obj.ProviderActionError) as caught:
        rp_obj.update(conn, child.uuid, "child", other_root.uuid)
    assert caught.value.action == "update"
    assert "re-parenting" in caught.value.reason
    with db.writer() as conn, pytest.raises(rp_obj.ProviderActionError, match="un-parenting"):
        rp_obj.update(conn, child.uuid, "child", None)
    assert reload(db, child).parent_provider_uuid == root.uuid


def test_loops_are_refused_at_any_depth(db):
    root = make(db, "root")
    child = make(db, "child", root)
    grandchild = make(db, "grandchild", child)
    for target in (root, child, grandchild):
        with db.writer() as conn, pytest.raises(rp_obj.ProviderActionError, match="loop"):
            rp_obj.update(conn, root.uuid, "root", target.uuid, allow_reparenting=True)
    assert reload(db, root).parent_provider_uuid is None


def test_unknown_parent_is_reported_as_create(db):
    root = make(db, "root")
    with db.writer() as conn, pytest.raises(rp_obj.ProviderActionError) as caught:
        rp_obj.update(conn, root.uuid, "root", new_uuid())
    assert caught.value.action == "create"


def test_update_does_not_touch_the_generation(db):
    root = make(db, "root")
    with db.writer() as conn:
        rp_obj.increment_generation(conn, root)
        updated = rp_obj.update(conn, root.uuid, "renamed")
    assert updated.name == "renamed"
    assert updated.generation == 1
    assert updated.updated_at is not None


def test_stale_generation_is_a_concurrent_update(db):
    root = make(db, "root")
    stale = reload(db, root)
    with db.writer() as conn:
        rp_obj.increment_generation(conn, root)
    with db.writer() as conn, pytest.raises(exceptions.ConcurrentUpdate):
        rp_obj.increment_generation(conn, stale)
    with pytest.raises(exceptions.ConcurrentUpdate, match="generation already changed"):
        rp_obj.check_generation(reload(db, root), 0)


def test_delete_removes_inventories_traits_and_aggregate_links(db):
    provider = make(db, "cn")
    other = make(db, "other")
    aggregate = new_uuid()
    with db.writer() as conn:
        insert_inventory(conn, provider.id, VCPU, total=4, max_unit=4)
        trait_obj.replace_for_provider(conn, provider, ["HW_CPU_X86_SSE"])
        aggregate_obj.replace(conn, provider, [aggregate])
        aggregate_obj.replace(conn, other, [aggregate])
    with db.writer() as conn:
        rp_obj.delete(conn, provider.uuid)
    with db.reader() as conn:
        for table in (tables.inventories, tables.resource_provider_traits,
                      tables.resource_provider_aggregates):
            assert conn.scalar(sa.select(sa.func.count()).select_from(table).where(
                table.c.resource_provider_id == provider.id)) == 0
        assert aggregate_obj.uuids_of(conn, other) == [aggregate]
        assert rp_obj.find_by_uuid(conn, provider.uuid) is None


def test_delete_refuses_parents_before_allocations(db):
    root = make(db, "root")
    make(db, "child", root)
    with db.writer() as conn:
        insert_allocation(conn, root.id, VCPU, new_uuid(), 1)
    with db.writer() as conn, pytest.raises(rp_obj.ProviderHasChildren):
        rp_obj.delete(conn, root.uuid)


def test_filter_sets_are_selects_of_provider_ids(db):
    full = make(db, "full")
    roomy = make(db, "roomy")
    with db.writer() as conn:
        insert_inventory(conn, full.id, VCPU, total=2, max_unit=2)
        insert_inventory(conn, roomy.id, VCPU, total=2, max_unit=2, allocation_ratio=4.0)
        insert_allocation(conn, full.id, VCPU, new_uuid(), 2)
    with db.reader() as conn:
        assert set(conn.scalars(rp_obj.with_capacity(VCPU, 2))) == {roomy.id}


def test_nested_filter_sets_keep_the_providers_in_all_of_them(db):
    """Capacity, two aggregate sets (a grouped select) and two trait sets,
    each narrowed to the next: only a provider in every set is listed."""
    names = ["all", "no_room", "one_aggregate", "no_avx"]
    providers = {name: make(db, name) for name in names}
    first, second = new_uuid(), new_uuid()
    with db.writer() as conn:
        for name, provider in providers.items():
            insert_inventory(conn, provider.id, VCPU, total=4, max_unit=4)
            if name == "no_room":
                insert_allocation(conn, provider.id, VCPU, new_uuid(), 4)
            aggregate_obj.replace(conn, provider,
                                  [first] if name == "one_aggregate" else [first, second])
            traits = ["HW_CPU_X86_SSE"] + ([] if name == "no_avx" else ["HW_CPU_X86_AVX"])
            trait_obj.replace_for_provider(conn, provider, traits)
        trait_ids = trait_obj.ids_from_names(conn, ["HW_CPU_X86_SSE", "HW_CPU_X86_AVX"])
    filters = rp_obj.ProviderFilters(
        resources={VCPU: 2}, member_of=[{first}, {second}],
        required_traits=[{trait_ids["HW_CPU_X86_SSE"]}, {trait_ids["HW_CPU_X86_AVX"]}])
    with db.reader() as conn:
        assert [provider.name for provider in rp_obj.list_providers(conn, filters)] == ["all"]
        single = dataclasses.replace(filters, member_of=[{first}],
                                     required_traits=[{trait_ids["HW_CPU_X86_SSE"]}])
        assert [provider.name for provider in rp_obj.list_providers(conn, single)] == [
            "all", "one_aggregate", "no_avx"]


def test_list_filters_combine(db):
    gold = make(db, "gold")
    plain = make(db, "plain")
    aggregate = new_uuid()
    with db.writer() as conn:
        sse = trait_obj.ids_from_names(conn, ["HW_CPU_X86_SSE"])["HW_CPU_X86_SSE"]
        trait_obj.replace_for_provider(conn, gold, ["HW_CPU_X86_SSE"])
        aggregate_obj.replace(conn, gold, [aggregate])
        aggregate_obj.replace(conn, plain, [aggregate])
    with db.reader() as conn:
        def names(**kwargs):
            filters = rp_obj.ProviderFilters(**kwargs)
            return [provider.name for provider in rp_obj.list_providers(conn, filters)]

        assert names() == ["gold", "plain"]
        assert names(member_of=[{aggregate}]) == ["gold", "plain"]
        assert names(member_of=[{aggregate}], forbidden_traits={sse}) == ["plain"]
        assert names(required_traits=[{sse}], forbidden_aggregates={aggregate}) == []
        assert names(in_tree=plain.uuid) == ["plain"]
        assert names(in_tree=new_uuid()) == []


def test_filters_given_as_lists_sets_and_dicts_are_one_hashable_value():
    """The list statement is kept per filters (lru_cache): filters given
    in any of the forms callers use are equal and hash alike."""
    given = rp_obj.ProviderFilters(member_of=[{"a", "b"}], forbidden_aggregates={"c"},
                                   resources={VCPU: 2}, required_traits=[{1}, {2, 3}],
                                   forbidden_traits={4})
    frozen = rp_obj.ProviderFilters(
        member_of=(frozenset({"b", "a"}),), forbidden_aggregates=frozenset({"c"}),
        resources=((VCPU, 2),), required_traits=(frozenset({1}), frozenset({3, 2})),
        forbidden_traits=frozenset({4}))
    assert given == frozen and hash(given) == hash(frozen)


def test_a_kept_list_statement_reads_the_rows_anew(db):
    """The statement is kept, not its answer: the same filters again see
    every change since."""
    provider = make(db, "cn")
    filters = rp_obj.ProviderFilters(resources={VCPU: 2})

    def names() -> list[str]:
        with db.reader() as conn:
            return [found.name for found in rp_obj.list_providers(conn, filters)]

    assert names() == []
    with db.writer() as conn:
        insert_inventory(conn, provider.id, VCPU, total=2, max_unit=2)
    assert names() == ["cn"]
    with db.writer() as conn:
        insert_allocation(conn, provider.id, VCPU, new_uuid(), 1)
    assert names() == []


def test_a_thousand_trait_and_aggregate_sets_make_one_cheap_statement(db):
    """A query string can name more sets than SQLite nests ANDs (1000
    levels), and a subquery per set took PostgreSQL minutes to plan."""
    provider = make(db, "cn")
    make(db, "other")
    aggregates = [new_uuid() for _ in range(1000)]
    with db.writer() as conn:
        aggregate_obj.replace(conn, provider, aggregates)
        trait_ids = sorted(trait_obj.ids_from_names(conn, SOME_TRAITS).values())
        trait_obj.set_for_provider(conn, provider.uuid, SOME_TRAITS, provider.generation)

    def names(**kwargs) -> list[str]:
        with db.reader() as conn:
            return [found.name for found in rp_obj.list_providers(
                conn, rp_obj.ProviderFilters(**kwargs))]

    singles = [{uuid} for uuid in aggregates]
    pairs = [{uuid, new_uuid()} for uuid in aggregates]
    assert names(member_of=singles + pairs) == ["cn"]
    assert names(member_of=singles + [{new_uuid()}]) == []
    assert names(member_of=pairs + [{new_uuid(), new_uuid()}]) == []
    assert names(required_traits=[{trait} for trait in trait_ids] * 2) == ["cn"]
    assert names(required_traits=[{trait_ids[0], 0}], member_of=pairs[:1]) == ["cn"]
    assert names(required_traits=[{trait_ids[0]}, {0}]) == []


def test_aggregate_write_losing_the_generation_race(db, monkeypatch):
    provider = make(db, "cn")

    def lose_the_race(connection, provider):
        raise exceptions.ConcurrentUpdate("generation moved")

    monkeypatch.setattr(rp_obj, "increment_generation", lose_the_race)
    with db.writer() as conn, pytest.raises(exceptions.ConcurrentUpdate,
                                            match="^Update conflict: generation moved"):
        aggregate_obj.set_for_provider(conn, provider.uuid, [new_uuid()], generation=0)


def test_parent_uuid_is_looked_up_verbatim(db):
    root = make(db, "root")
    with db.writer() as conn, pytest.raises(rp_obj.ProviderActionError,
                                            match="parent provider UUID does not exist"):
        rp_obj.create(conn, "child", new_uuid(), root.uuid.replace("-", "").upper())


def test_provider_select_names_the_fields_in_order():
    """A row makes a ResourceProvider by position (list_providers makes
    thousands): the SELECT's columns are its fields, in order."""
    columns = [column.name for column in rp_obj.select_providers().selected_columns]
    assert columns == [field.name for field in dataclasses.fields(rp_obj.ResourceProvider)]
