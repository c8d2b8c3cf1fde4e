"""What the route table (``placement/routes.py``) declares of each endpoint
beside its handler: the microversions it exists in (and what a request
outside them gets), its policy rule, and what the OpenAPI document says of
it (its statuses, bodies and the schemas its handler validates requests
with). The dispatcher enforces the range, ``placement.policies`` makes the
rule's default of it, ``placement.openapi`` the document (and from that the
API reference): nothing about an endpoint is written twice."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from placement import versions as mv
from placement.schemas.responses import Variant

# Where the dispatcher leaves the endpoint of a request in its WSGI environ.
ENVIRON_KEY = "placement.endpoint"

# A range of microversions: first and last (None: the newest), as versions
# or as strings.
Range = tuple["str | mv.Version", "str | mv.Version | None"]

# A schema that may change with the microversion: the function giving it
# (None: no body or no query string at that version).
SchemaSource = Callable[[mv.Version], "dict | None"]

# What the rules of the API default to (placement.policies defines them).
ADMIN = "rule:admin_api"
ADMIN_OR_SERVICE = "rule:admin_or_service_api"
SERVICE = "rule:service_api"
ADMIN_OR_PROJECT_READER_OR_SERVICE = "rule:admin_or_project_reader_or_service_api"


def since(version: mv.Version) -> Range:
    """The range from ``version`` to the newest."""
    return (version, None)


def always(schema: dict) -> SchemaSource:
    """A schema source for a schema that does not change with the version."""
    return lambda version: schema


@dataclass(frozen=True)
class Outcome:
    """One success response: its status, its body variants (None: no body)
    and where in the operation's range it happens (None: everywhere)."""

    status: int
    body: list[Variant] | None = None
    versions: Range | None = None
    location: bool = False
    cache_headers: bool = False
    description: str = ""


# The outcomes most operations have: a body with the cache headers, and a
# deletion.
ok = functools.partial(Outcome, 200, cache_headers=True)
DELETED = Outcome(204, description="Deleted.")


@dataclass(frozen=True)
class Policy:
    """The policy rule a handler asks (``context.can(name)``) and its
    default; several endpoints may share one."""

    name: str
    check_str: str
    description: str


@dataclass(frozen=True)
class Operation:
    summary: str
    outcomes: tuple[Outcome, ...]
    available: Range = since(mv.MIN_VERSION)
    # What a request outside ``available`` gets (the spec's gate status).
    unavailable_status: int = 404
    # The schemas the handler validates its request body and query string
    # with, as the handler gets them (None: no body / no query string).
    body: SchemaSource | None = None
    query: SchemaSource | None = None
    # Errors this operation itself produces, beyond those of every one.
    errors: tuple[int, ...] = ()
    # None: no token needed and no policy asked.
    policy: Policy | None = None
    # A check of the request made before the range is (the spec's order on
    # the provider aggregates routes: the media types first); the handler
    # makes it again, as it makes every other check.
    checked_before_gate: Callable[[object], None] | None = None
    # An additive route of ours, not the original's (GET /capacity): the
    # OpenAPI document marks it (``x-placement-extension``), and the
    # conformance checks leave it out of the original's surface.
    extension: bool = False

    @property
    def authenticated(self) -> bool:
        return self.policy is not None


def protected(*statuses: int) -> tuple[int, ...]:
    """Error statuses of a policy-protected operation (401 no token, 403
    policy), with ``statuses``."""
    return (401, 403, *statuses)


# What an operation writing a JSON body may also answer.
WRITE_JSON = protected(409, 415)


@dataclass(frozen=True)
class Endpoint:
    """One (path, method) of the API: its handler and its operation."""

    handler: Callable
    operation: Operation
