"""Schemas of PUT /resource_providers/{uuid}/aggregates bodies."""

from __future__ import annotations

from placement import versions
from placement.versions import Version

_AGGREGATES = {
    "type": "array",
    "items": {"type": "string", "format": "uuid"},
    "uniqueItems": True,
}

# 1.1-1.18: a bare list of aggregate uuids.
PUT_SCHEMA_V1_1 = _AGGREGATES

# 1.19+: the list with the provider generation the client last saw.
PUT_SCHEMA_V1_19 = {
    "type": "object",
    "properties": {
        "aggregates": _AGGREGATES,
        "resource_provider_generation": {"type": "integer"},
    },
    "required": ["aggregates", "resource_provider_generation"],
    "additionalProperties": False,
}


def put_schema(version: Version) -> dict:
    return PUT_SCHEMA_V1_19 if version >= versions.AGGREGATE_GENERATION else PUT_SCHEMA_V1_1
