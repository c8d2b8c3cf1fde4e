"""Domain exceptions carry the code of their JSON error body, and the one
place that formats errors (``errors.from_domain_error``) shows it."""

from __future__ import annotations

import json

import pytest
import webob

from placement import errors, exceptions, versions
from placement.objects import allocation, inventory, reshaper, resource_class, resource_provider


def _body(error: exceptions.PlacementError, version: str = "1.23") -> tuple[int, dict]:
    request = webob.Request.blank("/", headers={"Accept": "application/json"})
    request.environ[versions.ENVIRON_KEY] = versions.parse(version)
    response = request.get_response(errors.from_domain_error(error))
    return response.status_int, json.loads(response.body)["errors"][0]


@pytest.mark.parametrize(("error", "status", "code"), [
    (inventory.InventoryInUse("in use"), 409, "placement.inventory.inuse"),
    (exceptions.ConcurrentUpdate("raced"), 409, "placement.concurrent_update"),
    (allocation.ConcurrentWrite("raced"), 409, "placement.concurrent_update"),
    (resource_provider.DuplicateProvider("taken"), 409, "placement.duplicate_name"),
    (resource_provider.ProviderInUse("in use"), 409, "placement.resource_provider.inuse"),
    (resource_provider.ProviderHasChildren("parent"), 409,
     "placement.resource_provider.cannot_delete_parent"),
    (reshaper.ProviderNotFound("gone"), 400, "placement.resource_provider.not_found"),
    (resource_class.ResourceClassExists("taken"), 409, "placement.undefined_code"),
    (exceptions.NotFound("nothing"), 404, "placement.undefined_code"),
    (exceptions.InvalidInput("bad"), 400, "placement.undefined_code"),
])
def test_the_code_of_a_domain_error_is_its_class_code(error, status, code):
    got_status, body = _body(error)
    assert (got_status, body["code"]) == (status, code)
    assert str(error) in body["detail"]
    assert (error.code or errors.DEFAULT) == code


def test_no_code_before_1_23():
    assert "code" not in _body(inventory.InventoryInUse("in use"), "1.22")[1]
