"""Schemas of /resource_providers bodies and query strings."""

from __future__ import annotations

import copy

from placement import versions
from placement.versions import Version

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
    (versions.MIN_VERSION, "name", {"type": "string"}),
    (versions.MIN_VERSION, "uuid", {"type": "string", "format": "uuid"}),
    (versions.PROVIDER_MEMBER_OF_FILTER, "member_of", {"type": "string"}),
    (versions.PROVIDER_RESOURCES_FILTER, "resources", {"type": "string"}),
    (versions.PROVIDER_TREES, "in_tree", {"type": "string", "format": "uuid"}),
    (versions.PROVIDER_REQUIRED_FILTER, "required", {"type": "string"}),
)


def post_schema(version: Version) -> dict:
    return POST_SCHEMA_V1_14 if version >= versions.PROVIDER_TREES else POST_SCHEMA_V1_0


def put_schema(version: Version) -> dict:
    return PUT_SCHEMA_V1_14 if version >= versions.PROVIDER_TREES else PUT_SCHEMA_V1_0


def list_query_schema(version: Version) -> dict:
    return {
        "type": "object",
        "properties": {name: schema for since, name, schema in _QUERY_PARAMS
                       if version >= since},
        "additionalProperties": False,
    }
