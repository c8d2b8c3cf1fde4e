"""Helpers every handler uses: body and query parsing, media types and
building responses."""

from __future__ import annotations

import calendar
import copy
import datetime
import time
import wsgiref.handlers
from collections.abc import Iterable

import jsonschema
import orjson
import webob
import webob.exc
from oslo_serialization import jsonutils
from oslo_utils import uuidutils

from placement import endpoint, errors, request_data, versions
from placement.context import RequestContext
from placement.microversion import version_of

JSON = "application/json"


def _lenient_uuid(value: object) -> bool:
    return not isinstance(value, str) or uuidutils.is_uuid_like(value)


# JSON bodies accept any uuid-like string (dashless, upper case, urn: ...);
# query strings use jsonschema's strict default ('-' at the right places).
BODY_FORMAT_CHECKER = jsonschema.FormatChecker()
BODY_FORMAT_CHECKER.checks("uuid")(_lenient_uuid)
QUERY_FORMAT_CHECKER = jsonschema.FormatChecker()


def context_of(request: webob.Request) -> RequestContext:
    return request.environ["placement.context"]


def authorize(request: webob.Request, target: dict | None = None) -> RequestContext:
    """Ask the policy rule the route table declares for the request's
    endpoint (403 unless it allows the request); the request's context."""
    context = context_of(request)
    context.can(request.environ[endpoint.ENVIRON_KEY].operation.policy.name, target)
    return context


def require_json_content(request: webob.Request) -> None:
    """415 unless the request body is declared as JSON."""
    if request.content_type != JSON:
        media_type = request.content_type or None
        raise errors.http_error(
            webob.exc.HTTPUnsupportedMediaType,
            f"The media type {media_type} is not supported, use application/json")


def check_accept(request: webob.Request) -> None:
    """406 unless the client accepts JSON (a missing Accept header does)."""
    accept = request.environ.get("HTTP_ACCEPT")
    if accept is None or accept == JSON:  # the common cases, without parsing
        return
    if not request.accept.acceptable_offers([JSON]):
        raise errors.http_error(webob.exc.HTTPNotAcceptable,
                                "Only application/json is provided")


# Validators by schema: building one (and checking the schema itself, as
# jsonschema.validate does each time) cost a tenth of a small request. Our
# schemas are code, checked once by the tests. Schemas built per request
# come and go, so the cache holds the schema too (its id stays unique) and is
# emptied when full.
_VALIDATORS: dict[tuple[int, int], tuple[dict, jsonschema.protocols.Validator]] = {}
_VALIDATORS_MAX = 512


# (id of a schema, the items of a query) -> the schema, for the queries
# found valid (query_params)
_VALID_QUERIES: dict[tuple, dict] = {}
_VALID_QUERIES_MAX = 4096


def _validator(schema: dict, format_checker: jsonschema.FormatChecker
               ) -> jsonschema.protocols.Validator:
    key = (id(schema), id(format_checker))
    cached = _VALIDATORS.get(key)
    if cached is not None and cached[0] is schema:
        return cached[1]
    if len(_VALIDATORS) >= _VALIDATORS_MAX:
        _VALIDATORS.clear()
    validator = jsonschema.validators.validator_for(schema)(
        schema, format_checker=format_checker)
    _VALIDATORS[key] = (schema, validator)
    return validator


# Up to this many values (and characters in strings) an instance of a
# validation error is shown whole, pretty-printed as jsonschema does;
# pretty-printing a large body takes seconds.
_SHOWN_WHOLE = 400
# A longer message keeps its start and its end (where jsonschema says
# what is wrong: "... is too long").
_MESSAGE_HEAD, _MESSAGE_TAIL = 600, 200


def _small(value: object) -> bool:
    """True when ``value`` is within _SHOWN_WHOLE (without walking all of a
    large one)."""
    budget = _SHOWN_WHOLE
    pending = [value]
    while pending:
        item = pending.pop()
        budget -= len(item) if isinstance(item, (str, dict, list)) else 1
        if budget < 0:
            return False
        if isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True


class _Shown:
    """Stands for a large instance in jsonschema's error text."""

    def __init__(self, value: object):
        self.value = value

    def __repr__(self) -> str:
        return errors.shown(self.value)


def _described(error: jsonschema.exceptions.ValidationError) -> str:
    """jsonschema's text of ``error`` (clients match on it), with a large
    instance and a long message cut short."""
    long_message = len(error.message) > _MESSAGE_HEAD + _MESSAGE_TAIL
    small = _small(error.instance)
    if small and not long_message:
        return str(error)
    error = copy.copy(error)
    if not small:
        error.instance = _Shown(error.instance)
    if long_message:
        error.message = f"{error.message[:_MESSAGE_HEAD]}...{error.message[-_MESSAGE_TAIL:]}"
    return str(error)


def validate(data: object, schema: dict, prefix: str,
             format_checker: jsonschema.FormatChecker = BODY_FORMAT_CHECKER) -> None:
    """400 with jsonschema's best-matching error, as jsonschema.validate picks it."""
    error = jsonschema.exceptions.best_match(
        _validator(schema, format_checker).iter_errors(data))
    if error is not None:
        raise errors.bad_request(f"{prefix}: {_described(error)}")


def extract_json(request: webob.Request, schema: dict) -> dict:
    """The request body, decoded (see placement.request_data) and validated
    against ``schema``."""
    data = request_data.json_body(request.body, schema.get("type"))
    validate(data, schema, "JSON does not validate")
    return data


def query(request: webob.Request) -> webob.multidict.MultiDict:
    """The query string parameters (see placement.request_data)."""
    return request_data.query(request)


def query_params(request: webob.Request, schema: dict) -> dict[str, str]:
    """The query string as a dict (last value of a repeated key wins),
    validated against ``schema``. A query found valid is remembered as
    such (validating is a function of the two alone): clients ask the
    same queries again and again (Nova, a project's usages before each
    boot), and jsonschema costs a tenth of such a request."""
    params = dict(query(request).items())
    key = (id(schema), tuple(params.items()))
    # the schema itself is the value: while remembered, its id is not reused
    if _VALID_QUERIES.get(key) is not schema:
        validate(params, schema, "Invalid query string parameters", QUERY_FORMAT_CHECKER)
        if len(_VALID_QUERIES) >= _VALID_QUERIES_MAX:
            _VALID_QUERIES.clear()
        _VALID_QUERIES[key] = schema
    return params


def query_values(request: webob.Request, key: str) -> list[str]:
    """Every value of a possibly repeated query parameter, in order."""
    return query(request).getall(key)


def url(request: webob.Request, path: str) -> str:
    """``path`` under the mount point of the application (SCRIPT_NAME)."""
    return request.script_name + path


def newest(timestamps: Iterable[datetime.datetime | None]) -> datetime.datetime | None:
    present = [stamp for stamp in timestamps if stamp is not None]
    return max(present) if present else None


def _http_date(stamp: datetime.datetime | None) -> str:
    """A UTC time (naive or not), or now, as an HTTP date, to the second."""
    return wsgiref.handlers.format_date_time(
        time.time() if stamp is None else calendar.timegm(stamp.timetuple()))


def _with_cache_headers(request: webob.Request, response: webob.Response,
                        last_modified: datetime.datetime | None) -> None:
    if version_of(request) >= versions.CACHE_HEADERS:
        # Appended as they are: WebOb's header properties parse and format
        # each value again.
        response.headerlist.extend([
            ("Last-Modified", _http_date(last_modified)),
            ("Cache-Control", "no-cache")])


# JSON already encoded, to be put as it is into a body encode_json makes.
JSONFragment = orjson.Fragment


def encode_json(body: object) -> bytes:
    """``body`` as compact JSON. orjson: a candidates body of a thousand
    requests takes the standard encoder several milliseconds. Whatever
    orjson does not know (datetimes included) is turned into plain values
    by oslo.serialization, as jsonutils would."""
    return orjson.dumps(body, default=jsonutils.to_primitive,
                        option=orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS)


def json_fragment(body: object) -> JSONFragment:
    """``body`` encoded once, to be kept and put into later bodies as it is.
    Copied to its own length: orjson's answer keeps the buffer it was
    written in (4 kB for a body of 200 bytes), and thousands are kept."""
    return JSONFragment(bytes(memoryview(encode_json(body))))


def json_response(request: webob.Request, body: object, status: int = 200,
                  cache_headers: bool = False,
                  last_modified: datetime.datetime | None = None,
                  location: str | None = None) -> webob.Response:
    """A JSON response. ``cache_headers`` adds Last-Modified (``last_modified``,
    or now) and Cache-Control: no-cache from 1.15 on, as the spec lists."""
    response = webob.Response(status=status, content_type=JSON, charset=None)
    response.body = encode_json(body)
    if cache_headers:
        _with_cache_headers(request, response, last_modified)
    if location is not None:
        response.location = location
    return response


def empty_response(request: webob.Request, status: int = 204,
                   location: str | None = None, cache_headers: bool = False,
                   last_modified: datetime.datetime | None = None) -> webob.Response:
    """A bodiless response: no Content-Type at all."""
    response = webob.Response(status=status)
    del response.content_type
    response.content_length = 0 if status != 204 else None
    if location is not None:
        response.location = location
    if cache_headers:
        _with_cache_headers(request, response, last_modified)
    return response
