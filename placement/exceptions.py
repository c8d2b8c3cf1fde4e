"""Domain errors raised by the object layer.

They know nothing of HTTP: ``placement.errors`` maps them to responses.
"""

from __future__ import annotations


class PlacementError(Exception):
    """Base class; ``str(error)`` is the message shown to the client."""


class NotFound(PlacementError):
    """Something named in the request does not exist."""


class Conflict(PlacementError):
    """The request conflicts with the current state (duplicate, in use...)."""


class ConcurrentUpdate(Conflict):
    """A generation did not match: somebody else changed the object first."""


class InvalidInput(PlacementError):
    """A value is well-formed but not acceptable (400)."""


class PolicyNotAuthorized(PlacementError):
    def __init__(self, rule: str):
        super().__init__(f"Policy does not allow {rule} to be performed.")
        self.rule = rule
