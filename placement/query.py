"""Parsing the values of the listing query parameters shared by
``GET /resource_providers`` and ``GET /allocation_candidates``:
``resources``, ``required``, ``member_of``, ``in_tree``, plus ``root_required``
and ``same_subtree`` of the latter.

Each parser takes the raw string value(s) of one parameter and returns
plain data; malformed values raise the 400 the spec words for them (this is
handler-layer code). Nothing here touches the database: names of classes
and traits are checked for existence by the caller afterwards.
"""

from __future__ import annotations

from oslo_utils import uuidutils

from placement import errors, versions
from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.objects import aggregate
from placement.objects.resource_provider import normalize_uuid
from placement.versions import Version

_ANY_OF_PREFIX = "in:"
_FORBIDDEN_PREFIX = "!"
_RESOURCES_FORM = (
    "Badly formed resources parameter. Expected resources query string "
    "parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: {}."
)
_INVALID = "Invalid query string parameters: "

__all__ = [
    "AggregateFilter", "TraitFilter", "parse_in_tree", "parse_member_of", "parse_required",
    "parse_resources", "parse_root_required", "parse_same_subtree",
]


def parse_resources(value: str) -> dict[str, int]:
    """``VCPU:2,MEMORY_MB:1024`` -> ``{"VCPU": 2, "MEMORY_MB": 1024}``
    (a class repeated in the value: the last amount wins)."""
    if not value.strip():
        raise errors.bad_request(_RESOURCES_FORM.format("empty string"))
    resources: dict[str, int] = {}
    for element in value.split(","):
        try:
            class_name, amount_text = element.split(":")
        except ValueError:
            raise errors.bad_request(_RESOURCES_FORM.format(element)) from None
        try:
            amount = int(amount_text)
        except ValueError:
            raise errors.bad_request(
                f"Requested resource {class_name} expected positive integer amount. "
                f"Got: {amount_text}.") from None
        if amount < 1:
            raise errors.bad_request(
                f"Requested resource {class_name} requires amount >= 1. Got: {amount}.")
        resources[class_name] = amount
    return resources


def parse_required(values: list[str], version: Version) -> TraitFilter:
    """Every occurrence of ``required`` (or ``required<S>``), in query order.

    Below 1.39 only the last occurrence counts and ``in:`` is refused;
    from 1.39 all occurrences are ANDed. ``!`` (forbidden) from 1.22.
    """
    allow_any_of = version >= versions.ANY_OF_TRAITS
    if not allow_any_of:
        values = values[-1:]
    result = TraitFilter()
    for value in values:
        _parse_trait_value(value, result, version >= versions.FORBIDDEN_TRAITS, allow_any_of)
    result.required = _each_once(result.required)
    return result


def _each_once(any_of_sets: list[set[str]]) -> list[set[str]]:
    """The sets without repetitions (in first-seen order): a name or a
    parameter given again only adds work to the search."""
    return [set(names) for names in dict.fromkeys(map(frozenset, any_of_sets))]


def parse_root_required(values: list[str]) -> TraitFilter:
    """The ``root_required`` values (1.35+): one occurrence only, forbidden
    traits always allowed, ``in:`` never, no trait both ways."""
    if len(values) > 1:
        raise errors.bad_request(
            "Query parameter 'root_required' may be specified only once.",
            errors.QUERY_DUPLICATE_KEY)
    result = TraitFilter()
    for value in values:
        _parse_trait_value(value, result, allow_forbidden=True, allow_any_of=False)
    result.required = _each_once(result.required)
    conflicting = set().union(*result.required) & result.forbidden
    if conflicting:
        raise errors.bad_request(
            "Conflicting required and forbidden traits found in root_required: "
            + ", ".join(sorted(conflicting)),
            errors.QUERY_BAD_VALUE)
    return result


def _parse_trait_value(value: str, into: TraitFilter, allow_forbidden: bool,
                       allow_any_of: bool) -> None:
    """Add one ``required``-style value to ``into``."""
    if value.startswith(_ANY_OF_PREFIX):
        if not allow_any_of:
            raise errors.bad_request(
                f"{_INVALID}The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported "
                f"since microversion 1.39. Got: {value}")
        any_of = {item.strip() for item in value[len(_ANY_OF_PREFIX):].split(",")}
        if not all(any_of):
            raise errors.bad_request(
                f"{_INVALID}Expected 'required' parameter value of the form: "
                f"in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}")
        if any(item.startswith(_FORBIDDEN_PREFIX) for item in any_of):
            raise errors.bad_request(
                f"{_INVALID}The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not "
                f"support forbidden traits. Got: {value}")
        into.required.append(any_of)
        return

    expected_form = ("HW_CPU_X86_VMX,!CUSTOM_MAGIC" if allow_forbidden
                     else "HW_CPU_X86_VMX,CUSTOM_MAGIC")
    items = [item.strip() for item in value.split(",")]
    if not all(item.lstrip(_FORBIDDEN_PREFIX) for item in items):
        raise errors.bad_request(
            f"{_INVALID}Expected 'required' parameter value of the form: "
            f"{expected_form}. Got an empty trait in: {value}")
    forbidden = {item.lstrip(_FORBIDDEN_PREFIX) for item in items
                 if item.startswith(_FORBIDDEN_PREFIX)}
    if forbidden and not allow_forbidden:
        raise errors.bad_request(
            f"{_INVALID}Expected 'required' parameter value of the form: "
            f"{expected_form}. Got: {value}")
    into.required.extend({item} for item in items if not item.startswith(_FORBIDDEN_PREFIX))
    into.forbidden |= forbidden


def parse_member_of(values: list[str], version: Version, suffix: str = "") -> AggregateFilter:
    """Every occurrence of ``member_of<suffix>``, in query order."""
    if len(values) > 1 and version < versions.MULTIPLE_MEMBER_OF:
        raise errors.bad_request(f"Multiple member_of{suffix} parameters are not supported")
    result = AggregateFilter()
    for value in values:
        forbidden, aggregates = _parse_member_of_value(value)
        if not forbidden:
            result.required.append(aggregates)
            continue
        if version < versions.FORBIDDEN_MEMBER_OF:
            raise errors.bad_request(
                "Forbidden member_of parameters are not supported in the specified "
                "microversion")
        result.forbidden |= aggregates
    result.required = _each_once(result.required)
    return result


def _parse_member_of_value(value: str) -> tuple[bool, set[str]]:
    """One ``member_of`` value -> (is it forbidden, its aggregate uuids)."""
    forbidden = value.startswith(_FORBIDDEN_PREFIX)
    body = value[len(_FORBIDDEN_PREFIX):] if forbidden else value
    if body.startswith(_ANY_OF_PREFIX):
        uuids = body[len(_ANY_OF_PREFIX):].split(",")
    elif "," in body:
        raise errors.bad_request(
            "Multiple values for 'member_of' must be prefixed with the 'in:' or "
            f"'!in:' keyword using the valid microversion. Got: {value}")
    else:
        uuids = [body]
    for uuid in uuids:
        if not uuidutils.is_uuid_like(uuid):
            raise errors.bad_request(
                f"{_INVALID}Expected 'member_of' parameter to contain valid UUID(s). "
                f"Got: {uuid}")
    return forbidden, set(map(aggregate.stored_form, uuids))


def parse_in_tree(value: str) -> str:
    """An ``in_tree<S>`` value: any uuid-like string (lenient), returned in
    the canonical lower-case dashed form providers are stored with."""
    if not uuidutils.is_uuid_like(value.strip()):
        raise errors.bad_request(
            f"{_INVALID}Expected 'in_tree' parameter to be a format of uuid. Got: {value}")
    return normalize_uuid(value.strip())


def parse_provider_uuids(values: list[str]) -> list[str]:
    """The ``provider`` values of an explanation: uuids, canonical form."""
    for value in values:
        if not uuidutils.is_uuid_like(value.strip()):
            raise errors.bad_request(
                f"{_INVALID}Expected 'provider' parameter to be a format of uuid. Got: {value}")
    return [normalize_uuid(value.strip()) for value in values]


def parse_same_subtree(values: list[str]) -> list[list[str]]:
    """Each ``same_subtree`` occurrence (1.36+): a list of group suffixes
    whose providers must lie in one subtree."""
    constraints = []
    for value in values:
        suffixes = [item.strip() for item in value.split(",")]
        if not all(suffixes):
            raise errors.bad_request(
                "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
                errors.QUERY_BAD_VALUE)
        constraints.append(suffixes)
    return constraints
