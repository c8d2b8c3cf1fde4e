"""Bodies of the resource class routes."""

from __future__ import annotations

CUSTOM_PATTERN = "^CUSTOM_[A-Z0-9_]+$"

# POST /resource_classes; PUT /resource_classes/{name} 1.2-1.6 (the new
# name); at 1.7+ the {name} of the PUT path, as if it were this body.
RESOURCE_CLASS = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": CUSTOM_PATTERN, "maxLength": 255},
    },
    "required": ["name"],
    "additionalProperties": False,
}
