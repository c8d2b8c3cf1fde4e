"""Microversions: parsing the request header, the WSGI layer that does it,
and the version checks handlers use."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import microversion_parse
import webob
import webob.exc

from placement import errors

SERVICE_TYPE = "placement"
HEADER = "openstack-api-version"
ENVIRON_KEY = errors.MICROVERSION_ENVIRON
_ENVIRON_HEADER = "HTTP_" + HEADER.upper().replace("-", "_")


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def before(self) -> Version:
        """The version just before this one (the last without a feature
        gated at this one)."""
        return self._replace(minor=self.minor - 1)

    def matches(self, min_version: str | Version | None = None,
                max_version: str | Version | None = None) -> bool:
        """True when this version lies in [min_version, max_version]."""
        if min_version is not None and self < parse(min_version):
            return False
        return max_version is None or self <= parse(max_version)


MIN_VERSION = Version(1, 0)
MAX_VERSION = Version(1, 39)

# The microversion gates: the first version of each feature (or change of
# shape), read by the handlers, the schemas and the OpenAPI document alike.
PROVIDER_AGGREGATES = Version(1, 1)          # /resource_providers/{uuid}/aggregates
RESOURCE_CLASSES = Version(1, 2)             # /resource_classes
PROVIDER_MEMBER_OF_FILTER = Version(1, 3)    # GET /resource_providers?member_of
PROVIDER_RESOURCES_FILTER = Version(1, 4)    # GET /resource_providers?resources
DELETE_ALL_INVENTORIES = Version(1, 5)       # DELETE .../inventories (405 before)
TRAITS = Version(1, 6)                       # /traits, /resource_providers/{uuid}/traits
# PUT /resource_classes/{name} creates the class named in the path (no body)
# or verifies it exists; before, it renames a custom class to the name in
# the body.
RESOURCE_CLASS_CREATE_OR_VERIFY = Version(1, 7)
ALLOCATION_OWNER = Version(1, 8)             # project_id and user_id of PUT allocations
USAGES = Version(1, 9)                       # GET /usages
ALLOCATION_CANDIDATES = Version(1, 10)       # GET /allocation_candidates
PROVIDER_ALLOCATIONS_LINK = Version(1, 11)   # the provider's "allocations" link
DICT_ALLOCATIONS = Version(1, 12)            # allocations keyed by provider uuid
POST_ALLOCATIONS = Version(1, 13)            # POST /allocations
PROVIDER_TREES = Version(1, 14)              # parent/root provider, in_tree
CACHE_HEADERS = Version(1, 15)               # last-modified and cache-control
CANDIDATES_LIMIT = Version(1, 16)            # GET /allocation_candidates?limit
# Traits in the provider summaries of allocation candidates (and their
# ?required).
CANDIDATE_SUMMARY_TRAITS = Version(1, 17)
PROVIDER_REQUIRED_FILTER = Version(1, 18)    # GET /resource_providers?required
AGGREGATE_GENERATION = Version(1, 19)        # provider generation with aggregates
POST_PROVIDER_RETURNS_BODY = Version(1, 20)  # POST /resource_providers answers 200 + body
CANDIDATES_MEMBER_OF = Version(1, 21)        # GET /allocation_candidates?member_of
# Forbidden traits (!TRAIT) in required filters, hence conflicting
# required and forbidden traits.
FORBIDDEN_TRAITS = Version(1, 22)
ERROR_CODES = Version(1, 23)                 # the "code" of JSON error bodies
MULTIPLE_MEMBER_OF = Version(1, 24)          # member_of given more than once
GRANULAR_REQUESTS = Version(1, 25)           # resourcesN, requiredN, member_ofN, group_policy
RESERVED_MAY_EQUAL_TOTAL = Version(1, 26)    # inventory reserved == total allowed
ALL_CLASSES_IN_SUMMARIES = Version(1, 27)    # every resource class in provider summaries
CONSUMER_GENERATION = Version(1, 28)
NESTED_CANDIDATES = Version(1, 29)           # candidates span provider trees
RESHAPER = Version(1, 30)                    # POST /reshaper
CANDIDATES_IN_TREE = Version(1, 31)          # GET /allocation_candidates?in_tree
FORBIDDEN_MEMBER_OF = Version(1, 32)         # member_of=!...
ARBITRARY_GROUP_SUFFIXES = Version(1, 33)    # resources_SUFFIX
MAPPINGS = Version(1, 34)                    # "mappings" of allocation requests and PUT bodies
ROOT_REQUIRED = Version(1, 35)
SAME_SUBTREE = Version(1, 36)
REPARENTING = Version(1, 37)                 # PUT a provider to another parent
# Consumer types: in allocations, and project usages grouped and filtered
# by them.
CONSUMER_TYPES = Version(1, 38)
ANY_OF_TRAITS = Version(1, 39)               # required=in:A,B


def parse(version_string: str | Version) -> Version:
    """'1.12' -> Version(1, 12) (a Version is returned as it is); ValueError
    with the client-facing text."""
    if isinstance(version_string, Version):
        return version_string
    try:
        major, minor = version_string.split(".", 1)
        return Version(int(major), int(minor))
    except ValueError as error:
        raise ValueError(f"invalid version string: {version_string}; {error}") from None


def version_of(request: webob.Request) -> Version:
    return request.environ[ENVIRON_KEY]


class MicroversionMiddleware:
    """Establishes the request's microversion and stamps it on the response."""

    def __init__(self, application: Callable):
        self.application = application

    def __call__(self, environ: dict, start_response: Callable):
        # Only the one header is handed to the parser (it folds every
        # header it is given).
        header = environ.get(_ENVIRON_HEADER)
        try:
            requested = (None if header is None
                         else microversion_parse.get_version({HEADER: header}, SERVICE_TYPE))
        except ValueError:
            requested = None
        if requested is None:
            version = MIN_VERSION
        elif requested.strip() == "latest":
            version = MAX_VERSION
        else:
            try:
                version = parse(requested)
            except ValueError as error:
                return errors.bad_request(f"Invalid microversion: {error}")(
                    environ, start_response)
            if not MIN_VERSION <= version <= MAX_VERSION or version.major != 1:
                return errors.http_error(
                    webob.exc.HTTPNotAcceptable,
                    f"Invalid microversion: Unacceptable version header: {requested}",
                    extra={"max_version": str(MAX_VERSION), "min_version": str(MIN_VERSION)},
                )(environ, start_response)
        environ[ENVIRON_KEY] = version

        def stamp_version(status, headers, exc_info=None):
            headers = [h for h in headers if h[0].lower() not in (HEADER, "vary")] + [
                (HEADER, f"{SERVICE_TYPE} {version}"),
                ("vary", HEADER),
            ]
            return start_response(status, headers, exc_info)

        return self.application(environ, stamp_version)


def requires(min_version: str | Version, max_version: str | Version | None = None,
             status: type[webob.exc.HTTPException] = webob.exc.HTTPNotFound) -> Callable:
    """Decorator: the handler exists only for versions in the given range;
    outside it the request gets ``status`` (404 unless the spec says 405)."""

    def decorator(handler: Callable) -> Callable:
        @functools.wraps(handler)
        def wrapper(request: webob.Request, *args, **kwargs):
            if not version_of(request).matches(min_version, max_version):
                # Only the generic text of the status, unlike routing's 405.
                headers = []
                if status is webob.exc.HTTPMethodNotAllowed:
                    headers = [("Allow", request.environ["placement.allowed_methods"])]
                raise errors.http_error(status, headers=headers)
            return handler(request, *args, **kwargs)

        return wrapper

    return decorator
