"""The policy truth table of the spec, for every rule, in legacy and secure
RBAC modes, with contexts built by the real noauth2 and context layers from
the headers a client sends."""

from __future__ import annotations

import pytest
import webob
import yaml

from placement import conf as placement_conf
from placement import exceptions, middleware, policies

PROJECT = "project-p"
OTHER_PROJECT = "project-q"

# Rule name -> its default as written in the spec's policy table.
SPEC_RULES = {
    **{f"placement:resource_providers:{action}": "rule:admin_or_service_api"
       for action in ("list", "create", "show", "update", "delete")},
    **{f"placement:resource_providers:inventories:{action}": "rule:admin_or_service_api"
       for action in ("list", "create", "show", "update", "delete")},
    "placement:resource_providers:aggregates:list": "rule:admin_or_service_api",
    "placement:resource_providers:aggregates:update": "rule:admin_or_service_api",
    "placement:resource_providers:usages": "rule:admin_or_service_api",
    "placement:usages": "rule:admin_or_project_reader_or_service_api",
    **{f"placement:traits:{action}": "rule:admin_or_service_api"
       for action in ("list", "show", "update", "delete")},
    **{f"placement:resource_providers:traits:{action}": "rule:admin_or_service_api"
       for action in ("list", "update", "delete")},
    **{f"placement:resource_classes:{action}": "rule:admin_or_service_api"
       for action in ("list", "create", "show", "update", "delete")},
    **{f"placement:allocations:{action}": "rule:admin_or_service_api"
       for action in ("list", "update", "delete", "manage")},
    "placement:resource_providers:allocations:list": "rule:admin_or_service_api",
    "placement:allocation_candidates:list": "rule:admin_or_service_api",
    "placement:reshaper:reshape": "rule:service_api",
}
# Rules of this service beyond the spec: explaining allocation candidates
# and the capacity routes (counting shapes, the bulk read of every
# provider's inventories and usages) tell about every provider, admin only.
EXTENSION_RULES = {"placement:allocation_candidates:explain": "rule:admin_api",
                   "placement:capacity:read": "rule:admin_api",
                   "placement:capacity:providers": "rule:admin_api"}
ALL_RULES = {**SPEC_RULES, **EXTENSION_RULES}

# Caller -> the headers it sends (noauth2 tokens, X-Roles).
CALLERS = {
    "admin": {"X-Auth-Token": "admin"},
    "service": {"X-Auth-Token": "nova:service-project", "X-Roles": "service"},
    "reader": {"X-Auth-Token": f"alice:{PROJECT}", "X-Roles": "reader"},
    "member_reader": {"X-Auth-Token": f"alice:{PROJECT}", "X-Roles": "member,reader"},
    "no_roles": {"X-Auth-Token": "user"},
    "member": {"X-Auth-Token": f"bob:{PROJECT}", "X-Roles": "member"},
    "system_admin": {"X-Auth-Token": "admin", "OpenStack-System-Scope": "all",
                     "X-Roles": "admin"},
    "system_service": {"X-Auth-Token": "nova", "OpenStack-System-Scope": "all",
                       "X-Roles": "service"},
}


def make_conf(**policy_options):
    conf = placement_conf.build_conf(config_files=[])
    for option, value in policy_options.items():
        conf.set_override(option, value, group="oslo_policy")
    return conf


def context_for(caller: str, conf):
    """The context the middleware stack builds for ``caller``'s request."""
    captured = {}

    def capture(environ, start_response):
        captured["context"] = environ["placement.context"]
        start_response("204 No Content", [])
        return []

    services = {"conf": conf, "enforcer": policies.build_enforcer(conf)}
    application = middleware.NoAuth(
        middleware.Context(capture, require_user=False, services=services))
    webob.Request.blank("/resource_providers", headers=CALLERS[caller]).get_response(
        application)
    return captured["context"]


def allowed(context, rule: str, target: dict | None = None) -> bool:
    try:
        context.can(rule, target)
    except exceptions.PolicyNotAuthorized as error:
        assert str(error) == f"Policy does not allow {rule} to be performed."
        return False
    return True


def usages_target(project_id):
    return {"project_id": project_id}


def expected(caller: str, rule: str, legacy: bool, target_project: str | None) -> bool:
    """The spec's truth table for project-scoped callers; system scope
    (no project) is refused everywhere."""
    if caller.startswith("system_"):
        return False
    if caller == "admin":
        return legacy or rule != "placement:reshaper:reshape"
    if rule in EXTENSION_RULES:
        return False
    if caller == "service":
        return True
    if caller in ("reader", "member_reader"):
        return rule == "placement:usages" and target_project == PROJECT
    return False


@pytest.mark.parametrize("legacy", [True, False], ids=["legacy", "secure"])
@pytest.mark.parametrize("caller", sorted(CALLERS))
def test_truth_table(caller, legacy):
    conf = make_conf(enforce_new_defaults=not legacy)
    context = context_for(caller, conf)
    for rule in ALL_RULES:
        if rule == "placement:usages":
            for project in (PROJECT, OTHER_PROJECT, None):
                assert allowed(context, rule, usages_target(project)) == expected(
                    caller, rule, legacy, project), (rule, project)
        else:
            assert allowed(context, rule) == expected(caller, rule, legacy, None), rule


def test_every_rule_of_the_spec_is_registered_with_its_default_and_scope():
    registered = {rule.name: rule for rule in policies.list_rules()}
    for name, check_str in ALL_RULES.items():
        assert registered[name].check_str == check_str, name
        assert registered[name].scope_types == ["project"], name
    api_rules = {name for name in registered if name.startswith("placement:")}
    assert api_rules == set(ALL_RULES)


# Base rule -> (new default, deprecated default), as in the spec.
BASE_RULES = {
    "admin_api": ("role:admin", None),
    "service_api": ("role:service", "role:admin"),
    "admin_or_service_api": ("role:admin or role:service", "role:admin"),
    "project_reader_api": ("role:reader and project_id:%(project_id)s", "role:admin"),
    "admin_or_project_reader_or_service_api": (
        "role:admin or rule:project_reader_api or role:service", "role:admin"),
}


@pytest.mark.parametrize("name", sorted(BASE_RULES))
def test_base_rules(name):
    new_default, deprecated_default = BASE_RULES[name]
    rule = {rule.name: rule for rule in policies.list_rules()}[name]
    assert rule.check_str == new_default
    if deprecated_default is None:
        assert rule.deprecated_rule is None
    else:
        assert rule.deprecated_rule.check_str == deprecated_default


def test_legacy_defaults_by_default():
    """An admin may reshape unless enforce_new_defaults is turned on."""
    context = context_for("admin", make_conf())
    assert allowed(context, "placement:reshaper:reshape")
    assert allowed(context, "placement:resource_providers:list")
    member = context_for("member", make_conf())
    assert not allowed(member, "placement:resource_providers:list")


def test_scope_is_not_enforced_when_disabled():
    context = context_for("system_admin",
                          make_conf(enforce_scope=False, enforce_new_defaults=True))
    assert allowed(context, "placement:resource_providers:list")
    assert not allowed(context, "placement:reshaper:reshape")


def test_policy_file_overrides_defaults(tmp_path):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(
        {"placement:traits:list": "@", "placement:reshaper:reshape": "role:admin"}))
    conf = make_conf(policy_file=str(policy_file))
    nobody = context_for("no_roles", conf)
    assert allowed(nobody, "placement:traits:list")
    assert not allowed(nobody, "placement:traits:show")
    assert allowed(context_for("admin", conf), "placement:reshaper:reshape")


def test_enforcer_entry_point_reads_the_deployment_policy_file(tmp_path, monkeypatch):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump({"placement:traits:list": "role:reader"}))
    monkeypatch.setenv("OS_PLACEMENT_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("OS_OSLO_POLICY__POLICY_FILE", str(policy_file))
    enforcer = policies.get_enforcer()
    enforcer.load_rules()
    assert str(enforcer.rules["placement:traits:list"]) == "role:reader"
    assert str(enforcer.rules["placement:traits:show"]) == "rule:admin_or_service_api"
