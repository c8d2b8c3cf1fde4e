"""Allocation candidates: which sets of providers could satisfy a request now.

``find`` validates the names of the request, takes the providers from this
process's copy (``placement.candidates.provider_copy``, brought up to date
with the database's changes at each request by
``placement.candidates.follower``), searches the world of that copy
(``placement.candidates.copy_world``: the trees with this request's usages,
read as the search goes) with ``placement.candidates.search``, and
describes the answer (``answers``, ``summaries``). A whole answer is kept
for the next request of the same kind. It never writes.
"""

from __future__ import annotations

from typing import NamedTuple

import sqlalchemy as sa

from placement import exceptions, metrics
from placement.candidates.answers import Candidates, allocation_requests
from placement.candidates.copy_world import CopyWorld, UsageRead
from placement.candidates.follower import current_with_usages
from placement.candidates.kept import LISTED_BYTES, REQUEST_BYTES, kept_bytes
from placement.candidates.memo import Key
from placement.candidates.model import RequestGroup, SearchOptions
from placement.candidates.provider_copy import ProviderCopy
from placement.candidates.search import search
from placement.candidates.summaries import summaries
from placement.objects import resource_class, trait


class Prepared(NamedTuple):
    """What a search of the provider copy for one request starts from."""

    copy: ProviderCopy
    world: CopyWorld
    # requested class name -> id
    class_ids: dict[str, int]


def prepare(connection: sa.engine.Connection, groups: list[RequestGroup],
            options: SearchOptions) -> Prepared:
    """The copy and the world to search for ``groups`` (resources keyed
    by class name). Unknown classes or traits raise InvalidInput."""
    # in request order, so that the first unknown name is the one reported
    requested_classes = list(dict.fromkeys(
        name for group in groups for name in group.resources))
    try:
        class_ids = resource_class.ids_from_names(connection, requested_classes)
    except exceptions.NotFound as error:
        raise exceptions.InvalidInput(
            f"Invalid resource class in resources parameter: {error}") from None
    copy, usages = current_with_usages(connection)
    # A trait some provider of the copy has exists (a trait in use cannot
    # be deleted, and the copy is as new as this transaction or newer):
    # only the others are looked up.
    trait_names = [name for traits in [*(group.traits for group in groups), options.root_traits]
                   for name in sorted(traits.names()) if name not in copy.trait_members]
    try:
        trait.ids_from_names(connection, trait_names)
    except exceptions.NotFound as error:
        raise exceptions.InvalidInput(str(error)) from None
    world = CopyWorld(copy, usages, groups, options, class_ids)
    return Prepared(copy, world, class_ids)


def find(connection: sa.engine.Connection, groups: list[RequestGroup],
         options: SearchOptions, summarize_all_classes: bool) -> Candidates:
    """The allocation candidates for ``groups`` (resources keyed by class
    name). Unknown classes or traits raise InvalidInput. Summaries list every
    class a provider has when ``summarize_all_classes``, else only the
    requested ones."""
    copy, world, class_ids = prepare(connection, groups, options)
    # A random order makes every answer new: nothing to keep.
    key = None if options.randomize else _Answer(
        world.shape, options.limit, options.max_candidates, options.breadth_first,
        summarize_all_classes)
    kept = None if key is None else copy.kept.get(key)
    if (isinstance(kept, _KeptAnswer) and kept.serial == copy.serial
            and world.reads_again(kept.reads)):
        metrics.count_kept_answer("allocation_candidates", "given")
        return kept.candidates
    metrics.count_kept_answer("allocation_candidates",
                              "stale" if isinstance(kept, _KeptAnswer) else "none")
    results = search(world, groups, options)
    provider_summaries = summaries(connection, copy, world, results, options.nested_aware,
                           None if summarize_all_classes else set(class_ids))
    candidates = Candidates(allocation_requests(world, results), provider_summaries)
    if key is not None:
        copy.kept.keep_once_asked_before(key, kept, lambda: (
            _KeptAnswer(copy.serial, world.reads, candidates),
            _answer_bytes(world.reads, candidates)), kept_bytes(0))
    return candidates


class _Answer(Key["_KeptAnswer | bool"]):
    """The whole answer to requests of one kind (True: the kind only asked
    once, see KeptStore.keep_once_asked_before)."""
    # shape (CopyWorld.shape), limit, max_candidates, breadth_first,
    # summarize_all_classes
    __slots__ = ()


class _KeptAnswer:
    """An answer, and what it was made from besides the request: the
    copy (by its serial) and the usages the search and the summaries
    read (which providers, from which snapshot). The search being a
    function of those, the answer holds while every read gives again what
    it gave (``CopyWorld.reads_again``)."""

    __slots__ = ("serial", "reads", "candidates")

    def __init__(self, serial: int, reads: list[UsageRead], candidates: Candidates):
        self.serial = serial
        self.reads = reads
        self.candidates = candidates


def _answer_bytes(reads: list[UsageRead], candidates: Candidates) -> int:
    """About what a kept answer holds: its reads, its requests and the
    JSON of the whole answer (``rendered``; its summaries are their
    providers')."""
    return (kept_bytes(sum(len(provider_ids) for provider_ids, _, _ in reads
                           if provider_ids is not None))
            + REQUEST_BYTES * len(candidates.allocation_requests)
            + LISTED_BYTES * len(candidates.provider_summaries))


