"""Every inventory row carries its usage (``inventories.used``), kept by the
allocation writes: after any mix of writes through the API it is the sum of
the inventory's allocations, on every backend. (The racing writers of
tests/functional/test_stress.py check the same under concurrency, through
the usages the API reports.)"""

from __future__ import annotations

import random
import uuid

import sqlalchemy as sa

from placement.db import tables
from tests.db import FreshDatabase
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import PROJECT, ProviderApi, in_process

OPERATIONS = 120


def _kept_and_summed(database: FreshDatabase) -> tuple[dict, dict]:
    inventories, allocations = tables.inventories, tables.allocations
    with database.db.reader() as connection:
        kept = {(row.resource_provider_id, row.resource_class_id): row.used
                for row in connection.execute(sa.select(
                    inventories.c.resource_provider_id, inventories.c.resource_class_id,
                    inventories.c.used))}
        summed = {(row.resource_provider_id, row.resource_class_id): int(row.used)
                  for row in connection.execute(
                      sa.select(allocations.c.resource_provider_id,
                                allocations.c.resource_class_id,
                                sa.func.sum(allocations.c.used).label("used"))
                      .group_by(allocations.c.resource_provider_id,
                                allocations.c.resource_class_id))}
    return kept, summed


def test_usages_kept_by_every_kind_of_write_add_up(database):
    api = ProviderApi(in_process(build_app(database)))
    rng = random.Random(20261201)
    providers = [api.provider(f"cn{index}", VCPU=64, MEMORY_MB=65536, DISK_GB=1000)
                 for index in range(4)]
    consumers = [str(uuid.uuid4()) for _ in range(8)]

    def allocations() -> dict:
        chosen = rng.sample(providers, rng.randint(1, 2))
        return {provider: {"resources": {"VCPU": rng.randint(1, 4),
                                         "MEMORY_MB": 256 * rng.randint(1, 4)}}
                for provider in chosen}

    def generation(consumer: str) -> int | None:
        body = api.call("GET", f"/allocations/{consumer}")
        return body.get("consumer_generation") if body["allocations"] else None

    for _ in range(OPERATIONS):
        consumer = rng.choice(consumers)
        kind = rng.choice(["put", "put", "release", "delete", "post", "inventory"])
        if kind == "put":  # a claim, or a move to other providers
            api.call("PUT", f"/allocations/{consumer}", {
                "allocations": allocations(), "consumer_generation": generation(consumer),
                "consumer_type": "INSTANCE", **PROJECT})
        elif kind == "release" and generation(consumer) is not None:
            api.call("PUT", f"/allocations/{consumer}", {
                "allocations": {}, "consumer_generation": generation(consumer),
                "consumer_type": "INSTANCE", **PROJECT})
        elif kind == "delete" and generation(consumer) is not None:
            api.call("DELETE", f"/allocations/{consumer}")
        elif kind == "post":  # two consumers at once
            pair = rng.sample(consumers, 2)
            api.call("POST", "/allocations", {
                other: {"allocations": allocations(), "consumer_generation": generation(other),
                        "consumer_type": "INSTANCE", **PROJECT}
                for other in pair})
        elif kind == "inventory":  # amounts change, usages stay
            api.inventories(rng.choice(providers), VCPU=rng.randint(64, 128),
                            MEMORY_MB=65536, DISK_GB=1000)
    kept, summed = _kept_and_summed(database)
    assert any(summed.values())
    assert {key: used for key, used in kept.items() if used} == summed
    for provider in providers:
        reported = api.call("GET", f"/resource_providers/{provider}/usages")["usages"]
        assert set(reported) == {"VCPU", "MEMORY_MB", "DISK_GB"}


def test_reshaping_moves_usages_with_the_allocations(database):
    """A reshape moves inventories and allocations to a child at once."""
    api = ProviderApi(in_process(build_app(database)))
    root = api.provider("root", VCPU=8)
    consumer = str(uuid.uuid4())
    api.claim(consumer, root, VCPU=3)
    child = api.provider("numa", parent=root)
    api.call("POST", "/reshaper", {
        "inventories": {
            root: {"resource_provider_generation": api.generation(root), "inventories": {}},
            child: {"resource_provider_generation": api.generation(child),
                    "inventories": {"VCPU": {"total": 8}}}},
        "allocations": {consumer: {
            "allocations": {child: {"resources": {"VCPU": 3}}},
            "consumer_generation": 1, "consumer_type": "INSTANCE", **PROJECT}}})
    kept, summed = _kept_and_summed(database)
    assert {key: used for key, used in kept.items() if used} == summed
    assert api.call("GET", f"/resource_providers/{child}/usages")["usages"] == {"VCPU": 3}
