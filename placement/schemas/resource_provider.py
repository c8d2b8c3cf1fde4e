"""Schemas of /resource_providers bodies and query strings."""

from __future__ import annotations

import copy

from placement.microversion import Version

_PARENT_UUID = {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]}

POST_SCHEMA_V1_0 = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 200},
        "uuid": {"type": "string", "format": "uuid"},
    },
    "required": ["name"],
    "additionalProperties": False,
}
POST_SCHEMA_V1_14 = copy.deepcopy(POST_SCHEMA_V1_0)
POST_SCHEMA_V1_14["properties"]["parent_provider_uuid"] = _PARENT_UUID

PUT_SCHEMA_V1_0 = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 200}},
    "required": ["name"],
    "additionalProperties": False,
}
PUT_SCHEMA_V1_14 = copy.deepcopy(PUT_SCHEMA_V1_0)
PUT_SCHEMA_V1_14["properties"]["parent_provider_uuid"] = _PARENT_UUID

# Query parameters of GET /resource_providers and the version adding each.
_QUERY_PARAMS = (
    ((1, 0), "name", {"type": "string"}),
    ((1, 0), "uuid", {"type": "string", "format": "uuid"}),
    ((1, 3), "member_of", {"type": "string"}),
    ((1, 4), "resources", {"type": "string"}),
    ((1, 14), "in_tree", {"type": "string", "format": "uuid"}),
    ((1, 18), "required", {"type": "string"}),
)


def post_schema(version: Version) -> dict:
    return POST_SCHEMA_V1_14 if version >= (1, 14) else POST_SCHEMA_V1_0


def put_schema(version: Version) -> dict:
    return PUT_SCHEMA_V1_14 if version >= (1, 14) else PUT_SCHEMA_V1_0


def list_query_schema(version: Version) -> dict:
    return {
        "type": "object",
        "properties": {name: schema for since, name, schema in _QUERY_PARAMS
                       if version >= since},
        "additionalProperties": False,
    }
