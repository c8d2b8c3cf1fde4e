"""Query-string schemas of GET /allocation_candidates, one per microversion
range (``additionalProperties`` is always false)."""

from __future__ import annotations

import copy
import functools

from placement import versions
from placement.versions import Version

_LIMIT = {"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$", "minimum": 1,
          "minLength": 1}
_STRING = {"type": "string"}
_NUMBERED_SUFFIX = "([1-9][0-9]*)?"
_NAMED_SUFFIX = "([a-zA-Z0-9_-]{1,64})?"

GET_1_10 = {
    "type": "object",
    "properties": {"resources": _STRING},
    "required": ["resources"],
    "additionalProperties": False,
}

GET_1_16 = copy.deepcopy(GET_1_10)
GET_1_16["properties"]["limit"] = _LIMIT

GET_1_17 = copy.deepcopy(GET_1_16)
GET_1_17["properties"]["required"] = _STRING

GET_1_21 = copy.deepcopy(GET_1_17)
GET_1_21["properties"]["member_of"] = _STRING


def _granular(prefixes: tuple[str, ...], suffix: str) -> dict:
    return {
        "type": "object",
        "properties": {
            "limit": _LIMIT,
            "group_policy": {"type": "string", "enum": ["none", "isolate"]},
        },
        "patternProperties": {f"^{prefix}{suffix}$": _STRING for prefix in prefixes},
        "additionalProperties": False,
    }


GET_1_25 = _granular(("resources", "required", "member_of"), _NUMBERED_SUFFIX)
GET_1_31 = _granular(("resources", "required", "member_of", "in_tree"), _NUMBERED_SUFFIX)
GET_1_33 = _granular(("resources", "required", "member_of", "in_tree"), _NAMED_SUFFIX)

GET_1_35 = copy.deepcopy(GET_1_33)
GET_1_35["properties"]["root_required"] = _STRING

GET_1_36 = copy.deepcopy(GET_1_35)
GET_1_36["properties"]["same_subtree"] = _STRING

_BY_VERSION = [
    (versions.SAME_SUBTREE, GET_1_36),
    (versions.ROOT_REQUIRED, GET_1_35),
    (versions.ARBITRARY_GROUP_SUFFIXES, GET_1_33),
    (versions.CANDIDATES_IN_TREE, GET_1_31),
    (versions.GRANULAR_REQUESTS, GET_1_25),
    (versions.CANDIDATES_MEMBER_OF, GET_1_21),
    (versions.CANDIDATE_SUMMARY_TRAITS, GET_1_17),
    (versions.CANDIDATES_LIMIT, GET_1_16),
    (versions.ALLOCATION_CANDIDATES, GET_1_10),
]


def query_schema(version: Version) -> dict:
    """The query schema in force at ``version`` (1.10+)."""
    for since, schema in _BY_VERSION:
        if version >= since:
            return schema
    raise ValueError(f"GET /allocation_candidates does not exist at {version}")


@functools.cache
def explain_query_schema(version: Version) -> dict:
    """The query schema of GET /allocation_candidates/explain at ``version``:
    that of the candidates and ``provider`` (a uuid, repeatable)."""
    schema = copy.deepcopy(query_schema(version))
    schema["properties"]["provider"] = _STRING
    return schema
