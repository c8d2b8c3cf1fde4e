"""Property test: GET /capacity against the brute-force model on random
small clouds (nested and sharing providers included, those of
test_candidates_property), for single-group and granular shapes, with and
without a drain. The model asks GET /allocation_candidates?limit=1 and
claims the first candidate with PUT /allocations until none is left; on
tiny clouds an exhaustive search over every sequence of claims gives the
true maximum. An exact answer equals both; a lower bound is never above
either."""

from __future__ import annotations

import dataclasses
import functools
import os
import urllib.parse
import uuid

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.model import RequestGroup, SearchOptions
from placement.db import tables
from tests.db import FreshDatabase, in_ci
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import PROJECT, ProviderApi, in_process
from tests.functional.test_candidates_property import (
    AGGREGATES,
    CLASSES,
    TRAITS,
    Provider,
    Reference,
    mostly,
    worlds,
    write_world,
)

pytestmark = pytest.mark.slow

# An exhaustive search stops past this many distinct usage states (the
# example then checks against the model only).
EXHAUSTIVE_STATES = 5000
UNKNOWN_AGGREGATE = "00000000-0000-0000-0000-00000000000a"


@st.composite
def shapes(draw) -> tuple[list[RequestGroup], SearchOptions]:
    """One group (unsuffixed or granular), or two granular ones; each
    with one or two classes, sometimes a trait or an aggregate."""
    suffixes = draw(st.sampled_from([[""], ["1"], ["1", "2"], ["", "1"]]))
    groups = []
    for suffix in suffixes:
        resources = draw(st.dictionaries(st.sampled_from(CLASSES), mostly(1, 2),
                                         min_size=1, max_size=draw(mostly(1, 2))))
        traits = draw(mostly(TraitFilter(), TraitFilter([{TRAITS[0]}]),
                             TraitFilter([], {TRAITS[1]})))
        aggregates = draw(mostly(AggregateFilter(), AggregateFilter([{AGGREGATES[0]}])))
        groups.append(RequestGroup(suffix, resources, traits, aggregates))
    return groups, SearchOptions(group_policy=draw(st.sampled_from(["none", "isolate"])))


def query_of(groups: list[RequestGroup], options: SearchOptions) -> str:
    """The query string of the shape, aggregates by the uuids written."""
    pairs = []
    for group in groups:
        suffix = group.suffix
        pairs.append((f"resources{suffix}", ",".join(
            f"{name}:{amount}" for name, amount in group.resources.items())))
        required = [*(name for any_of in group.traits.required for name in any_of),
                    *(f"!{name}" for name in group.traits.forbidden)]
        if required:
            pairs.append((f"required{suffix}", ",".join(required)))
        for any_of in group.aggregates.required:
            pairs.append((f"member_of{suffix}", "in:" + ",".join(
                # an aggregate no provider is in is unknown: any uuid will do
                os.environ.get(f"AGG_{name}_UUID", UNKNOWN_AGGREGATE)
                for name in sorted(any_of))))
    if sum(bool(group.suffix) for group in groups) > 1:
        pairs.append(("group_policy", options.group_policy))
    return urllib.parse.urlencode(pairs, safe=":,!")


def subtree(providers: list[Provider], top: str) -> set[str]:
    """``top`` and its descendants."""
    names = {top}
    for provider in providers:  # parents come before their children
        if provider.parent in names:
            names.add(provider.name)
    return names


def block(database: FreshDatabase, providers: list[Provider], names: set[str]) -> None:
    """The model's drain: nothing left to take from these providers."""
    ids = sa.select(tables.resource_providers.c.id).where(
        tables.resource_providers.c.uuid.in_([os.environ[f"{n}_UUID"] for n in names]))
    with database.db.writer() as connection:
        connection.execute(sa.update(tables.inventories).where(
            tables.inventories.c.resource_provider_id.in_(ids)).values(
            reserved=tables.inventories.c.total))


def brute_force(api: ProviderApi, query: str) -> int:
    """Ask for candidates and claim the first, until there is none."""
    claimed = 0
    while True:
        requests = api.candidates(query + "&limit=1")["allocation_requests"]
        if not requests:
            return claimed
        api.call("PUT", f"/allocations/{uuid.uuid4()}", {
            "allocations": requests[0]["allocations"], "consumer_generation": None,
            "consumer_type": "INSTANCE", **PROJECT})
        claimed += 1


def true_maximum(providers: list[Provider], groups: list[RequestGroup],
                 options: SearchOptions) -> int | None:
    """The most instances any sequence of claims fits (None: too many
    states to try)."""
    world = [dataclasses.replace(provider, inventories={
        name: dataclasses.replace(inventory) for name, inventory in provider.inventories.items()})
        for provider in providers]
    reference = Reference(world)
    inventories = {(p.name, name): inventory for p in world
                   for name, inventory in p.inventories.items()}
    keys = sorted(inventories)

    @functools.cache
    def most(state: tuple[int, ...]) -> int:
        if most.cache_info().currsize > EXHAUSTIVE_STATES:
            raise OverflowError
        for key, used in zip(keys, state, strict=True):
            inventories[key].used = used
        best = 0
        for totals, _ in reference.results(groups, options):
            after = dict(zip(keys, state, strict=True))
            for key, amount in totals:
                after[key] += amount
            best = max(best, 1 + most(tuple(after[key] for key in keys)))
        return best
    try:
        return most(tuple(inventories[key].used for key in keys))
    except (OverflowError, RecursionError):
        return None


@settings(max_examples=40, deadline=None, derandomize=in_ci(), database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds(), shapes(), st.one_of(st.none(), st.integers(0, 6)))
def test_capacity_agrees_with_claiming_the_first_candidate(providers, shape, drained_index):
    groups, options = shape
    drained = (set() if drained_index is None
               else subtree(providers, providers[drained_index % len(providers)].name))
    database = FreshDatabase()
    try:
        for name in AGGREGATES:
            os.environ.pop(f"AGG_{name}_UUID", None)
        write_world(providers, database)
        api = ProviderApi(in_process(build_app(database)))
        query = query_of(groups, options)
        drain = "".join(f"&drain_provider={os.environ[f'{name}_UUID']}"
                        for name in sorted(drained) if name in {p.name for p in providers}
                        and not any(p.name == name and p.parent in drained for p in providers))
        answer = api.call("GET", f"/capacity?{query}{drain}&limit=100")
        block(database, providers, drained)
        claimed = brute_force(api, query)
    finally:
        database.close()
    left = [p for p in providers if p.name not in drained]
    best = true_maximum(left, groups, options) if len(left) <= 4 else None
    if answer["exact"]:
        assert answer["total"] == claimed
        assert best is None or answer["total"] == best
    else:
        assert answer["total"] <= claimed
        assert best is None or answer["total"] <= best
    assert answer["total"] == sum(root["count"] for root in answer["roots"])
    if drained:
        # every consumer on the drained providers (one per inventory in
        # use) is either placed elsewhere or said to be unplaceable
        drain = answer["drain"]
        assert drain["consumers"] == sum(
            1 for p in providers if p.name in drained
            for inventory in p.inventories.values() if inventory.used)
        assert drain["placed"] + len(drain["unplaced"]) == drain["consumers"]
        assert drain["all_placed"] == (not drain["unplaced"])
