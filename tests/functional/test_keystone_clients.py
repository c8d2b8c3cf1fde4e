"""The real clients through a real Keystone (tests/fixtures/keystone_server.py),
placement behind it with auth_token and secure RBAC: osc-placement's
``openstack`` command with password authentication, finding placement in
the service catalog; the report client modelled on Nova's
(tests/fixtures/report_client.py) as Nova's service user, whose only role
is ``service``; a project member denied what policy denies it."""

from __future__ import annotations

import uuid

import pytest
from keystoneauth1 import adapter, service_token, session

from tests.fixtures import keystone_server, ops
from tests.fixtures.osc_story import NEWEST, Openstack
from tests.fixtures.report_client import ReportClient


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def member(keystone):
    """A user with only ``member`` and ``reader`` on a project of its own."""
    name = _name("member")
    return keystone.create_user(name, name + "-project", ["member", "reader"])


@pytest.fixture(scope="module")
def nova(keystone):
    """Nova's service user: role ``service`` in project ``service``, nothing else."""
    return keystone.create_user(_name("nova"), "service", ["service"])


def _placement_adapter(authenticated: session.Session) -> adapter.Adapter:
    """As Nova's ``[placement]`` options make it: the endpoint comes from the
    catalog, internal interface first."""
    return adapter.Adapter(authenticated, service_type="placement",
                           interface=["internal", "public"],
                           region_name=keystone_server.REGION)


@pytest.mark.slow
def test_osc_placement_finds_placement_in_the_catalog(keystone, keystone_placement, member):
    admin = Openstack(None, NEWEST, keystone.admin.openstack_options())
    catalog = admin.json("catalog", "show", "placement")
    assert {(endpoint["interface"], endpoint["url"]) for endpoint in catalog["endpoints"]} == {
        (interface, keystone_placement.url) for interface in ("public", "internal", "admin")}

    provider = admin.json("resource", "provider", "create", _name("cn"))
    admin.run("resource", "provider", "inventory", "set", provider["uuid"],
              "--resource", "VCPU=8", "--resource", "MEMORY_MB=2048")
    consumer = str(uuid.uuid4())
    admin.run("resource", "provider", "allocation", "set", consumer,
              "--allocation", f"rp={provider['uuid']},VCPU=2,MEMORY_MB=512",
              "--project-id", member.project_id, "--user-id", member.user_id,
              "--consumer-type", "INSTANCE")
    usages = {row["resource_class"]: row["usage"] for row in admin.json(
        "resource", "provider", "usage", "show", provider["uuid"])}
    assert usages == {"VCPU": 2, "MEMORY_MB": 512}

    # The member reads its project's usage (reader), and nothing else.
    as_member = Openstack(None, NEWEST, member.openstack_options())
    usage = {row["resource_class"]: row["usage"] for row in as_member.json(
        "resource", "usage", "show", member.project_id)}
    assert usage == {"INSTANCE": {"consumer_count": 1, "VCPU": 2, "MEMORY_MB": 512}}
    error = as_member.fail("resource", "provider", "list")
    assert "Policy does not allow placement:resource_providers:list to be performed" in error
    assert "HTTP 403" in error

    admin.run("resource", "provider", "allocation", "delete", consumer)
    admin.run("resource", "provider", "delete", provider["uuid"])


def test_report_client_as_nova_with_the_service_role(keystone_placement, nova):
    """Nova's everyday calls and a reshape (its VGPU inventory and the
    instance's VGPU moved from the compute node to a new child provider,
    in one request), all with the service user's token."""
    client = ReportClient(_placement_adapter(nova.session()), str(uuid.uuid4()),
                          str(uuid.uuid4()))
    assert client.placement.get_endpoint() == keystone_placement.url
    root, gpu, instance = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    client.ensure_resource_provider(root, _name("compute"))
    client.set_inventory_for_provider(root, {"VCPU": {"total": 8}, "VGPU": {"total": 2}})
    client.set_traits_for_provider(root, ["COMPUTE_NODE"])
    client.claim_resources(instance, {root: {"resources": {"VCPU": 2, "VGPU": 1}}}, None)

    client.ensure_resource_provider(gpu, _name("pgpu"), parent_uuid=root)
    client.reshape(
        inventories={root: {"VCPU": {"total": 8}}, gpu: {"VGPU": {"total": 2}}},
        allocations={instance: {root: {"resources": {"VCPU": 2}},
                                gpu: {"resources": {"VGPU": 1}}}})

    assert client.provider_usages(root) == {"VCPU": 2}
    assert client.provider_usages(gpu) == {"VGPU": 1}
    moved = client.get_allocations_for_consumer(instance)
    assert moved["consumer_generation"] == 2
    assert {provider: held["resources"] for provider, held in moved["allocations"].items()} \
        == {root: {"VCPU": 2}, gpu: {"VGPU": 1}}
    assert {status for _, _, status in client.requests} <= {200, 204}


def test_a_service_token_gives_a_member_no_more(keystone_placement, member, nova):
    """A member's request that also carries Nova's token as
    X-Service-Token (as services send on behalf of a user) is judged by
    the member's roles: auth_token accepts both, policy still says no."""
    placement = _placement_adapter(session.Session(
        auth=service_token.ServiceTokenAuthWrapper(member.auth(), nova.auth())))
    response = placement.get("/resource_providers", raise_exc=False, microversion=NEWEST)
    assert response.status_code == 403, response.text
    assert "placement:resource_providers:list" in response.json()["errors"][0]["detail"]
    # ...while the member's own project usages stay readable with it.
    response = placement.get(f"/usages?project_id={member.project_id}", raise_exc=False,
                             microversion=NEWEST)
    assert response.status_code == 200, response.text
    status, _, _ = ops.request(keystone_placement.url + "/resource_providers",
                               headers={"X-Service-Token": nova.token()})
    assert status == 401  # a service token alone authenticates nobody
