"""Domain errors raised by the object layer.

They know nothing of HTTP: ``placement.errors`` maps them to responses.
Each class carries the ``code`` its JSON error body shows (from
microversion 1.23; None: ``placement.undefined_code``).
"""

from __future__ import annotations

# The codes of JSON error bodies that name a domain error.
INVENTORY_INUSE = "placement.inventory.inuse"
CONCURRENT_UPDATE = "placement.concurrent_update"
DUPLICATE_NAME = "placement.duplicate_name"
PROVIDER_IN_USE = "placement.resource_provider.inuse"
PROVIDER_CANNOT_DELETE_PARENT = "placement.resource_provider.cannot_delete_parent"
RESOURCE_PROVIDER_NOT_FOUND = "placement.resource_provider.not_found"


class PlacementError(Exception):
    """Base class; ``str(error)`` is the message shown to the client,
    ``code`` the code of the error body."""

    code: str | None = None


class NotFound(PlacementError):
    """Something named in the request does not exist."""


class Conflict(PlacementError):
    """The request conflicts with the current state (duplicate, in use...)."""


class ConcurrentUpdate(Conflict):
    """A generation did not match: somebody else changed the object first."""

    code = CONCURRENT_UPDATE


class InvalidInput(PlacementError):
    """A value is well-formed but not acceptable (400)."""


class PolicyNotAuthorized(PlacementError):
    def __init__(self, rule: str):
        super().__init__(f"Policy does not allow {rule} to be performed.")
        self.rule = rule
