"""Bodies of the inventory routes."""

from __future__ import annotations

import copy

RC_PATTERN = "^[A-Z0-9_]+$"
MAX_INT = 2147483647
SQL_FLOAT_MAX = 3.40282e+38

_FIELDS = {
    "resource_provider_generation": {"type": "integer"},
    "total": {"type": "integer", "minimum": 1, "maximum": MAX_INT},
    "reserved": {"type": "integer", "minimum": 0, "maximum": MAX_INT},
    "min_unit": {"type": "integer", "minimum": 1, "maximum": MAX_INT},
    "max_unit": {"type": "integer", "minimum": 1, "maximum": MAX_INT},
    "step_size": {"type": "integer", "minimum": 1, "maximum": MAX_INT},
    "allocation_ratio": {"type": "number", "maximum": SQL_FLOAT_MAX},
}

# PUT /resource_providers/{uuid}/inventories/{resource_class}
PUT_INVENTORY = {
    "type": "object",
    "properties": copy.deepcopy(_FIELDS),
    "required": ["total", "resource_provider_generation"],
    "additionalProperties": False,
}

# POST /resource_providers/{uuid}/inventories
POST_INVENTORY = {
    "type": "object",
    "properties": {
        **copy.deepcopy(_FIELDS),
        "resource_class": {"type": "string", "pattern": RC_PATTERN},
    },
    "required": ["total", "resource_class"],
    "additionalProperties": False,
}

# One record of PUT /resource_providers/{uuid}/inventories
_RECORD = {
    "type": "object",
    "properties": copy.deepcopy(_FIELDS),
    "required": ["total"],
    "additionalProperties": False,
}

# PUT /resource_providers/{uuid}/inventories; also one provider's entry of
# POST /reshaper. Keys of "inventories" not matching the pattern are left to
# fail as unknown resource classes.
PUT_INVENTORIES = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {
            "type": "object",
            "patternProperties": {RC_PATTERN: _RECORD},
        },
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}
