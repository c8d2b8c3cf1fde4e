"""The search's data: what it reads of a provider (``Provider``), what it
is asked (``RequestGroup``, ``SearchOptions``) and what it finds (group
candidates and results). No logic beyond what the types themselves say."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.objects.inventory import InventoryUsage

ISOLATE = "isolate"

_Fields = TypeVar("_Fields", bound=tuple)


def maker_of(cls: type[_Fields]) -> Callable[[tuple], _Fields]:
    """Makes a ``cls`` (a NamedTuple) of a tuple of its fields at C speed
    (``tuple.__new__``): calling the class runs its ``__new__`` written in
    Python, which costs twice as much, and an answer makes a result and an
    allocation request per candidate, a thousand of each."""
    return functools.partial(tuple.__new__, cls)


@dataclasses.dataclass(slots=True)
class Provider:
    id: int
    uuid: str
    parent_id: int | None
    root_id: int
    # Only the classes, traits and aggregates the request names are loaded.
    inventories: dict[str, InventoryUsage] = dataclasses.field(default_factory=dict)
    traits: frozenset[str] = frozenset()
    aggregates: frozenset[str] = frozenset()


@dataclasses.dataclass
class RequestGroup:
    suffix: str
    # class name -> amount; empty for a resourceless group
    resources: dict[str, int]
    traits: TraitFilter = dataclasses.field(default_factory=TraitFilter)
    aggregates: AggregateFilter = dataclasses.field(default_factory=AggregateFilter)
    in_tree: str | None = None

    @property
    def granular(self) -> bool:
        return self.suffix != ""


@dataclasses.dataclass
class SearchOptions:
    group_policy: str | None = None
    root_traits: TraitFilter = dataclasses.field(default_factory=TraitFilter)
    # each entry: suffixes whose providers must lie in one subtree
    same_subtree: list[list[str]] = dataclasses.field(default_factory=list)
    nested_aware: bool = True
    limit: int | None = None
    max_candidates: int = -1
    randomize: bool = False
    breadth_first: bool = False


class GroupCandidate(NamedTuple):
    """A tuple: a request makes thousands, and a frozen dataclass costs
    several times more to build."""

    anchor: int
    # (provider id, class name, amount)
    allocations: tuple[tuple[int, str, int], ...]
    providers: frozenset[int]


class Result(NamedTuple):
    """A tuple, as GroupCandidate: a request may make thousands."""

    # (provider id, class name, amount), one per provider and class, in the
    # order the groups added them (a lone group's candidate tuple as it is)
    allocations: tuple[tuple[int, str, int], ...]
    # suffix -> providers mapped by that group
    mappings: dict[str, frozenset[int]]

    def key(self) -> tuple:
        """Identity for de-duplication: allocations and mappings, not anchor."""
        return (frozenset(self.allocations), frozenset(self.mappings.items()))

    def giving(self) -> Iterable[int]:
        """The providers giving resources (one or more times)."""
        return [provider_id for provider_id, _, _ in self.allocations]


class OneProviderResult(NamedTuple):
    """A ``Result`` of one group taking everything from one provider, the
    most common (a root giving all a flavor asks): made without its tuples
    and dicts, which ``allocations`` and ``mappings`` make when asked; a
    request of one group may make a thousand."""

    provider_id: int
    resources: tuple[tuple[str, int], ...]  # (class name, amount): the group's, shared
    suffix: str

    @property
    def allocations(self) -> tuple[tuple[int, str, int], ...]:
        return one_provider_allocations(self.provider_id, self.resources)

    @property
    def mappings(self) -> dict[str, frozenset[int]]:
        return {self.suffix: frozenset((self.provider_id,))}

    key = Result.key

    def giving(self) -> Iterable[int]:
        return (self.provider_id,)


class SpreadResult(NamedTuple):
    """A ``Result`` of one group spread over a tree and the sharing
    providers serving it (a compute's VCPU and memory with a sharing
    disk): the provider giving each class, without the tuples and dicts
    ``allocations`` and ``mappings`` make when asked."""

    choice: tuple[int, ...]  # the provider giving each class of ``resources``
    resources: tuple[tuple[str, int], ...]  # (class name, amount): the group's, shared
    suffix: str

    @property
    def allocations(self) -> tuple[tuple[int, str, int], ...]:
        return tuple([(provider_id, class_name, amount) for provider_id, (class_name, amount)
                      in zip(self.choice, self.resources, strict=True)])

    @property
    def mappings(self) -> dict[str, frozenset[int]]:
        return {self.suffix: frozenset(self.choice)}

    key = Result.key

    def giving(self) -> Iterable[int]:
        return self.choice


new_one_provider_result = maker_of(OneProviderResult)
new_spread_result = maker_of(SpreadResult)


def one_provider_allocations(provider_id: int, resources: tuple[tuple[str, int], ...]
                              ) -> tuple[tuple[int, str, int], ...]:
    # tuple([...]): a list comprehension makes it twice as fast as a
    # generator, and a request may make a thousand of these
    return tuple([(provider_id, class_name, amount) for class_name, amount in resources])
