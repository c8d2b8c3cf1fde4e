"""Schemas of ``GET /capacity/providers``, an extension of ours: every
provider's inventories and usages in one read, for monitoring.

Its filters are those of ``GET /resource_providers`` at the newest
microversion, whatever microversion the request names: the extension has
no versions of its own, and an exporter sending no version header (1.0)
still filters by aggregate, tree or trait."""

from __future__ import annotations

from placement import versions
from placement.schemas import resource_provider, responses

# The microversion whose GET /resource_providers filters this route takes.
FILTERS_VERSION = versions.MAX_VERSION

QUERY_SCHEMA = resource_provider.list_query_schema(FILTERS_VERSION)

# A provider's inventories and usages as GET /resource_providers/{uuid}/
# inventories and /usages show them (the same schemas), under its identity
# and generation as GET /resource_providers shows them at 1.14+.
_INVENTORIES = responses.INVENTORIES[-1].schema["properties"]["inventories"]
_USAGES = responses.PROVIDER_USAGES[-1].schema["properties"]["usages"]
_PROVIDER = {
    "type": "object",
    "properties": {
        "uuid": responses.PROVIDER_UUID,
        "name": {"type": "string", "maxLength": 200},
        "generation": responses.GENERATION,
        "parent_provider_uuid": {"anyOf": [responses.PROVIDER_UUID, {"type": "null"}]},
        "root_provider_uuid": responses.PROVIDER_UUID,
        "inventories": _INVENTORIES,
        "usages": _USAGES,
    },
    "required": ["uuid", "name", "generation", "parent_provider_uuid", "root_provider_uuid",
                 "inventories", "usages"],
    "additionalProperties": False,
}
RESPONSE = [responses.Variant(versions.MIN_VERSION, None, {
    "type": "object",
    "properties": {"resource_providers": {"type": "array", "items": _PROVIDER}},
    "required": ["resource_providers"],
    "additionalProperties": False,
})]
