"""A capacity answer as plain data (what the route returns as JSON and
the command prints): the total, the roots with most room, the counts by
aggregate, how many roots each class binds, and what a drain leaves."""

from __future__ import annotations

import dataclasses
from collections import Counter

import sqlalchemy as sa

from placement.candidates.follower import current
from placement.candidates.model import RequestGroup, SearchOptions
from placement.capacity.count import Counted, count, read_usages
from placement.capacity.drain import Evacuation, drained_providers, evacuate

# Roots listed when the caller names no limit.
DEFAULT_LIMIT = 20


def report(shape: str, counted: Counted, limit: int | None = DEFAULT_LIMIT,
           by_aggregate: bool = False, evacuation: Evacuation | None = None) -> dict:
    """The answer for ``shape`` (its query string)."""
    copy = counted.copy
    roots = sorted(counted.roots.items(), key=lambda item: (-item[1], item[0]))
    bindings = Counter(counted.binding(root_id) for root_id in counted.roots)
    bindings.pop(None, None)
    answer: dict = {
        "shape": shape,
        "total": counted.total,
        "exact": counted.exact,
        "roots_counted": len(roots),
        "roots_with_room": sum(1 for _, count in roots if count),
        "roots": [{"uuid": copy.providers[root_id].uuid, "count": count,
                   "binding": counted.binding(root_id)}
                  for root_id, count in roots[:limit]],
        "binding": dict(sorted(bindings.items())),
    }
    if by_aggregate:
        answer["aggregates"] = {
            uuid: sum(counted.roots.get(root_id, 0) for root_id in copy.aggregate_roots(uuid))
            for uuid in sorted(copy.aggregate_members)}
    if evacuation is not None:
        answer["drain"] = {
            "providers": evacuation.providers,
            "consumers": evacuation.consumers,
            "placed": evacuation.placed,
            "all_placed": evacuation.all_placed,
            "unplaced": [dataclasses.asdict(item) for item in evacuation.unplaced],
        }
    return answer


def capacity_answer(connection: sa.engine.Connection, shape: str, groups: list[RequestGroup],
                    options: SearchOptions, limit: int | None = DEFAULT_LIMIT,
                    by_aggregate: bool = False, drain_providers: list[str] = (),
                    drain_aggregate: str | None = None) -> dict:
    """Count ``shape`` (parsed as ``groups`` and ``options``) with the
    usages read once, drained as asked, and report it."""
    used = read_usages(connection)
    copy = current(connection)
    drained = frozenset()
    evacuation = None
    if drain_providers or drain_aggregate is not None:
        drained = drained_providers(copy, list(drain_providers), drain_aggregate)
        evacuation = evacuate(connection, copy, drained, used)
    counted = count(connection, groups, options, used, drained)
    return report(shape, counted, limit, by_aggregate, evacuation)
