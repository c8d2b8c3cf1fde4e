"""Body schemas of ``PUT /allocations/{consumer_uuid}`` and ``POST
/allocations``, per microversion. The per-consumer schema of POST is also
the ``allocations`` part of ``POST /reshaper``."""

from __future__ import annotations

import copy

from placement import versions
from placement.versions import Version

UUID_KEY_PATTERN = "^[0-9a-fA-F-]{36}$"
RESOURCE_CLASS_PATTERN = "^[A-Z0-9_]+$"

RESOURCES = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "patternProperties": {RESOURCE_CLASS_PATTERN: {"type": "integer", "minimum": 1}},
}

PROJECT_OR_USER = {"type": "string", "minLength": 1, "maxLength": 255}

# Accepted and ignored (1.34+). Deliberately without additionalProperties.
MAPPINGS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        "^[a-zA-Z0-9_-]{1,64}$": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "format": "uuid"},
        },
    },
}

CONSUMER_TYPE = {
    "type": "string",
    "pattern": "^[A-Z0-9_]+$",
    "minLength": 1,
    "maxLength": 255,
}

# 1.0-1.7: a list of {resource_provider: {uuid}, resources}.
PUT_LIST_FORM = {
    "type": "object",
    "additionalProperties": False,
    "required": ["allocations"],
    "properties": {
        "allocations": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["resource_provider", "resources"],
                "properties": {
                    "resource_provider": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["uuid"],
                        "properties": {"uuid": {"type": "string", "format": "uuid"}},
                    },
                    "resources": RESOURCES,
                },
            },
        },
    },
}

# 1.8-1.11: the list form with the owner of the consumer.
PUT_LIST_FORM_WITH_OWNER = copy.deepcopy(PUT_LIST_FORM)
PUT_LIST_FORM_WITH_OWNER["properties"].update(
    project_id=PROJECT_OR_USER, user_id=PROJECT_OR_USER)
PUT_LIST_FORM_WITH_OWNER["required"] = ["allocations", "project_id", "user_id"]

# 1.12-1.27: allocations keyed by provider uuid.
PUT_DICT_FORM = {
    "type": "object",
    "additionalProperties": False,
    "required": ["allocations", "project_id", "user_id"],
    "properties": {
        "allocations": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": False,
            "patternProperties": {
                UUID_KEY_PATTERN: {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["resources"],
                    "properties": {
                        # What GET /allocations/{c} shows; accepted, ignored.
                        "generation": {"type": "integer"},
                        "resources": RESOURCES,
                    },
                },
            },
        },
        "project_id": PROJECT_OR_USER,
        "user_id": PROJECT_OR_USER,
    },
}


def _extended(schema: dict, required: bool = True, allow_empty: bool = False,
              **properties: dict) -> dict:
    """A copy of ``schema`` with more properties (required unless told),
    optionally allowing an empty ``allocations`` object."""
    extended = copy.deepcopy(schema)
    extended["properties"].update(properties)
    if required:
        extended["required"] = extended["required"] + list(properties)
    if allow_empty:
        extended["properties"]["allocations"]["minProperties"] = 0
    return extended


# POST /allocations, 1.13-1.27: as the 1.12 PUT, an empty object clears.
CONSUMER_V1_13 = _extended(PUT_DICT_FORM, allow_empty=True)
# 1.28: the generation the client expects (null for a new consumer).
PUT_V1_28 = _extended(CONSUMER_V1_13, consumer_generation={"type": ["integer", "null"]})
PUT_V1_34 = _extended(PUT_V1_28, required=False, mappings=MAPPINGS)
PUT_V1_38 = _extended(PUT_V1_34, consumer_type=CONSUMER_TYPE)

# Newest first: the first entry whose version is <= the request's applies.
_PUT_SCHEMAS = [
    (versions.CONSUMER_TYPES, PUT_V1_38),
    (versions.MAPPINGS, PUT_V1_34),
    (versions.CONSUMER_GENERATION, PUT_V1_28),
    (versions.DICT_ALLOCATIONS, PUT_DICT_FORM),
    (versions.ALLOCATION_OWNER, PUT_LIST_FORM_WITH_OWNER),
    (versions.MIN_VERSION, PUT_LIST_FORM),
]
_CONSUMER_SCHEMAS = [
    (versions.CONSUMER_TYPES, PUT_V1_38),
    (versions.MAPPINGS, PUT_V1_34),
    (versions.CONSUMER_GENERATION, PUT_V1_28),
    (versions.POST_ALLOCATIONS, CONSUMER_V1_13),
]


def _for_version(schemas: list[tuple[tuple[int, int], dict]], version: Version) -> dict:
    for since, schema in schemas:
        if version >= since:
            return schema
    raise ValueError(f"no schema for microversion {version}")


def put_schema(version: Version) -> dict:
    """Body of ``PUT /allocations/{consumer_uuid}``."""
    return _for_version(_PUT_SCHEMAS, version)


def consumer_schema(version: Version) -> dict:
    """One consumer's entry in ``POST /allocations`` (1.13+) and in the
    ``allocations`` of ``POST /reshaper``."""
    return _for_version(_CONSUMER_SCHEMAS, version)


def post_schema(version: Version) -> dict:
    """Body of ``POST /allocations``: consumers keyed by uuid."""
    return {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "patternProperties": {UUID_KEY_PATTERN: consumer_schema(version)},
    }
