"""Microversions as data: ``Version``, parsing, the supported range and the
named gates (the first version of each feature), read by the handlers, the
schemas, the errors and the OpenAPI document alike. It imports nothing of
placement: any module may read it."""

from __future__ import annotations

from typing import NamedTuple

# Where the microversion layer (placement.microversion) leaves the version
# of a request in its WSGI environ.
ENVIRON_KEY = "placement.microversion"


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
