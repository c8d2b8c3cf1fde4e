"""Where the bytes of a request become data: the JSON body, the query
string and the path.

What no valid request holds is refused here with a 400 that names the
problem, before any schema, handler or SQL sees it:

- a body that is not UTF-8 or not JSON; JSON nested deeper than
  ``MAX_DEPTH`` levels; non-finite numbers (``NaN``, ``Infinity`` and
  literals such as ``1e400`` that parse as infinity); integers beyond the
  64-bit range of the widest column of any backend (drivers cannot even
  bind them; narrower columns are guarded by the schemas); a body whose
  top-level type is not the schema's;
- a query string longer than ``MAX_QUERY_STRING`` bytes, or not UTF-8 once
  percent-decoded; a path not UTF-8 once percent-decoded;
- in every string of a body, a query string or a path: NUL characters
  (PostgreSQL refuses them in text) and lone surrogates (no driver
  encodes them).
"""

from __future__ import annotations

import json
import math
import re

import webob

from placement import errors

# The deepest valid body (POST /reshaper) has 5 levels. The parser recurses
# once per level, and so do schema validation and error formatting.
MAX_DEPTH = 32
_INTEGER_RANGE = (-2**63, 2**63 - 1)
# Far above the query of any real client (Apache's default limit on the
# whole request line is 8190 bytes), far below what makes a request costly.
MAX_QUERY_STRING = 16 * 1024
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_QUERY_CHECKED = "placement.query_checked"
_JSON_TYPES = {"object": dict, "array": list}


def _location(path: tuple) -> str:
    """Where in the body a value is, as jsonschema words it."""
    return "instance" + "".join(f"[{errors.shown(step)}]" for step in path)


def unstorable_text(value: str) -> str | None:
    """What ``value`` holds that no database column may, or None."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "a NUL character"
    return f"a lone surrogate ({found.group()!a})"


def _check_values(data: object) -> None:
    """Walk the decoded body, without recursion, for the values listed in
    the module docstring."""
    pending: list[tuple[object, tuple]] = [(data, ())]
    while pending:
        value, path = pending.pop()
        problem = None
        if isinstance(value, (dict, list)):
            if len(path) >= MAX_DEPTH:
                problem = f"nested deeper than {MAX_DEPTH} levels"
            elif isinstance(value, dict):
                for key, item in value.items():
                    if (text_problem := unstorable_text(key)) is not None:
                        problem = f"a key holds {text_problem}"
                        break
                    pending.append((item, (*path, key)))
            else:
                pending.extend((item, (*path, index)) for index, item in enumerate(value))
        elif isinstance(value, str):
            if (text_problem := unstorable_text(value)) is not None:
                problem = f"a string holds {text_problem}"
        elif isinstance(value, float):
            if not math.isfinite(value):
                problem = "a number is NaN or infinite (Infinity, or beyond the float range)"
        elif isinstance(value, int) and not isinstance(value, bool):
            if not _INTEGER_RANGE[0] <= value <= _INTEGER_RANGE[1]:
                problem = f"the integer {errors.shown(value)} is beyond the 64-bit range"
        if problem is not None:
            raise errors.bad_request(f"Unacceptable JSON: {problem}, at {_location(path)}")


def json_body(raw: bytes, top_level_type: str | None = None) -> object:
    """The decoded body, checked as the module docstring lists;
    ``top_level_type`` (a schema's ``"object"`` or ``"array"``) is the type
    it must have."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as error:  # UnicodeDecodeError included
        raise errors.bad_request(f"Malformed JSON: {error}") from None
    except RecursionError:
        raise errors.bad_request(
            f"Unacceptable JSON: nested deeper than {MAX_DEPTH} levels") from None
    _check_values(data)
    expected = _JSON_TYPES.get(top_level_type)
    if expected is not None and not isinstance(data, expected):
        # jsonschema's words, without rendering the whole body.
        raise errors.bad_request(
            f"JSON does not validate: {errors.shown(data)} is not of type {top_level_type!r}")
    return data


def query(request: webob.Request) -> webob.multidict.MultiDict:
    """The parameters of the query string, checked (once per request) as the
    module docstring lists."""
    if not request.environ.get(_QUERY_CHECKED):
        length = len(request.environ.get("QUERY_STRING", ""))
        if length > MAX_QUERY_STRING:
            raise errors.bad_request(
                f"Invalid query string parameters: the query string is {length} bytes "
                f"long, more than the {MAX_QUERY_STRING} accepted")
        try:
            params = request.GET
        except UnicodeDecodeError as error:
            raise errors.bad_request(f"Invalid query string parameters: {error}") from None
        for key, value in params.items():
            problem = unstorable_text(key) or unstorable_text(value)
            if problem is not None:
                raise errors.bad_request(
                    f"Invalid query string parameters: parameter {errors.shown(key)} "
                    f"holds {problem}")
        request.environ[_QUERY_CHECKED] = True
    return request.GET


def path(request: webob.Request) -> str:
    """The path below the mount point, checked as the module docstring lists."""
    try:
        decoded = request.path_info
    except UnicodeDecodeError as error:
        raise errors.bad_request(f"Malformed path: {error}") from None
    problem = unstorable_text(decoded)
    if problem is not None:
        raise errors.bad_request(f"Malformed path: it holds {problem}")
    return decoded
