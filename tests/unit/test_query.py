"""The query-value parsers shared by the two listing APIs."""

from __future__ import annotations

import pytest
import webob.exc

from placement import errors, query, versions
from placement.versions import Version

AGG1 = "11111111-1111-1111-1111-111111111111"
AGG2 = "22222222-2222-2222-2222-222222222222"
AGG3 = "33333333-3333-3333-3333-333333333333"
LATEST = Version(1, 39)


def error_of(function, *args, **kwargs) -> webob.exc.HTTPException:
    with pytest.raises(webob.exc.HTTPBadRequest) as caught:
        function(*args, **kwargs)
    return caught.value


def message_of(function, *args, **kwargs) -> str:
    return error_of(function, *args, **kwargs).detail


def code_of(error: webob.exc.HTTPException) -> str | None:
    """The ``code`` the error body would carry at 1.23+."""
    environ = {versions.ENVIRON_KEY: LATEST}
    body = error.json_formatter("", "400 Bad Request", "Bad Request", environ)
    return body["errors"][0]["code"]


# resources

def test_resources_parsed_to_amounts():
    assert query.parse_resources("VCPU:2,MEMORY_MB:1024") == {"VCPU": 2, "MEMORY_MB": 1024}


def test_resources_repeated_class_last_wins():
    assert query.parse_resources("VCPU:2,VCPU:3") == {"VCPU": 3}


@pytest.mark.parametrize("value", ["", "   "])
def test_resources_empty(value):
    assert message_of(query.parse_resources, value).endswith(
        "Expected resources query string parameter in form: "
        "?resources=VCPU:2,MEMORY_MB:1024. Got: empty string.")


@pytest.mark.parametrize("value, element", [
    ("VCPU", "VCPU"), ("VCPU:1,", ""), ("VCPU:1:2", "VCPU:1:2"), ("VCPU:1,DISK_GB", "DISK_GB"),
], ids=lambda value: "case")
def test_resources_badly_formed_element(value, element):
    assert message_of(query.parse_resources, value) == (
        "Badly formed resources parameter. Expected resources query string "
        f"parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: {element}.")


def test_resources_amount_not_integer():
    assert message_of(query.parse_resources, "VCPU:two") == (
        "Requested resource VCPU expected positive integer amount. Got: two.")


@pytest.mark.parametrize("amount", ["0", "-1"])
def test_resources_amount_below_one(amount):
    assert message_of(query.parse_resources, f"VCPU:{amount}") == (
        f"Requested resource VCPU requires amount >= 1. Got: {amount}.")


# required

def test_required_plain_list_is_and_of_singletons():
    parsed = query.parse_required(["A, B"], Version(1, 18))
    assert parsed.required == [{"A"}, {"B"}]
    assert parsed.forbidden == set()


def test_required_forbidden_from_1_22_with_bangs_stripped():
    parsed = query.parse_required(["A,!B,!!C"], Version(1, 22))
    assert parsed.required == [{"A"}]
    assert parsed.forbidden == {"B", "C"}
    assert parsed.names() == {"A", "B", "C"}


def test_required_forbidden_refused_below_1_22():
    assert message_of(query.parse_required, ["A,!B"], Version(1, 21)) == (
        "Invalid query string parameters: Expected 'required' parameter value of the "
        "form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: A,!B")


@pytest.mark.parametrize("value", ["", "A,,B", "!", "A, "])
def test_required_empty_trait_1_22(value):
    assert message_of(query.parse_required, [value], Version(1, 22)) == (
        "Invalid query string parameters: Expected 'required' parameter value of the "
        f"form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: {value}")


def test_required_empty_trait_below_1_22():
    assert message_of(query.parse_required, ["A,"], Version(1, 21)) == (
        "Invalid query string parameters: Expected 'required' parameter value of the "
        "form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: A,")


def test_required_only_last_occurrence_below_1_39():
    parsed = query.parse_required(["A", "B"], Version(1, 38))
    assert parsed.required == [{"B"}]


def test_required_earlier_bad_occurrence_ignored_below_1_39():
    assert query.parse_required(["A,,", "B"], Version(1, 38)).required == [{"B"}]


def test_required_occurrences_anded_at_1_39():
    parsed = query.parse_required(["A,!C", "in:B,D", "E"], LATEST)
    assert parsed.required == [{"A"}, {"B", "D"}, {"E"}]
    assert parsed.forbidden == {"C"}


def test_required_sets_repeated_count_once():
    parsed = query.parse_required(["A,B,A", "in:B,C", "B", "in:C,B", "A"], LATEST)
    assert parsed.required == [{"A"}, {"B"}, {"B", "C"}]


def test_required_any_of_refused_below_1_39():
    assert message_of(query.parse_required, ["in:A,B"], Version(1, 38)) == (
        "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
        "only supported since microversion 1.39. Got: in:A,B")


@pytest.mark.parametrize(
    "value", ["in:", "in:A,", "in:A,,B"], ids=["empty", "trailing", "middle"])
def test_required_any_of_empty_trait(value):
    assert message_of(query.parse_required, [value], LATEST) == (
        "Invalid query string parameters: Expected 'required' parameter value of the "
        f"form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}")


def test_required_any_of_forbidden_item():
    assert message_of(query.parse_required, ["in:A,!B"], LATEST) == (
        "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
        "does not support forbidden traits. Got: in:A,!B")


def test_trait_filter_satisfaction():
    parsed = query.parse_required(["in:A,B", "C,!D"], LATEST)
    assert parsed.satisfied_by({"B", "C"})
    assert not parsed.satisfied_by({"A"})
    assert not parsed.satisfied_by({"A", "C", "D"})
    assert query.TraitFilter().satisfied_by(set())
    assert not query.TraitFilter()


# root_required

def test_root_required_parsed():
    parsed = query.parse_root_required(["A,!B"])
    assert parsed.required == [{"A"}]
    assert parsed.forbidden == {"B"}


def test_root_required_only_once():
    error = error_of(query.parse_root_required, ["A", "B"])
    assert error.detail == "Query parameter 'root_required' may be specified only once."
    assert code_of(error) == errors.QUERY_DUPLICATE_KEY


def test_root_required_any_of_refused_even_at_1_39():
    assert "only supported since microversion 1.39. Got: in:A" in message_of(
        query.parse_root_required, ["in:A"])


def test_root_required_empty_item():
    assert message_of(query.parse_root_required, ["A,"]).endswith(
        "HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: A,")


def test_root_required_conflict():
    error = error_of(query.parse_root_required, ["B,A,!A,!B,!C"])
    assert error.detail == (
        "Conflicting required and forbidden traits found in root_required: A, B")
    assert code_of(error) == errors.QUERY_BAD_VALUE


# member_of

def test_member_of_forms():
    parsed = query.parse_member_of([AGG1, f"in:{AGG2},{AGG3}"], Version(1, 24))
    assert parsed.required == [{AGG1}, {AGG2, AGG3}]
    assert parsed.forbidden == set()


def test_member_of_forbidden_forms_from_1_32():
    parsed = query.parse_member_of([f"!{AGG1}", f"!in:{AGG2},{AGG3}", AGG1], Version(1, 32))
    assert parsed.required == [{AGG1}]
    assert parsed.forbidden == {AGG1, AGG2, AGG3}
    assert not parsed.satisfied_by({AGG1})
    assert query.AggregateFilter(required=[{AGG1}]).satisfied_by({AGG1, AGG2})


def test_member_of_sets_repeated_count_once():
    parsed = query.parse_member_of([AGG1, f"in:{AGG2},{AGG1}", AGG1, f"in:{AGG1},{AGG2}"],
                                   LATEST)
    assert parsed.required == [{AGG1}, {AGG1, AGG2}]


def test_member_of_forms_too_long_for_the_column_are_canonical():
    upper = AGG2.upper()
    parsed = query.parse_member_of([f"in:urn:uuid:{AGG1},{{{AGG3}}},{upper}",
                                    f"!uuid:{AGG2}"], LATEST)
    assert parsed.required == [{AGG1, AGG3, upper}]
    assert parsed.forbidden == {AGG2}


def test_member_of_forbidden_refused_below_1_32():
    assert message_of(query.parse_member_of, [f"!{AGG1}"], Version(1, 31)) == (
        "Forbidden member_of parameters are not supported in the specified microversion")


def test_member_of_uuid_checked_before_forbidden_version():
    assert "Got: bogus" in message_of(query.parse_member_of, ["!bogus"], Version(1, 31))


def test_member_of_repetition_refused_below_1_24():
    assert message_of(query.parse_member_of, [AGG1, AGG2], Version(1, 23)) == (
        "Multiple member_of parameters are not supported")
    assert message_of(query.parse_member_of, [AGG1, AGG2], Version(1, 23), suffix="1") == (
        "Multiple member_of1 parameters are not supported")


def test_member_of_comma_needs_in_prefix():
    value = f"{AGG1},{AGG2}"
    assert message_of(query.parse_member_of, [value], LATEST) == (
        "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' "
        f"keyword using the valid microversion. Got: {value}")


@pytest.mark.parametrize("value, bad", [
    ("bogus", "bogus"), (f"in:{AGG1},!{AGG2}", f"!{AGG2}"), ("in:", ""), ("", ""),
], ids=lambda value: "case")
def test_member_of_invalid_uuid(value, bad):
    assert message_of(query.parse_member_of, [value], LATEST) == (
        "Invalid query string parameters: Expected 'member_of' parameter to contain "
        f"valid UUID(s). Got: {bad}")


def test_member_of_lenient_uuids_accepted():
    dashless = AGG1.replace("-", "")
    assert query.parse_member_of([dashless], LATEST).required == [{dashless}]


# in_tree

def test_in_tree_lenient_uuid():
    assert query.parse_in_tree(f" {AGG1} ") == AGG1
    assert query.parse_in_tree(AGG1.replace("-", "").upper()) == AGG1


def test_in_tree_invalid():
    assert message_of(query.parse_in_tree, "tree") == (
        "Invalid query string parameters: Expected 'in_tree' parameter to be a format "
        "of uuid. Got: tree")


# same_subtree

def test_same_subtree_each_occurrence_is_a_constraint():
    assert query.parse_same_subtree(["_A, _B", "1"]) == [["_A", "_B"], ["1"]]


@pytest.mark.parametrize("value", ["", "_A,", " ,_A"])
def test_same_subtree_empty_suffix(value):
    error = error_of(query.parse_same_subtree, [value])
    assert error.detail == (
        "Empty string (unsuffixed group) can not be specified in `same_subtree` ")
    assert code_of(error) == errors.QUERY_BAD_VALUE
