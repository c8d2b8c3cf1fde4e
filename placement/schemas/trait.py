"""Schemas of /traits and /resource_providers/{uuid}/traits."""

from __future__ import annotations

CUSTOM_TRAIT = {"type": "string", "pattern": "^CUSTOM_[A-Z0-9_]+$",
                "minLength": 1, "maxLength": 255}

LIST_QUERY_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "associated": {"type": "string"},
    },
    "additionalProperties": False,
}

SET_PROVIDER_TRAITS_SCHEMA = {
    "type": "object",
    "properties": {
        "traits": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 255},
        },
        "resource_provider_generation": {"type": "integer"},
    },
    "required": ["traits", "resource_provider_generation"],
    "additionalProperties": False,
}
