"""Every JSON schema the handlers validate with is itself a valid schema
(the validators are cached and no longer check their schema per request)."""

import importlib
import pkgutil

import jsonschema
import pytest

import placement.schemas


def _schemas():
    for module_info in pkgutil.iter_modules(placement.schemas.__path__):
        module = importlib.import_module(f"placement.schemas.{module_info.name}")
        for name, value in vars(module).items():
            if name.startswith("_"):
                continue
            if isinstance(value, dict) and ("type" in value or "properties" in value
                                            or "anyOf" in value or "oneOf" in value):
                yield f"{module_info.name}.{name}", value


SCHEMAS = list(_schemas())


def test_schemas_were_found():
    assert len(SCHEMAS) > 20


@pytest.mark.parametrize("schema", [schema for _, schema in SCHEMAS],
                         ids=[name for name, _ in SCHEMAS])
def test_schema_is_valid(schema):
    jsonschema.validators.validator_for(schema).check_schema(schema)
