"""Query-string schema of GET /capacity (an extension of ours, at every
microversion): the query of GET /allocation_candidates at the newest
microversion, with ``limit`` the roots listed, ``group_by=aggregate``,
``drain_provider`` (a uuid, repeatable) and ``drain_aggregate``."""

from __future__ import annotations

import copy

from placement.schemas.allocation_candidate import GET_1_36

_UUID = {"type": "string", "format": "uuid"}

QUERY = copy.deepcopy(GET_1_36)
QUERY["properties"].update({
    "group_by": {"type": "string", "enum": ["aggregate"]},
    "drain_provider": _UUID,
    "drain_aggregate": _UUID,
})
