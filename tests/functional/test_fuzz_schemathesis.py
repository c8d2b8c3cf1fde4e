"""Schemathesis against the OpenAPI document, in-process: for each
operation, a bounded number of generated requests (path, query, body and
``OpenStack-API-Version`` header drawn from the document) as the admin.
No request may produce a server error, and every response must conform to
the document (status, content type, body schema)."""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from placement import openapi, router
from tests.db import FreshDatabase
from tests.fixtures.base import build_app

pytestmark = pytest.mark.slow

EXAMPLES_PER_OPERATION = 30
# Reproducible runs in CI; fresh examples on every local run.
IN_CI = bool(os.environ.get("CI"))


@pytest.fixture(scope="module")
def application():
    database = FreshDatabase()
    yield build_app(database)
    database.close()


# The document as the service builds it (test_openapi checks it is what
# GET /openapi.json serves).
schema = schemathesis.openapi.from_dict(openapi.document(router.ROUTES))


@schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=IN_CI,
          suppress_health_check=list(HealthCheck))
def test_no_server_error_and_responses_conform(case, application):
    case.call_and_validate(
        app=application,
        headers={"X-Auth-Token": "admin", "X-Roles": "admin,service"},
        checks=[checks.not_a_server_error, checks.status_code_conformance,
                checks.content_type_conformance, checks.response_schema_conformance],
    )
