"""Provider summaries: every provider of every tree giving resources to a
result, with the usages the search read, each kept with its provider while
its usages are the same."""

from __future__ import annotations

import sqlalchemy as sa

from placement.candidates.answers import ProviderSummary, ResourceSummary
from placement.candidates.copy_world import CopyWorld
from placement.candidates.kept import SUMMARY_BYTES
from placement.candidates.memo import Key
from placement.candidates.model import OneProviderResult, Result
from placement.candidates.provider_copy import CachedProvider, ProviderCopy
from placement.objects import resource_class


class _Summary(Key["tuple[tuple[int, ...], ProviderSummary]"]):
    """A provider's summary, with the usages it was made with."""
    # only_classes: frozenset[str] | None (None: every class)
    __slots__ = ()


def summaries(connection: sa.engine.Connection, copy: ProviderCopy, world: CopyWorld,
               results: list[Result | OneProviderResult], nested_aware: bool,
               only_classes: set[str] | None) -> list[ProviderSummary]:
    """Every provider of every tree giving resources to a result (only the
    giving providers themselves below 1.29 in a nested world), with the
    usages ``world`` searched with."""
    # a result of one provider (nearly all) names it first: no call for those
    giving = {result[0] for result in results if type(result) is OneProviderResult}
    giving.update(*[result.giving() for result in results
                    if type(result) is not OneProviderResult])
    if nested_aware or not copy.has_nesting:
        roots = {copy.providers[provider_id].root_id for provider_id in giving}
        wanted = sorted(provider_id for root_id in roots for provider_id in copy.trees[root_id])
    else:
        wanted = sorted(giving)
    all_usages = world.all_usages
    used = world.usages_of([provider_id for provider_id in wanted
                            if provider_id not in all_usages])
    summaries = []
    missing = []  # (index, record, usages) of the summaries to make
    key = _Summary(None if only_classes is None else frozenset(only_classes))
    providers = copy.providers
    for provider_id in wanted:
        provider = providers[provider_id]
        usages = all_usages.get(provider_id)
        if usages is None:
            usages = tuple([used.get((provider_id, class_id), 0)
                            for class_id in provider.inventories])
            if not any(usages):
                usages = ()
        kept = provider.memo.get(key)
        if kept is not None and kept[0] == usages:
            summaries.append(kept[1])
        else:
            missing.append((len(summaries), provider, usages))
            summaries.append(None)
    class_names = resource_class.names_from_ids(connection, {
        class_id for _, provider, _ in missing for class_id in provider.inventories})
    for index, provider, usages in missing:
        summaries[index] = summary = _summary(copy, provider, dict(
            zip(provider.inventories, usages or [0] * len(provider.inventories), strict=True)),
            class_names, only_classes)
        copy.remember(provider, key, (usages, summary), SUMMARY_BYTES)
    return summaries


def _summary(copy: ProviderCopy, provider: CachedProvider, used: dict[int, int],
             class_names: dict[int, str], only_classes: set[str] | None) -> ProviderSummary:
    resources = {}
    for class_id in sorted(provider.inventories):
        class_name = class_names[class_id]
        if only_classes is None or class_name in only_classes:
            resources[class_name] = ResourceSummary(provider.inventories[class_id].capacity,
                                                    used[class_id])
    return ProviderSummary(
        uuid=provider.uuid,
        parent_provider_uuid=(None if provider.parent_id is None
                              else copy.providers[provider.parent_id].uuid),
        root_provider_uuid=copy.providers[provider.root_id].uuid,
        resources=resources,
        traits=list(provider.trait_names),
    )

