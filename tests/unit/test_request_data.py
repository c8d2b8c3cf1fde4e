"""placement.request_data: where request bytes become data, and what it
refuses. (The whole application's answers: tests/functional/test_error_pipeline.py.)"""

from __future__ import annotations

import json

import pytest
import webob
import webob.exc

from placement import errors, request_data


def refusal(function, *args) -> str:
    with pytest.raises(webob.exc.HTTPBadRequest) as caught:
        function(*args)
    return caught.value.detail


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_valid_bodies_come_back_as_data():
    body = {"a": [1, 2.5, None, True, "é\u2603\U0001f600"], "b": {"c": -2**63}}
    assert request_data.json_body(json.dumps(body).encode(), "object") == body


def test_nesting_is_refused_beyond_the_limit_only():
    assert request_data.json_body(nested(request_data.MAX_DEPTH)) is not None
    assert "nested deeper than 32 levels, at instance[0][0]" in refusal(
        request_data.json_body, nested(request_data.MAX_DEPTH + 1))
    # Deeper than the parser's recursion: refused all the same.
    assert "nested deeper than 32 levels" in refusal(request_data.json_body, nested(10**5))


@pytest.mark.parametrize("integer, accepted", [
    (2**63 - 1, True), (-2**63, True), (2**63, False), (-2**63 - 1, False), (10**30, False),
])
def test_integers_beyond_64_bits_are_refused(integer, accepted):
    raw = json.dumps({"n": integer}).encode()
    if accepted:
        assert request_data.json_body(raw) == {"n": integer}
    else:
        assert "beyond the 64-bit range, at instance['n']" in refusal(
            request_data.json_body, raw)


def test_booleans_are_not_integers_out_of_range():
    assert request_data.json_body(b"[true, false]") == [True, False]


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e309"])
def test_non_finite_numbers_are_refused(literal):
    assert "NaN or infinite" in refusal(request_data.json_body, b'{"x": [' + literal + b"]}")


@pytest.mark.parametrize("raw, problem", [
    (b'{"a": "\\u0000"}', "a string holds a NUL character, at instance['a']"),
    (b'{"a\\u0000": 1}', "a key holds a NUL character, at instance"),
    (b'["\\udfff"]', "a string holds a lone surrogate ('\\udfff'), at instance[0]"),
    (b'{"a": {"\\ud800x": 1}}', "a key holds a lone surrogate ('\\ud800'), at instance['a']"),
])
def test_unstorable_text_is_refused_where_it_is(raw, problem):
    assert problem in refusal(request_data.json_body, raw)


def test_a_surrogate_pair_is_a_character():
    assert request_data.json_body(b'"\\ud83d\\ude00"') == "\U0001f600"


@pytest.mark.parametrize("raw", [b"\xff", b'"\xed\xa0\x80"', b"\xef\xbb\xbf{}", b"", b"{"])
def test_undecodable_bodies_are_malformed_json(raw):
    assert refusal(request_data.json_body, raw).startswith("Malformed JSON: ")


def test_the_top_level_type_is_checked_without_rendering_the_body():
    message = refusal(request_data.json_body, json.dumps(["x" * 1000] * 1000).encode(),
                      "object")
    assert message.endswith("is not of type 'object'")
    assert len(message) < 1000
    assert request_data.json_body(b"[]", "array") == []


def _request(query: str = "", path: str = "/") -> webob.Request:
    request = webob.Request.blank(path)
    request.environ["QUERY_STRING"] = query
    return request


def test_query_parameters_are_checked_once_and_returned():
    request = _request("a=1&a=%C3%A9&b=")
    assert request_data.query(request).getall("a") == ["1", "é"]
    assert request_data.query(request) is request.GET


@pytest.mark.parametrize("query, problem", [
    ("a=%ff", "'utf-8' codec can't decode byte 0xff"),
    ("a=%ed%a0%80", "'utf-8' codec can't decode byte 0xed"),
    ("a=x%00", "parameter 'a' holds a NUL character"),
    ("%00=x", "parameter '\\x00' holds a NUL character"),
    ("a=" + "x" * request_data.MAX_QUERY_STRING,
     f"is {request_data.MAX_QUERY_STRING + 2} bytes long, more than the 16384 accepted"),
])
def test_hostile_query_strings_are_refused(query, problem):
    message = refusal(request_data.query, _request(query))
    assert message.startswith("Invalid query string parameters: ")
    assert problem in message


def test_a_query_string_at_the_limit_is_accepted():
    query = "a=" + "x" * (request_data.MAX_QUERY_STRING - 2)
    assert len(request_data.query(_request(query))["a"]) == request_data.MAX_QUERY_STRING - 2


@pytest.mark.parametrize("path, problem", [
    ("/traits/%ff", "Malformed path: 'utf-8' codec can't decode byte 0xff"),
    ("/traits/a%00", "Malformed path: it holds a NUL character"),
])
def test_hostile_paths_are_refused(path, problem):
    assert problem in refusal(request_data.path, _request(path=path))
    assert request_data.path(_request(path="/traits/%E2%98%83")) == "/traits/\u2603"


def test_messages_and_shown_values_are_bounded():
    assert len(errors.shown("x" * 10**6)) < 100
    assert len(errors.shown(list(range(10**5)))) < 100
    wide_and_deep = [[["x" * 1000] * 1000] * 1000] * 1000
    assert len(errors.shown(wide_and_deep)) < 2500
    error = errors.bad_request("y" * 10**6)
    assert len(error.detail) < errors.MAX_MESSAGE + 100
    assert error.detail.endswith(f"... ({10**6 - errors.MAX_MESSAGE} more characters)")
