"""JSON schemas of response bodies, written from the spec, one list of
microversion variants per body.

Nothing in the service validates its own responses with these: they feed
the OpenAPI document (``placement/openapi.py``) and the tests that check
real responses against it. They are strict (``additionalProperties:
false``, exact ``required`` lists) so that a key appearing at the wrong
microversion is caught.
"""

from __future__ import annotations

from typing import NamedTuple

from placement import versions as mv
from placement.versions import Version

RC_PATTERN = "^[A-Z0-9_]+$"
# Provider uuids in responses are the normalised (dashed, lower-case) ones;
# consumer and aggregate uuids are echoed as the client sent them.
PROVIDER_UUID = {"type": "string", "format": "uuid"}
UUID_KEY_PATTERN = "^[0-9a-fA-F-]{36}$"
GENERATION = {"type": "integer", "minimum": 0}
AMOUNT = {"type": "integer", "minimum": 0}


class Variant(NamedTuple):
    """A schema valid from ``min_version`` to ``max_version`` (inclusive;
    None = the newest microversion)."""

    min_version: str | Version
    max_version: str | Version | None
    schema: dict


def _object(properties: dict, required: list[str] | None = None, **keywords) -> dict:
    """A closed object: every property listed is required unless
    ``required`` says otherwise."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
        **keywords,
    }


def _map(value_schema: dict, key_pattern: str = RC_PATTERN) -> dict:
    """An object whose keys match ``key_pattern``, all with ``value_schema``."""
    return {
        "type": "object",
        "patternProperties": {key_pattern: value_schema},
        "additionalProperties": False,
    }


def _links(count: int) -> dict:
    link = _object({"rel": {"type": "string"}, "href": {"type": "string"}})
    return {"type": "array", "items": link, "minItems": count, "maxItems": count}


# --- GET / -------------------------------------------------------------------

ROOT = [Variant(mv.MIN_VERSION, None, _object({
    "versions": {"type": "array", "minItems": 1, "maxItems": 1, "items": _object({
        "id": {"type": "string"},
        "max_version": {"type": "string", "pattern": r"^1\.[0-9]+$"},
        "min_version": {"type": "string", "pattern": r"^1\.[0-9]+$"},
        "status": {"type": "string", "enum": ["CURRENT"]},
        "links": _links(1),
    })},
}))]

# --- resource classes ----------------------------------------------------------

_RESOURCE_CLASS = _object({"name": {"type": "string", "pattern": RC_PATTERN}, "links": _links(1)})
RESOURCE_CLASS = [Variant(mv.RESOURCE_CLASSES, None, _RESOURCE_CLASS)]
RESOURCE_CLASSES = [Variant(mv.RESOURCE_CLASSES, None, _object({
    "resource_classes": {"type": "array", "items": _RESOURCE_CLASS},
}))]

# --- resource providers --------------------------------------------------------


def _resource_provider(links: int, nested: bool) -> dict:
    properties = {
        "uuid": PROVIDER_UUID,
        "name": {"type": "string", "maxLength": 200},
        "generation": GENERATION,
        "links": _links(links),
    }
    if nested:
        properties["parent_provider_uuid"] = {"anyOf": [PROVIDER_UUID, {"type": "null"}]}
        properties["root_provider_uuid"] = PROVIDER_UUID
    return _object(properties)


# (first version, last version, number of links, nested keys) of each shape:
# links grow at 1.1 (aggregates), 1.6 (traits), 1.11 (allocations); the
# parent/root keys appear at 1.14.
_PROVIDER_SHAPES = [
    (mv.MIN_VERSION, mv.PROVIDER_AGGREGATES.before(), 3, False),
    (mv.PROVIDER_AGGREGATES, mv.TRAITS.before(), 4, False),
    (mv.TRAITS, mv.PROVIDER_ALLOCATIONS_LINK.before(), 5, False),
    (mv.PROVIDER_ALLOCATIONS_LINK, mv.PROVIDER_TREES.before(), 6, False),
    (mv.PROVIDER_TREES, None, 6, True),
]

RESOURCE_PROVIDER = [
    Variant(first, last, _resource_provider(links, nested))
    for first, last, links, nested in _PROVIDER_SHAPES
]
RESOURCE_PROVIDERS = [
    Variant(first, last, _object({"resource_providers": {
        "type": "array", "items": _resource_provider(links, nested)}}))
    for first, last, links, nested in _PROVIDER_SHAPES
]

# --- inventories -------------------------------------------------------------

_INVENTORY_FIELDS = {
    "total": {"type": "integer"},
    "reserved": {"type": "integer"},
    "min_unit": {"type": "integer"},
    "max_unit": {"type": "integer"},
    "step_size": {"type": "integer"},
    "allocation_ratio": {"type": "number"},
}
INVENTORY = [Variant(mv.MIN_VERSION, None, _object(
    {"resource_provider_generation": GENERATION, **_INVENTORY_FIELDS}))]
INVENTORIES = [Variant(mv.MIN_VERSION, None, _object({
    "resource_provider_generation": GENERATION,
    "inventories": _map(_object(_INVENTORY_FIELDS)),
}))]

# --- usages --------------------------------------------------------------------

PROVIDER_USAGES = [Variant(mv.MIN_VERSION, None, _object({
    "resource_provider_generation": GENERATION,
    "usages": _map(AMOUNT),
}))]
_CONSUMER_TYPE_USAGE = {
    "type": "object",
    "properties": {"consumer_count": {"type": "integer", "minimum": 0}},
    "required": ["consumer_count"],
    "patternProperties": {RC_PATTERN: AMOUNT},
    "additionalProperties": False,
}
TOTAL_USAGES = [
    Variant(mv.USAGES, mv.CONSUMER_TYPES.before(), _object({"usages": _map(AMOUNT)})),
    Variant(mv.CONSUMER_TYPES, None, _object({
        "usages": _map(_CONSUMER_TYPE_USAGE, key_pattern="^([A-Z0-9_]+|all|unknown)$"),
    })),
]

# --- aggregates ----------------------------------------------------------------

# Aggregate uuids are stored as sent when they fit the column (the lenient
# body validator lets dashless and upper-case forms in), so no format here.
_AGGREGATE_LIST = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
AGGREGATES = [
    Variant(mv.PROVIDER_AGGREGATES, mv.AGGREGATE_GENERATION.before(),
            _object({"aggregates": _AGGREGATE_LIST})),
    Variant(mv.AGGREGATE_GENERATION, None, _object({
        "aggregates": _AGGREGATE_LIST,
        "resource_provider_generation": GENERATION,
    })),
]

# --- traits --------------------------------------------------------------------

_TRAIT_NAMES = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 255}}
TRAITS = [Variant(mv.TRAITS, None, _object({"traits": _TRAIT_NAMES}))]
PROVIDER_TRAITS = [Variant(mv.TRAITS, None, _object({
    "traits": _TRAIT_NAMES,
    "resource_provider_generation": GENERATION,
}))]

# --- allocations ---------------------------------------------------------------

_RESOURCES = {**_map({"type": "integer", "minimum": 1}), "minProperties": 1}
_EXTERNAL_ID = {"type": "string", "minLength": 1, "maxLength": 255}


def _provider_allocations(consumer_generation: bool) -> dict:
    consumer = {"resources": _RESOURCES}
    if consumer_generation:
        consumer["consumer_generation"] = GENERATION
    return _object({
        "allocations": _map(_object(consumer), key_pattern=UUID_KEY_PATTERN),
        "resource_provider_generation": GENERATION,
    })


PROVIDER_ALLOCATIONS = [
    Variant(mv.MIN_VERSION, mv.CONSUMER_GENERATION.before(),
            _provider_allocations(consumer_generation=False)),
    Variant(mv.CONSUMER_GENERATION, None, _provider_allocations(consumer_generation=True)),
]

# A consumer without allocations reads as exactly {"allocations": {}} at
# every microversion; one with allocations adds the owner keys of its version.
_NO_ALLOCATIONS = _object({"allocations": {"type": "object", "maxProperties": 0}})


def _consumer_allocations(owner: bool, generation: bool, consumer_type: bool) -> dict:
    by_provider = _map(_object({"generation": GENERATION, "resources": _RESOURCES}),
                       key_pattern=UUID_KEY_PATTERN)
    properties = {"allocations": {**by_provider, "minProperties": 1}}
    if owner:
        properties["project_id"] = _EXTERNAL_ID
        properties["user_id"] = _EXTERNAL_ID
    if generation:
        properties["consumer_generation"] = GENERATION
    if consumer_type:
        properties["consumer_type"] = {"type": "string",
                                       "pattern": "^([A-Z0-9_]+|unknown)$"}
    return {"oneOf": [_NO_ALLOCATIONS, _object(properties)]}


CONSUMER_ALLOCATIONS = [
    Variant(mv.MIN_VERSION, mv.DICT_ALLOCATIONS.before(),
            _consumer_allocations(False, False, False)),
    Variant(mv.DICT_ALLOCATIONS, mv.CONSUMER_GENERATION.before(),
            _consumer_allocations(True, False, False)),
    Variant(mv.CONSUMER_GENERATION, mv.CONSUMER_TYPES.before(),
            _consumer_allocations(True, True, False)),
    Variant(mv.CONSUMER_TYPES, None, _consumer_allocations(True, True, True)),
]

# --- allocation candidates -----------------------------------------------------


def _allocation_request(dict_form: bool, mappings: bool) -> dict:
    if dict_form:
        allocations = {
            **_map(_object({"resources": _RESOURCES}), key_pattern=UUID_KEY_PATTERN),
            "minProperties": 1,
        }
    else:
        allocations = {"type": "array", "minItems": 1, "items": _object({
            "resource_provider": _object({"uuid": PROVIDER_UUID}),
            "resources": _RESOURCES,
        })}
    properties = {"allocations": allocations}
    if mappings:
        # Suffix ("" for the unsuffixed group) -> providers satisfying it.
        properties["mappings"] = {
            "type": "object",
            "patternProperties": {"^[a-zA-Z0-9_-]{0,64}$": {
                "type": "array", "minItems": 1, "items": PROVIDER_UUID}},
            "additionalProperties": False,
        }
    return _object(properties)


def _provider_summary(traits: bool, tree: bool) -> dict:
    capacity = _object({"capacity": {"type": "integer"}, "used": AMOUNT})
    properties = {"resources": _map(capacity)}
    if traits:
        properties["traits"] = {"type": "array", "items": {"type": "string"}}
    if tree:
        properties["parent_provider_uuid"] = {"anyOf": [PROVIDER_UUID, {"type": "null"}]}
        properties["root_provider_uuid"] = PROVIDER_UUID
    return _object(properties)


# (first, last, dict-form requests, mappings, summary traits, summary tree)
_CANDIDATE_SHAPES = [
    (mv.ALLOCATION_CANDIDATES, mv.DICT_ALLOCATIONS.before(), False, False, False, False),
    (mv.DICT_ALLOCATIONS, mv.CANDIDATE_SUMMARY_TRAITS.before(), True, False, False, False),
    (mv.CANDIDATE_SUMMARY_TRAITS, mv.NESTED_CANDIDATES.before(), True, False, True, False),
    (mv.NESTED_CANDIDATES, mv.MAPPINGS.before(), True, False, True, True),
    (mv.MAPPINGS, None, True, True, True, True),
]

ALLOCATION_CANDIDATES = [
    Variant(first, last, _object({
        "allocation_requests": {"type": "array",
                                "items": _allocation_request(dict_form, mappings)},
        "provider_summaries": _map(_provider_summary(traits, tree),
                                   key_pattern=UUID_KEY_PATTERN),
    }))
    for first, last, dict_form, mappings, traits, tree in _CANDIDATE_SHAPES
]

# --- GET /allocation_candidates/explain ------------------------------------------

_COUNT = _object({"providers": AMOUNT, "trees": AMOUNT})
_NULLABLE_STRING = {"type": ["string", "null"]}
_RULED_OUT = {"anyOf": [{"type": "null"}, _object({
    "constraint": {"type": "string"}, "detail": {"type": "string"},
    "suffix": _NULLABLE_STRING})]}

ALLOCATION_CANDIDATES_EXPLAIN = [Variant(mv.ALLOCATION_CANDIDATES, None, _object({
    "groups": {"type": "array", "items": _object({
        "suffix": {"type": "string"},
        "spread": {"type": "boolean"},
        "steps": {"type": "array", "items": _object({
            "constraint": {"type": "string"},
            "description": {"type": "string"},
            "entered": _COUNT,
            "left": _COUNT,
            "ruled_out": {"anyOf": [{"type": "null"}, _map(AMOUNT, "^[a-z_]+$")]},
        })},
    })},
    "trees": {"type": "array", "items": _object({
        "constraint": {"type": "string"},
        "description": {"type": "string"},
        "entered": AMOUNT,
        "left": AMOUNT,
        "only_through_sharing": {"type": ["integer", "null"], "minimum": 0},
    })},
    "allocation_requests": AMOUNT,
    "providers": {"type": "array", "items": _object({
        "uuid": PROVIDER_UUID,
        "found": {"type": "boolean"},
        "root_provider_uuid": {"anyOf": [{"type": "null"}, PROVIDER_UUID]},
        "ruled_out": _RULED_OUT,
        "groups": {"type": "object", "additionalProperties": _RULED_OUT},
        "allocation_requests": AMOUNT,
    })},
}))]

# An extension of ours (GET /capacity), at every microversion.
_COUNTED_ROOT = _object({"uuid": PROVIDER_UUID, "count": AMOUNT,
                         "binding": {"type": ["string", "null"]}})
CAPACITY = [Variant(mv.MIN_VERSION, None, _object({
    "shape": {"type": "string"},
    "total": AMOUNT,
    "exact": {"type": "boolean"},
    "roots_counted": AMOUNT,
    "roots_with_room": AMOUNT,
    "roots": {"type": "array", "items": _COUNTED_ROOT},
    "binding": _map(AMOUNT),
    "aggregates": _map(AMOUNT, UUID_KEY_PATTERN),
    "drain": _object({
        "providers": {"type": "array", "items": PROVIDER_UUID},
        "consumers": AMOUNT,
        "placed": AMOUNT,
        "all_placed": {"type": "boolean"},
        "unplaced": {"type": "array", "items": _object({
            "consumer": {"type": "string"},
            "resources": _map(AMOUNT),
            "reason": {"type": "string"},
        })},
    }),
}, required=["shape", "total", "exact", "roots_counted", "roots_with_room", "roots",
             "binding"]))]

# --- errors --------------------------------------------------------------------


def _error(code: bool) -> dict:
    properties = {
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "title": {"type": "string"},
        "detail": {"type": "string"},
        "request_id": {"type": "string", "pattern": "^req-"},
    }
    if code:
        properties["code"] = {"type": "string", "pattern": r"^placement\."}
    return _object({"errors": {"type": "array", "minItems": 1, "maxItems": 1,
                               "items": _object(properties)}})


# The error body of the application: ``code`` from 1.23 on.
ERROR = [
    Variant(mv.MIN_VERSION, mv.ERROR_CODES.before(), _error(code=False)),
    Variant(mv.ERROR_CODES, None, _error(code=True)),
]

# A microversion the service does not serve (406) or cannot parse (400):
# no version was established, so no ``code``; the 406 names the range.
_VERSION_ERROR_ITEM = {
    "type": "object",
    "properties": {
        "status": {"type": "integer", "enum": [400, 406]},
        "title": {"type": "string"},
        "detail": {"type": "string"},
        "request_id": {"type": "string", "pattern": "^req-"},
        "max_version": {"type": "string"},
        "min_version": {"type": "string"},
    },
    "required": ["status", "title", "detail", "request_id"],
    "additionalProperties": False,
}
MICROVERSION_ERROR = {
    "type": "object",
    "properties": {"errors": {"type": "array", "minItems": 1, "maxItems": 1,
                              "items": _VERSION_ERROR_ITEM}},
    "required": ["errors"],
    "additionalProperties": False,
}

# 401 from the authentication layer, answered before the microversion is
# read: the error format without ``code``.
UNAUTHORIZED = _error(code=False)
