"""The enforcer looks at the policy file at a bounded rate (an edited file
is still picked up) and reuses decisions only for rules made of pure
checks. Time is moved by hand: nothing here waits."""

from __future__ import annotations

import os

import pytest
import yaml
from oslo_policy import _checks, _parser, policy

from placement import conf as placement_conf
from placement import policies

ADMIN = {"user_id": "admin", "project_id": "admin", "roles": ["admin"]}
MEMBER = {"user_id": "bob", "project_id": "p", "roles": ["member"]}
TARGET = {"project_id": "p", "user_id": "bob"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(policies.time, "monotonic", clock)
    return clock


def enforcer_with_file(tmp_path, rules: dict) -> tuple[policies.Enforcer, object]:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(rules))
    conf = placement_conf.build_conf(config_files=[])
    conf.set_override("policy_file", str(policy_file), group="oslo_policy")
    return policies.build_enforcer(conf), policy_file


def rewrite(policy_file, rules: dict) -> None:
    """New content and a new modification time (oslo.policy compares it)."""
    stat = policy_file.stat()
    policy_file.write_text(yaml.safe_dump(rules))
    os.utime(policy_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


def test_edited_policy_file_is_picked_up_after_the_interval(tmp_path, clock):
    enforcer, policy_file = enforcer_with_file(tmp_path, {"placement:traits:list": "@"})
    assert enforcer.allows("placement:traits:list", TARGET, dict(MEMBER))
    rewrite(policy_file, {"placement:traits:list": "!"})
    clock.now += enforcer.RULES_CHECK_INTERVAL / 2
    # Not looked at again yet: the previous decision stands.
    assert enforcer.allows("placement:traits:list", TARGET, dict(MEMBER))
    clock.now += enforcer.RULES_CHECK_INTERVAL
    assert not enforcer.allows("placement:traits:list", TARGET, dict(MEMBER))


def test_scope_setting_is_read_again_with_the_rules(tmp_path, clock):
    enforcer, _ = enforcer_with_file(tmp_path, {})
    assert enforcer.scope_enforced
    enforcer.conf.set_override("enforce_scope", False, group="oslo_policy")
    clock.now += enforcer.RULES_CHECK_INTERVAL / 2
    assert enforcer.scope_enforced
    clock.now += enforcer.RULES_CHECK_INTERVAL
    assert not enforcer.scope_enforced


def test_decisions_depend_on_target_and_credentials(tmp_path, clock):
    enforcer, _ = enforcer_with_file(
        tmp_path, {"placement:usages": "role:admin or project_id:%(project_id)s"})
    for _ in range(2):  # the second round answers from the kept decisions
        assert enforcer.allows("placement:usages", TARGET, dict(MEMBER))
        assert not enforcer.allows("placement:usages", {"project_id": "q"}, dict(MEMBER))
        assert enforcer.allows("placement:usages", {"project_id": "q"}, dict(ADMIN))
        assert not enforcer.allows("placement:usages", TARGET,
                                   {**MEMBER, "project_id": "q"})
        assert enforcer.allows("placement:usages", TARGET,
                               {**MEMBER, "project_id": "q", "roles": ["admin"]})


class CountingCheck(policy.Check):
    """Allows every other call: a check whose answer is not a function of
    the request (like an HTTP check)."""

    calls = 0

    def __call__(self, target, creds, enforcer, current_rule=None):
        CountingCheck.calls += 1
        return CountingCheck.calls % 2 == 1


def test_rules_with_impure_checks_are_evaluated_every_time(tmp_path, clock, monkeypatch):
    monkeypatch.setitem(_checks.registered_checks, "counting", CountingCheck)
    CountingCheck.calls = 0
    enforcer, _ = enforcer_with_file(
        tmp_path, {"placement:traits:list": "role:admin and counting:x"})
    answers = [enforcer.allows("placement:traits:list", TARGET, dict(ADMIN))
               for _ in range(4)]
    assert answers == [True, False, True, False]
    assert CountingCheck.calls == 4


def test_rules_set_by_hand_drop_the_kept_decisions(tmp_path, clock):
    enforcer, _ = enforcer_with_file(tmp_path, {"placement:traits:list": "@"})
    assert enforcer.allows("placement:traits:list", TARGET, dict(MEMBER))
    enforcer.set_rules({"placement:traits:list": _parser.parse_rule("!")},
                       overwrite=False, use_conf=True)
    assert not enforcer.allows("placement:traits:list", TARGET, dict(MEMBER))


def test_decisions_outlive_a_look_at_unchanged_rules(tmp_path, clock, monkeypatch):
    """Looking at the files again every interval keeps the decisions while
    nothing changed (a decision made again costs a fifth of a small
    request), and drops them once the file changed."""
    enforcer, policy_file = enforcer_with_file(
        tmp_path, {"placement:usages": "role:admin or project_id:%(project_id)s"})
    authorized = []
    authorize = enforcer.authorize
    monkeypatch.setattr(enforcer, "authorize", lambda *args, **kwargs: authorized.append(
        args) or authorize(*args, **kwargs))
    assert enforcer.allows("placement:usages", TARGET, dict(MEMBER))
    clock.now += enforcer.RULES_CHECK_INTERVAL * 2
    assert enforcer.allows("placement:usages", TARGET, dict(MEMBER))
    assert len(authorized) == 1
    rewrite(policy_file, {"placement:usages": "role:admin"})
    clock.now += enforcer.RULES_CHECK_INTERVAL * 2
    assert not enforcer.allows("placement:usages", TARGET, dict(MEMBER))
    assert len(authorized) == 2
