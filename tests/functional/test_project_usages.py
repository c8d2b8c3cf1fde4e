"""A project's usages are kept by the database (placement.db.triggers:
project_usages, consumer_allocations, project_consumers), whoever writes
allocations and consumers and in whatever order: after every write, of
the API or of raw SQL as an operator or the original service would write,
they are what the allocations and consumers make them, and GET /usages
answers from them as it would from the allocations."""

from __future__ import annotations

import random
import uuid

import sqlalchemy as sa

from placement.db import tables, triggers
from tests.db import FreshDatabase
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import ProviderApi, in_process

VCPU, MEMORY_MB = 0, 1  # the standard class ids
PROJECTS = ("project-a", "project-b")
USERS = ("user-a", "user-b")
TYPES = ("INSTANCE", "MIGRATION", None)


def _setup(database: FreshDatabase) -> tuple[ProviderApi, list[int]]:
    """The API, and two providers with room for everything the tests claim."""
    api = ProviderApi(in_process(build_app(database)))
    provider_ids = []
    for name in ("cn1", "cn2"):
        provider_uuid = api.provider(name)
        api.call("PUT", f"/resource_providers/{provider_uuid}/inventories", {
            "resource_provider_generation": api.generation(provider_uuid),
            "inventories": {"VCPU": {"total": 10000}, "MEMORY_MB": {"total": 10 ** 7}}})
        with database.db.reader() as connection:
            provider_ids.append(connection.scalar(
                sa.select(tables.resource_providers.c.id)
                .where(tables.resource_providers.c.uuid == provider_uuid)))
    return api, provider_ids


def _sql(database: FreshDatabase, *statements: str, **parameters: object) -> None:
    with database.db.engine.begin() as connection:
        for statement in statements:
            connection.execute(sa.text(statement), parameters)


def _ids(database: FreshDatabase, table: sa.Table, names: tuple[str, ...]) -> list[int]:
    """The ids of the rows of ``table`` (projects, users) of these external
    ids, made when missing."""
    with database.db.engine.begin() as connection:
        for name in names:
            if connection.scalar(sa.select(table.c.id).where(table.c.external_id == name)) is None:
                connection.execute(sa.insert(table).values(external_id=name))
        return [connection.scalar(sa.select(table.c.id).where(table.c.external_id == name))
                for name in names]


def _assert_kept(database: FreshDatabase) -> None:
    with database.db.reader() as connection:
        assert not triggers.project_usages_wrong(connection)


def _claim(api: ProviderApi, consumer: str, provider_uuids: list[str], rng: random.Random,
           generation: int | None) -> None:
    api.call("PUT", f"/allocations/{consumer}", {
        "allocations": {provider_uuid: {"resources": {"VCPU": rng.randint(1, 4),
                                                      "MEMORY_MB": rng.randint(1, 4) * 512}}
                        for provider_uuid in provider_uuids},
        "project_id": rng.choice(PROJECTS), "user_id": rng.choice(USERS),
        "consumer_generation": generation,
        "consumer_type": rng.choice([name for name in TYPES if name])})


def test_the_api_and_raw_sql_keep_the_project_usages(database):
    rng = random.Random(20261206)
    api, provider_ids = _setup(database)
    provider_uuids = [provider["uuid"] for provider in
                      api.call("GET", "/resource_providers")["resource_providers"]]
    project_ids = _ids(database, tables.projects, PROJECTS)
    user_ids = _ids(database, tables.users, USERS)
    consumers: set[str] = set()  # claimed through the API, with a consumer row
    for step in range(60):
        kind = rng.choice(["claim", "claim", "reclaim", "delete", "orphan rows", "consumer row",
                           "move consumer", "drop consumer row", "change rows",
                           "delete rows"])
        if kind == "claim" or (kind in ("reclaim", "delete") and not consumers):
            consumer = str(uuid.uuid4())
            _claim(api, consumer, rng.sample(provider_uuids, rng.randint(1, 2)), rng, None)
            consumers.add(consumer)
        elif kind == "reclaim":
            consumer = rng.choice(sorted(consumers))
            generation = api.call("GET", f"/allocations/{consumer}")["consumer_generation"]
            _claim(api, consumer, rng.sample(provider_uuids, rng.randint(1, 2)), rng,
                   generation)
        elif kind == "delete":
            consumer = rng.choice(sorted(consumers))
            api.call("DELETE", f"/allocations/{consumer}")
            consumers.remove(consumer)
        elif kind == "orphan rows":
            # allocation rows before their consumer row, in one statement
            # (PostgreSQL runs each row's trigger after the statement)
            _sql(database, "INSERT INTO allocations (resource_provider_id, consumer_id, "
                 "resource_class_id, used) VALUES (:first, :consumer, 0, 2), "
                 "(:second, :consumer, 0, 3), (:first, :consumer, 1, 512)",
                 first=provider_ids[0], second=provider_ids[1], consumer=f"orphan-{step}")
        elif kind == "consumer row":
            _sql(database, "INSERT INTO consumers (uuid, project_id, user_id, generation, "
                 "consumer_type_id) SELECT a.consumer_id, :project, :user, 0, NULL "
                 "FROM allocations a WHERE a.consumer_id LIKE 'orphan-%' AND NOT EXISTS "
                 "(SELECT 1 FROM consumers c WHERE c.uuid = a.consumer_id) "
                 "GROUP BY a.consumer_id",
                 project=rng.choice(project_ids), user=rng.choice(user_ids))
        elif kind == "move consumer":
            _sql(database, "UPDATE consumers SET project_id = :project, user_id = :user "
                 "WHERE id = (SELECT MIN(id) FROM consumers)",
                 project=rng.choice(project_ids), user=rng.choice(user_ids))
        elif kind == "drop consumer row":
            _sql(database, "DELETE FROM consumers WHERE id = (SELECT MAX(id) FROM consumers)"
                 if database.backend != "mysql" else
                 "DELETE FROM consumers ORDER BY id DESC LIMIT 1")
            consumers = {consumer for consumer in consumers
                         if _has_consumer_row(database, consumer)}
        elif kind == "change rows":
            _sql(database, "UPDATE allocations SET used = used + 1 WHERE resource_class_id = 0")
        else:
            _sql(database, "DELETE FROM allocations WHERE consumer_id LIKE 'orphan-%'")
        _assert_kept(database)
    with database.db.reader() as connection:
        counted = connection.scalar(sa.select(sa.func.sum(tables.project_consumers.c.consumers)))
    assert counted, "the sequence left no consumer with allocations: it tested nothing"


def _has_consumer_row(database: FreshDatabase, consumer: str) -> bool:
    with database.db.reader() as connection:
        return connection.scalar(sa.select(sa.func.count()).select_from(tables.consumers)
                                 .where(tables.consumers.c.uuid == consumer)) > 0


def test_usages_answer_from_the_kept_sums(database):
    api, provider_ids = _setup(database)
    project_id, = _ids(database, tables.projects, ("project-raw",))
    user_id, = _ids(database, tables.users, ("user-raw",))
    # two consumers written as raw rows, without a type
    _sql(database, "INSERT INTO consumers (uuid, project_id, user_id, generation) "
         "VALUES ('raw-1', :project, :user, 0), ('raw-2', :project, :user, 0)",
         project=project_id, user=user_id)
    _sql(database, "INSERT INTO allocations (resource_provider_id, consumer_id, "
         "resource_class_id, used) VALUES (:first, 'raw-1', 0, 2), (:second, 'raw-1', 0, 3), "
         "(:first, 'raw-2', 1, 1024)", first=provider_ids[0], second=provider_ids[1])
    assert api.call("GET", "/usages?project_id=project-raw", version="placement 1.9") == {
        "usages": {"VCPU": 5, "MEMORY_MB": 1024}}
    assert api.call("GET", "/usages?project_id=project-raw", version="placement 1.38") == {
        "usages": {"unknown": {"consumer_count": 2, "VCPU": 5, "MEMORY_MB": 1024}}}
    # both rows of the first consumer gone in one statement: counted out once
    _sql(database, "DELETE FROM allocations WHERE consumer_id = 'raw-1'")
    assert api.call("GET", "/usages?project_id=project-raw", version="placement 1.38") == {
        "usages": {"unknown": {"consumer_count": 1, "MEMORY_MB": 1024}}}
    assert api.call("GET", "/usages?project_id=project-raw&user_id=user-raw",
                    version="placement 1.9") == {"usages": {"MEMORY_MB": 1024}}
    _assert_kept(database)


def test_wrong_project_usages_are_seen_and_made_again(database):
    _, provider_ids = _setup(database)
    project_id, = _ids(database, tables.projects, ("project-c",))
    user_id, = _ids(database, tables.users, ("user-c",))
    _sql(database, "INSERT INTO consumers (uuid, project_id, user_id, generation) "
         "VALUES ('c-1', :project, :user, 0)", project=project_id, user=user_id)
    _sql(database, "INSERT INTO allocations (resource_provider_id, consumer_id, "
         "resource_class_id, used) VALUES (:first, 'c-1', 0, 2)", first=provider_ids[0])
    _sql(database, "UPDATE project_usages SET used = 7")
    with database.db.reader() as connection:
        assert triggers.project_usages_wrong(connection)
    with database.db.engine.begin() as connection:
        triggers.recompute_project_usages(connection)
    _assert_kept(database)
    _sql(database, "DELETE FROM project_consumers")
    with database.db.reader() as connection:
        assert triggers.project_usages_wrong(connection)
