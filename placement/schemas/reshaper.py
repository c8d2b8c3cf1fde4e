"""Body schema of ``POST /reshaper`` (1.30+), per microversion."""

from __future__ import annotations

from placement.schemas import allocation, inventory
from placement.versions import Version


def reshape_schema(version: Version) -> dict:
    """Each provider's entry is the body of PUT .../inventories, each
    consumer's the per-consumer schema of POST /allocations."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["inventories", "allocations"],
        "properties": {
            "inventories": {
                "type": "object",
                "minProperties": 1,
                "additionalProperties": False,
                "patternProperties": {allocation.UUID_KEY_PATTERN: inventory.PUT_INVENTORIES},
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
