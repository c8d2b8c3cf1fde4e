"""Query strings of GET /usages."""

from __future__ import annotations

import copy

_NAME = {"type": "string", "minLength": 1, "maxLength": 255}

# GET /usages, 1.9-1.37
USAGES_QUERY = {
    "type": "object",
    "properties": {
        "project_id": copy.deepcopy(_NAME),
        "user_id": copy.deepcopy(_NAME),
    },
    "required": ["project_id"],
    "additionalProperties": False,
}

# GET /usages, 1.38+: filter by consumer type, or the keywords all/unknown.
USAGES_QUERY_V1_38 = copy.deepcopy(USAGES_QUERY)
USAGES_QUERY_V1_38["properties"]["consumer_type"] = {
    **_NAME, "pattern": "^[A-Z0-9_]+$|^all|^unknown$"}
