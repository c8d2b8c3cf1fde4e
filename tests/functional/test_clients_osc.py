"""osc-placement, the real ``openstack`` command line plugin, driven end to
end against a running placement-api (noauth2; the client authenticates
with the ``admin_token`` plugin, whose token noauth2 reads as the admin
user): a provider tree with inventories, traits and aggregates,
allocations set and shown, candidates listed, at the newest microversion
the client supports and at an old one."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import uuid

import pytest

from tests.fixtures.clients import RunningServer

NEWEST = "1.39"
OLD = "1.10"
COMMAND_TIMEOUT = 120


@pytest.fixture(scope="module")
def server():
    with RunningServer() as running:
        yield running


class Openstack:
    """Runs the ``openstack`` command at a fixed microversion, one process per
    command as a user would (the client keeps the first microversion it
    used for the life of a process, so it cannot serve two in one)."""

    def __init__(self, url: str, version: str):
        self.command = [str(pathlib.Path(sys.executable).parent / "openstack"),
                        "--os-auth-type", "admin_token", "--os-token", "admin",
                        "--os-endpoint", url, "--os-placement-api-version", version]

    def run(self, *args: str) -> str:
        finished = subprocess.run([*self.command, *args], capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT)
        assert finished.returncode == 0, \
            f"openstack {' '.join(args)} failed: {finished.stderr[-2000:]}"
        return finished.stdout

    def json(self, *args: str):
        return json.loads(self.run(*args, "-f", "json"))


def _by(rows: list[dict], key: str) -> dict:
    return {row[key]: row for row in rows}


@pytest.fixture(scope="module")
def newest(server) -> Openstack:
    return Openstack(server.url, NEWEST)


@pytest.fixture(scope="module")
def old(server) -> Openstack:
    return Openstack(server.url, OLD)


@pytest.fixture(scope="module")
def tree(newest) -> dict:
    """A compute node with two NUMA children, made with the client: a custom
    class and trait, inventories, traits, an aggregate on the root."""
    suffix = uuid.uuid4().hex[:8].upper()
    made = {"class": f"CUSTOM_FPGA_{suffix}", "trait": f"CUSTOM_FAST_{suffix}",
            "aggregate": str(uuid.uuid4()), "name": f"cn-{suffix}"}
    newest.run("resource", "class", "create", made["class"])
    newest.run("trait", "create", made["trait"])
    made["root"] = newest.json("resource", "provider", "create", made["name"])
    for child in ("numa0", "numa1"):
        made[child] = newest.json("resource", "provider", "create", f"{child}-{suffix}",
                                  "--parent-provider", made["root"]["uuid"])
    newest.run("resource", "provider", "inventory", "set", made["numa0"]["uuid"],
               "--resource", "VCPU=8", "--resource", "VCPU:allocation_ratio=2.0",
               "--resource", "MEMORY_MB=4096")
    newest.run("resource", "provider", "inventory", "set", made["numa1"]["uuid"],
               "--resource", "VCPU=8")
    newest.run("resource", "provider", "inventory", "set", made["root"]["uuid"],
               "--resource", "DISK_GB=100", "--resource", f"{made['class']}=2")
    newest.run("resource", "provider", "inventory", "class", "set", made["root"]["uuid"],
               "DISK_GB", "--total", "200", "--reserved", "10")
    newest.run("resource", "provider", "trait", "set", made["numa0"]["uuid"],
               "--trait", made["trait"], "--trait", "HW_CPU_X86_AVX2")
    generation = newest.json("resource", "provider", "show", made["root"]["uuid"])["generation"]
    newest.run("resource", "provider", "aggregate", "set", made["root"]["uuid"],
               "--aggregate", made["aggregate"], "--generation", str(generation))
    return made


def test_newest_tree(newest, tree):
    root, numa0, numa1 = tree["root"], tree["numa0"], tree["numa1"]
    assert root["generation"] == 0 and root["parent_provider_uuid"] is None
    assert numa0["root_provider_uuid"] == root["uuid"]
    in_tree = newest.json("resource", "provider", "list", "--in-tree", numa1["uuid"])
    assert set(_by(in_tree, "uuid")) == {root["uuid"], numa0["uuid"], numa1["uuid"]}
    assert newest.json("resource", "class", "show", tree["class"])["name"] == tree["class"]
    named = newest.json("trait", "list", "--name", f"startswith:{tree['trait']}")
    assert [row["name"] for row in named] == [tree["trait"]]


def test_newest_inventories_traits_aggregates(newest, tree):
    root, numa0 = tree["root"]["uuid"], tree["numa0"]["uuid"]
    vcpu = _by(newest.json("resource", "provider", "inventory", "list", numa0),
               "resource_class")["VCPU"]
    assert (vcpu["total"], vcpu["allocation_ratio"]) == (8, 2.0)
    disk = newest.json("resource", "provider", "inventory", "show", root, "DISK_GB")
    assert (disk["total"], disk["reserved"]) == (200, 10)
    assert tree["class"] in _by(
        newest.json("resource", "provider", "inventory", "list", root), "resource_class")
    traits = newest.json("resource", "provider", "trait", "list", numa0)
    assert {row["name"] for row in traits} == {tree["trait"], "HW_CPU_X86_AVX2"}
    aggregates = newest.json("resource", "provider", "aggregate", "list", root)
    assert [row["uuid"] for row in aggregates] == [tree["aggregate"]]
    members = newest.json("resource", "provider", "list", "--member-of", tree["aggregate"])
    assert [row["uuid"] for row in members] == [root]


def test_newest_allocations_and_usages(newest, tree):
    root, numa0 = tree["root"]["uuid"], tree["numa0"]["uuid"]
    consumer, project, user = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    newest.run("resource", "provider", "allocation", "set", consumer,
               "--allocation", f"rp={numa0},VCPU=2,MEMORY_MB=512",
               "--allocation", f"rp={root},DISK_GB=10",
               "--project-id", project, "--user-id", user, "--consumer-type", "INSTANCE")
    shown = _by(newest.json("resource", "provider", "allocation", "show", consumer),
                "resource_provider")
    assert shown[numa0]["resources"] == {"VCPU": 2, "MEMORY_MB": 512}
    assert shown[root]["resources"] == {"DISK_GB": 10}
    assert shown[root]["consumer_type"] == "INSTANCE"

    usage = _by(newest.json("resource", "provider", "usage", "show", numa0), "resource_class")
    assert usage["VCPU"]["usage"] == 2
    # 1.38+: the project's usage grouped by consumer type.
    totals = _by(newest.json("resource", "usage", "show", project), "resource_class")
    assert totals["INSTANCE"]["usage"] == {"consumer_count": 1, "VCPU": 2, "MEMORY_MB": 512,
                                           "DISK_GB": 10}

    newest.run("resource", "provider", "allocation", "unset", consumer, "--provider", root)
    remaining = newest.json("resource", "provider", "allocation", "show", consumer)
    assert [row["resource_provider"] for row in remaining] == [numa0]
    newest.run("resource", "provider", "allocation", "delete", consumer)
    assert newest.json("resource", "provider", "allocation", "show", consumer) == []


def test_newest_candidates(newest, tree):
    candidates = newest.json("allocation", "candidate", "list", "--resource", "VCPU=2",
                             "--resource", "DISK_GB=10", "--required", tree["trait"])
    providers = {row["resource provider"] for row in candidates}
    assert providers == {tree["numa0"]["uuid"], tree["root"]["uuid"]}


def test_newest_deleting_the_tree(newest, tree):
    """Last: takes apart what the other tests used."""
    newest.run("resource", "provider", "trait", "delete", tree["numa0"]["uuid"])
    newest.run("trait", "delete", tree["trait"])
    for provider in ("numa0", "numa1", "root"):
        newest.run("resource", "provider", "delete", tree[provider]["uuid"])
    newest.run("resource", "class", "delete", tree["class"])
    assert newest.json("resource", "provider", "list", "--name", tree["name"]) == []


@pytest.fixture(scope="module")
def old_provider(old) -> dict:
    provider = old.json("resource", "provider", "create", f"old-{uuid.uuid4().hex[:8]}")
    old.run("resource", "provider", "inventory", "set", provider["uuid"],
            "--resource", "VCPU=4", "--resource", "MEMORY_MB=1024")
    return provider


def test_old_provider_aggregates_traits(old, old_provider):
    assert old_provider["generation"] == 0
    aggregate = str(uuid.uuid4())
    aggregates = old.json("resource", "provider", "aggregate", "set", old_provider["uuid"],
                          "--aggregate", aggregate)
    assert [row["uuid"] for row in aggregates] == [aggregate]
    traits = old.json("resource", "provider", "trait", "set", old_provider["uuid"],
                      "--trait", "HW_CPU_X86_SSE")
    assert [row["name"] for row in traits] == ["HW_CPU_X86_SSE"]


def test_old_allocations(old, old_provider):
    consumer = str(uuid.uuid4())
    old.run("resource", "provider", "allocation", "set", consumer,
            "--allocation", f"rp={old_provider['uuid']},VCPU=3",
            "--project-id", str(uuid.uuid4()), "--user-id", str(uuid.uuid4()))
    shown = old.json("resource", "provider", "allocation", "show", consumer)
    assert [(row["resource_provider"], row["resources"]) for row in shown] == [
        (old_provider["uuid"], {"VCPU": 3})]
    usage = _by(old.json("resource", "provider", "usage", "show", old_provider["uuid"]),
                "resource_class")
    assert usage["VCPU"]["usage"] == 3
    old.run("resource", "provider", "allocation", "delete", consumer)
    assert old.json("resource", "provider", "allocation", "show", consumer) == []


def test_old_candidates(old, old_provider):
    candidates = old.json("allocation", "candidate", "list", "--resource", "VCPU=3")
    assert old_provider["uuid"] in {row["resource provider"] for row in candidates}
    consumer = str(uuid.uuid4())
    old.run("resource", "provider", "allocation", "set", consumer,
            "--allocation", f"rp={old_provider['uuid']},VCPU=2",
            "--project-id", str(uuid.uuid4()), "--user-id", str(uuid.uuid4()))
    candidates = old.json("allocation", "candidate", "list", "--resource", "VCPU=3")
    assert old_provider["uuid"] not in {row["resource provider"] for row in candidates}
    old.run("resource", "provider", "allocation", "delete", consumer)
