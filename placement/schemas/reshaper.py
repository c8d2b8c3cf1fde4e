"""Body schema of ``POST /reshaper`` (1.30+), per microversion."""

from __future__ import annotations

from placement.microversion import Version
from placement.schemas import allocation

MAX_INT = 2147483647
SQL_FLOAT_MAX = 3.40282e+38

# The body of PUT /resource_providers/{uuid}/inventories (see inventories.md).
_INVENTORY_RECORD = {
    "type": "object",
    "additionalProperties": False,
    "required": ["total"],
    "properties": {
        "total": {"type": "integer", "minimum": 1, "maximum": MAX_INT},
        "reserved": {"type": "integer", "minimum": 0, "maximum": MAX_INT},
        "min_unit": {"type": "integer", "minimum": 1, "maximum": MAX_INT},
        "max_unit": {"type": "integer", "minimum": 1, "maximum": MAX_INT},
        "step_size": {"type": "integer", "minimum": 1, "maximum": MAX_INT},
        "allocation_ratio": {"type": "number", "maximum": SQL_FLOAT_MAX},
        # Allowed in a record and ignored.
        "resource_provider_generation": {"type": "integer"},
    },
}

PUT_ALL_INVENTORIES = {
    "type": "object",
    "additionalProperties": False,
    "required": ["resource_provider_generation", "inventories"],
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {
            "type": "object",
            "patternProperties": {allocation.RESOURCE_CLASS_PATTERN: _INVENTORY_RECORD},
        },
    },
}


def reshape_schema(version: Version) -> dict:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["inventories", "allocations"],
        "properties": {
            "inventories": {
                "type": "object",
                "minProperties": 1,
                "additionalProperties": False,
                "patternProperties": {allocation.UUID_KEY_PATTERN: PUT_ALL_INVENTORIES},
            },
            "allocations": {
                "type": "object",
                "minProperties": 0,
                "additionalProperties": False,
                "patternProperties": {
                    allocation.UUID_KEY_PATTERN: allocation.consumer_schema(version)},
            },
        },
    }
