"""wsgi_util.query_params: a query found valid is remembered as such, per
schema, and nothing else is."""

from __future__ import annotations

import pytest
import webob
import webob.exc

from placement import wsgi_util
from placement.schemas import usage as usage_schema


def _params(query_string: str, schema: dict) -> dict[str, str]:
    return wsgi_util.query_params(webob.Request.blank("/usages?" + query_string), schema)


def test_a_valid_query_is_valid_again():
    query_string = "project_id=remembered-project&consumer_type=INSTANCE"
    for _ in range(2):
        assert _params(query_string, usage_schema.USAGES_QUERY_V1_38) == {
            "project_id": "remembered-project", "consumer_type": "INSTANCE"}


def test_a_query_valid_under_one_schema_is_checked_under_another():
    # consumer_type is a parameter from 1.38 only
    query_string = "project_id=two-schemas&consumer_type=INSTANCE"
    _params(query_string, usage_schema.USAGES_QUERY_V1_38)
    with pytest.raises(webob.exc.HTTPBadRequest, match="consumer_type"):
        _params(query_string, usage_schema.USAGES_QUERY)


def test_an_invalid_query_stays_invalid():
    for _ in range(2):
        with pytest.raises(webob.exc.HTTPBadRequest, match="Invalid query string"):
            _params("project_id=", usage_schema.USAGES_QUERY)


def test_a_valid_query_vouches_for_no_other_value():
    _params("project_id=some-project&consumer_type=INSTANCE", usage_schema.USAGES_QUERY_V1_38)
    with pytest.raises(webob.exc.HTTPBadRequest, match="consumer_type"):
        _params("project_id=some-project&consumer_type=lower-case",
                usage_schema.USAGES_QUERY_V1_38)
