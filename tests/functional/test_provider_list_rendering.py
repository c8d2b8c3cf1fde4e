"""GET /resource_providers reuses each provider's rendered JSON while what
it shows stays the same (placement.handlers.resource_provider), and a
list asking for capacity whole (placement.candidates.lists). After
every kind of change, through the API or by plain SQL behind the
service's back, the answers must be byte for byte the ones rendered
afresh, at every representation the versions and mount points give."""

from __future__ import annotations

import datetime

import pytest
import sqlalchemy as sa
import webob

from placement.candidates import lists
from placement.candidates.memo import Memo
from placement.db import tables
from placement.handlers import resource_provider as rp_handler
from placement.objects import resource_provider as rp_obj
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import ProviderApi, in_process

# One version per representation (links added at 1.1, 1.6 and 1.11, the
# tree at 1.14, cache headers at 1.15) and the latest.
VERSIONS = ("1.0", "1.1", "1.6", "1.11", "1.14", "1.15", "1.18", "1.39")
# query -> the version from which it is valid
QUERIES = {"": "1.0", "?name=renamed": "1.0", "?resources=VCPU:1": "1.4",
           "?required=HW_CPU_X86_SSE": "1.18"}
MOUNTS = ("", "/placement")

_rp = tables.resource_providers


@pytest.fixture
def app(database):
    return build_app(database)


def _answer(app, path: str, version: str, mount: str) -> tuple[bytes, list]:
    request = webob.Request.blank(path, headers={
        "X-Auth-Token": "admin", "OpenStack-API-Version": f"placement {version}",
        "Accept": "application/json"})
    request.environ["SCRIPT_NAME"] = mount
    response = request.get_response(app)
    assert response.status_int == 200, response.body
    # an empty list was last modified now
    shown = ("Content-Type", "Cache-Control") + (
        ("Last-Modified",) if response.json["resource_providers"] else ())
    return response.body, [(name, value) for name, value in response.headerlist
                           if name in shown]


def _version(text: str) -> tuple[int, ...]:
    return tuple(map(int, text.split(".")))


def _unkept_list(connection, filters) -> lists.ProviderList:
    return lists.ProviderList(rp_obj.list_providers(connection, filters))


def _answers(app, monkeypatch, fresh: bool = False) -> dict:
    """Every list answer; made afresh when ``fresh``, each with nothing kept
    (no list, no provider's JSON)."""
    answers = {}
    for query, since in QUERIES.items():
        for version in VERSIONS:
            if _version(version) < _version(since):
                continue
            for mount in MOUNTS:
                with monkeypatch.context() as patched:
                    if fresh:
                        patched.setattr(rp_handler, "_RENDERED", Memo())
                        patched.setattr(lists, "list_providers", _unkept_list)
                    answers[query, version, mount] = _answer(
                        app, "/resource_providers" + query, version, mount)
    return answers


def _assert_kept_answers_are_fresh(app, monkeypatch) -> None:
    kept = _answers(app, monkeypatch)
    assert _answers(app, monkeypatch) == kept  # read from what the first round kept
    assert _answers(app, monkeypatch, fresh=True) == kept


def test_kept_renderings_follow_every_change(app, database, monkeypatch):
    client = ProviderApi(in_process(app))
    root = client.provider("root", VCPU=4)
    child = client.provider("child", parent=root, VCPU=2)
    client.provider("grandchild", parent=child, VCPU=1)
    leaf = client.provider("leaf", parent=root)
    other = client.provider("other")
    client.traits(child, "HW_CPU_X86_SSE")
    _assert_kept_answers_are_fresh(app, monkeypatch)

    def move(provider: str, parent: str | None, name: str) -> None:
        client.call("PUT", f"/resource_providers/{provider}",
                    {"name": name, "parent_provider_uuid": parent}, version="placement 1.37")

    def by_sql(**values) -> None:
        with database.db.writer() as connection:
            connection.execute(sa.update(_rp).where(_rp.c.uuid == root).values(**values))

    # each change alters one thing the answers show
    changes = [
        lambda: move(child, root, "renamed"),
        lambda: client.inventories(root, VCPU=8),  # a new generation
        lambda: move(leaf, child, "leaf"),  # a new parent, the same root
        # the child: a new parent and root; its descendants: a new root, the same parent
        lambda: move(child, other, "renamed"),
        lambda: move(child, None, "renamed"),
        lambda: client.call("DELETE", f"/resource_providers/{other}"),
        lambda: client.provider("other"),  # the same name, a new uuid
        # behind the service's back
        lambda: by_sql(name="root-by-sql"),
        lambda: by_sql(generation=_rp.c.generation + 5),
        lambda: by_sql(updated_at=datetime.datetime(2030, 1, 2, 3, 4, 5)),
    ]
    for change in changes:
        change()
        _assert_kept_answers_are_fresh(app, monkeypatch)
