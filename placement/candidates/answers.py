"""What a candidates answer is made of: its allocation requests (the
common kinds made without their dicts, which the API writes as text) and
provider summaries, and how the search's results become requests."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import NamedTuple

from placement.candidates.memo import Memo
from placement.candidates.model import (
    OneProviderResult,
    Provider,
    Result,
    SpreadResult,
    maker_of,
)
from placement.candidates.world import World


class AllocationRequest(NamedTuple):
    # provider uuid -> {resource class: amount} (shared between requests,
    # never changed)
    allocations: dict[str, dict[str, int]]
    # group suffix -> uuids of the providers that satisfied it
    mappings: dict[str, list[str]]


class OneProviderRequest(NamedTuple):
    """An allocation request of one group taking everything from one
    provider, the most common: made, and written (the API's handler),
    without its dicts; ``allocations`` and ``mappings`` make them when
    asked."""

    uuid: str
    resources: dict[str, int]  # shared between requests, never changed
    suffix: str

    @property
    def allocations(self) -> dict[str, dict[str, int]]:
        return {self.uuid: self.resources}

    @property
    def mappings(self) -> dict[str, list[str]]:
        return {self.suffix: [self.uuid]}


class SpreadRequest(NamedTuple):
    """An allocation request of one group spread over a few providers (a
    compute with a sharing provider's disk, a NUMA node and its root),
    the most common after ``OneProviderRequest``: made, and written, as
    (uuid, resources) pairs and the uuids the group maps to."""

    givers: tuple[tuple[str, dict[str, int]], ...]  # resources shared, never changed
    suffix: str
    uuids: tuple[str, ...]  # of the providers, in id order

    @property
    def allocations(self) -> dict[str, dict[str, int]]:
        return dict(self.givers)

    @property
    def mappings(self) -> dict[str, list[str]]:
        return {self.suffix: list(self.uuids)}


@dataclasses.dataclass(slots=True)
class ResourceSummary:
    capacity: int
    used: int


# A provider summary is never changed once made: it serves every request
# while its provider and usages stay the same. ``rendered`` keeps what the
# API makes of it.
@dataclasses.dataclass(slots=True)
class ProviderSummary:
    uuid: str
    parent_provider_uuid: str | None
    root_provider_uuid: str
    resources: dict[str, ResourceSummary]
    traits: list[str]
    rendered: Memo = dataclasses.field(default_factory=Memo, compare=False, repr=False)


@dataclasses.dataclass(slots=True)
class Candidates:
    allocation_requests: list[AllocationRequest | OneProviderRequest | SpreadRequest]
    provider_summaries: list[ProviderSummary]
    # a kept answer is given to several requests (see _KeptAnswer)
    rendered: Memo = dataclasses.field(default_factory=Memo, compare=False, repr=False)


_new_one_provider_request = maker_of(OneProviderRequest)
_new_spread_request = maker_of(SpreadRequest)


def allocation_requests(world: World, results: list[Result | OneProviderResult | SpreadResult]
                         ) -> list[AllocationRequest | OneProviderRequest | SpreadRequest]:
    """The allocation requests of ``results``. Many take the same resources
    of a provider (every request of a lone group taking everything from
    one provider, the disk of a sharing provider in many): those share
    one dict, so that the answer's JSON encodes it once."""
    providers = world.providers
    shared = _SharedResources()
    givers = _SpreadGivers(shared)
    requests: list[AllocationRequest | OneProviderRequest | SpreadRequest] = []
    # the amounts of the last result of one provider, and their dict: the
    # results of a group share one tuple of amounts, whose hash a lookup
    # would compute anew each time
    last_amounts, last_resources = None, None
    for result in results:
        if type(result) is OneProviderResult:  # the most common by far
            provider_id, amounts, suffix = result
            if amounts is not last_amounts:
                last_amounts, last_resources = amounts, shared[amounts]
            requests.append(_new_one_provider_request(
                (providers[provider_id].uuid, last_resources, suffix)))
            continue
        if type(result) is SpreadResult:
            choice, amounts, suffix = result
            requests.append(_new_spread_request((
                tuple([(providers[choice[position]].uuid, resources)
                       for position, resources in givers(choice, amounts)]),
                suffix,
                tuple([providers[provider_id].uuid for provider_id in sorted(set(choice))]))))
            continue
        requests.append(_allocation_request(
            providers, [(provider_id, (class_name, amount))
                        for provider_id, class_name, amount in result.allocations],
            result.mappings, shared))
    return requests


class _SharedResources(dict):
    """(class name, amount) pairs -> the one resources dict of the answer
    taking them (made when first asked)."""

    __slots__ = ()

    def __missing__(self, amounts: tuple[tuple[str, int], ...]) -> dict[str, int]:
        resources = self[amounts] = dict(amounts)
        return resources


class _SpreadGivers:
    """The providers of a spread choice (``SpreadResult``) and what each
    gives: (position in the choice of a provider's first class, its
    resources dict), in order. They depend on the group's resources and on
    where the choice repeats a provider only (for each class, the position
    of the first class taken from the same provider: its pattern), which
    many results share (a compute giving VCPU and memory, a sharing
    provider the disk): worked out once per pattern."""

    __slots__ = ("_shared", "_givers")

    def __init__(self, shared: _SharedResources):
        self._shared = shared
        # pattern -> (the amounts, their givers): the spreads of an answer
        # are of one group, so of one amounts object (a tuple of tuples,
        # whose hash would be computed anew at each lookup)
        self._givers: dict[tuple[int, ...], tuple[tuple, list[tuple[int, dict[str, int]]]]] = {}

    def __call__(self, choice: tuple[int, ...], amounts: tuple[tuple[str, int], ...]
                 ) -> list[tuple[int, dict[str, int]]]:
        pattern = tuple(map(choice.index, choice))
        kept = self._givers.get(pattern)
        if kept is not None and kept[0] is amounts:
            return kept[1]
        amounts_at: dict[int, list[tuple[str, int]]] = {}
        for position, amount in zip(pattern, amounts, strict=True):
            amounts_at.setdefault(position, []).append(amount)
        givers = [(position, self._shared[tuple(given)])
                  for position, given in amounts_at.items()]
        self._givers[pattern] = (amounts, givers)
        return givers


def _allocation_request(providers: dict[int, Provider],
                        given: Iterable[tuple[int, tuple[str, int]]],
                        mappings: dict[str, frozenset[int]], shared: _SharedResources
                        ) -> AllocationRequest | OneProviderRequest:
    """The request giving each (provider id, (class name, amount)) of
    ``given``, mapping each suffix to its providers (ids)."""
    amounts_of: dict[int, list[tuple[str, int]]] = {}
    for provider_id, amount in given:
        if provider_id in amounts_of:
            amounts_of[provider_id].append(amount)
        else:
            amounts_of[provider_id] = [amount]
    if len(amounts_of) == 1 and len(mappings) == 1:
        # one group, one provider: the most common result
        (provider_id, amounts), = amounts_of.items()
        return OneProviderRequest(providers[provider_id].uuid, shared[tuple(amounts)],
                                  next(iter(mappings)))
    allocations: dict[str, dict[str, int]] = {}
    for provider_id, amounts in amounts_of.items():
        allocations[providers[provider_id].uuid] = shared[tuple(amounts)]
    return AllocationRequest(allocations, {
        suffix: [providers[provider_id].uuid for provider_id in sorted(provider_ids)]
        for suffix, provider_ids in mappings.items()})


