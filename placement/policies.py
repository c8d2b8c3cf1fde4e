"""Every policy rule of the API with its defaults (the base rules here, one
per endpoint declared in the route table), and the enforcer."""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping

from oslo_config import cfg
from oslo_policy import _checks, policy

from placement import conf as placement_conf
from placement import router
from placement.endpoint import Endpoint, Policy

_DEPRECATED_REASON = "Placement now supports the secure RBAC defaults (reader, service)"
_DEPRECATED_SINCE = "0.1.0"


def _deprecated(name: str) -> policy.DeprecatedRule:
    return policy.DeprecatedRule(name=name, check_str="role:admin",
                                 deprecated_reason=_DEPRECATED_REASON,
                                 deprecated_since=_DEPRECATED_SINCE)


BASE_RULES = [
    policy.RuleDefault("admin_api", "role:admin",
                       description="Default rule for most placement APIs."),
    policy.RuleDefault("service_api", "role:service",
                       description="Default rule for service-to-service APIs.",
                       deprecated_rule=_deprecated("service_api")),
    policy.RuleDefault("admin_or_service_api", "role:admin or role:service",
                       description="Default rule for APIs for admins and services.",
                       deprecated_rule=_deprecated("admin_or_service_api")),
    policy.RuleDefault("project_reader_api", "role:reader and project_id:%(project_id)s",
                       description="Default rule for project level read-only APIs.",
                       deprecated_rule=_deprecated("project_reader_api")),
    policy.RuleDefault("admin_or_project_reader_or_service_api",
                       "role:admin or rule:project_reader_api or role:service",
                       description="Default rule for project readers, admins and services.",
                       deprecated_rule=_deprecated("admin_or_project_reader_or_service_api")),
]


def api_rules(routes: Mapping[str, Mapping[str, Endpoint]]) -> list[policy.DocumentedRuleDefault]:
    """The rule each endpoint of the route table ``routes`` declares, with
    the operations that ask it, in the table's order."""
    declared: dict[str, Policy] = {}
    operations: dict[str, list[dict[str, str]]] = {}
    for path, endpoints in routes.items():
        for method, endpoint in endpoints.items():
            rule = endpoint.operation.policy
            if rule is None or not path:  # '' is '/' again
                continue
            if declared.setdefault(rule.name, rule) != rule:
                raise ValueError(f"{rule.name} is declared twice, differently")
            operations.setdefault(rule.name, []).append({"method": method, "path": path})
    return [policy.DocumentedRuleDefault(
                name=rule.name, check_str=rule.check_str, description=rule.description,
                operations=operations[rule.name], scope_types=["project"])
            for rule in declared.values()]


def list_rules() -> list[policy.RuleDefault]:
    """Entry point for the oslo.policy sample and documentation generators."""
    return BASE_RULES + api_rules(router.ROUTES)


# Checks whose answer depends on nothing but the rules, the target and the
# credentials (no remote call, no clock): their decisions can be reused.
_PURE_CHECKS = (_checks.AndCheck, _checks.OrCheck, _checks.NotCheck, _checks.RuleCheck,
                _checks.RoleCheck, _checks.GenericCheck, _checks.TrueCheck,
                _checks.FalseCheck)


# Decisions kept at most (distinct rule, target and credentials triples);
# a full cache is emptied.
MAX_DECISIONS = 4096


def _frozen(values: Mapping) -> Hashable:
    """A hashable form of a target or of credentials (lists become tuples);
    TypeError when a value cannot be hashed."""
    frozen = frozenset((key, tuple(value) if isinstance(value, list) else value)
                       for key, value in values.items())
    hash(frozen)
    return frozen


class Enforcer(policy.Enforcer):
    """oslo.policy's enforcer, made cheap enough to run on every request.

    oslo.policy looks for the policy file and directories on disk at every
    check and inspects the signature of every check it evaluates (a fifth
    of a small request). Here the files are looked at again at most once
    every RULES_CHECK_INTERVAL seconds, so an edited policy file is still
    picked up; and the decision for a rule, target and credentials is kept
    while the rules and ``enforce_scope`` stay the same, when the rule
    consists of pure checks only. ``[oslo_policy]
    enforce_scope`` is read again with the files (an option lookup costs
    about 10 microseconds, a fiftieth of a small request).
    """

    RULES_CHECK_INTERVAL = 1.0

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        self._rules_checked_at: float | None = None
        self._scope_enforced = True
        self._decisions: dict[Hashable, bool] = {}
        self._pure_rules: dict[str, bool] = {}

    def load_rules(self, force_reload: bool = False) -> None:
        now = time.monotonic()
        if (not force_reload and self.rules and self._rules_checked_at is not None
                and now - self._rules_checked_at < self.RULES_CHECK_INTERVAL):
            return
        rules = self.rules
        super().load_rules(force_reload)
        self._rules_checked_at = now
        scope_enforced = self.conf.oslo_policy.enforce_scope
        # the decisions hold while the rules and the scope setting do (new
        # rules come through set_rules, which forgets them too)
        if self.rules is not rules or scope_enforced != self._scope_enforced:
            self._forget_decisions()
        self._scope_enforced = scope_enforced

    @property
    def scope_enforced(self) -> bool:
        """``[oslo_policy] enforce_scope``, as of the last look at the rules."""
        self.load_rules()
        return self._scope_enforced

    def set_rules(self, rules: dict, overwrite: bool = True, use_conf: bool = False) -> None:
        super().set_rules(rules, overwrite, use_conf)
        self._forget_decisions()

    def _forget_decisions(self) -> None:
        # New dicts rather than clear(): a decision being computed with the
        # previous rules lands in the old dict.
        self._decisions = {}
        self._pure_rules = {}

    def _is_pure(self, check: _checks.BaseCheck, seen: frozenset[str]) -> bool:
        if not isinstance(check, _PURE_CHECKS):
            return False
        if isinstance(check, (_checks.AndCheck, _checks.OrCheck)):
            return all(self._is_pure(rule, seen) for rule in check.rules)
        if isinstance(check, _checks.NotCheck):
            return self._is_pure(check.rule, seen)
        if isinstance(check, _checks.RuleCheck):
            if check.match in seen:  # a cycle: let oslo.policy deal with it
                return False
            try:
                referenced = self.rules[check.match]
            except KeyError:  # evaluates to False whatever the request
                return True
            return self._is_pure(referenced, seen | {check.match})
        return True

    def _rule_is_pure(self, rule: str) -> bool:
        pure = self._pure_rules.get(rule)
        if pure is None:
            try:
                check = self.rules[rule]
            except KeyError:
                pure = False
            else:
                pure = self._is_pure(check, frozenset([rule]))
            self._pure_rules[rule] = pure
        return pure

    def allows(self, rule: str, target: Mapping, credentials: dict) -> bool:
        """``authorize(rule, target, credentials, do_raise=False)``, with
        the decision reused while the rules stay the same."""
        self.load_rules()
        decisions = self._decisions
        try:
            key = (rule, _frozen(target), _frozen(credentials))
        except TypeError:
            key = None
        if key is not None:
            decision = decisions.get(key)
            if decision is not None:
                return decision
        decision = bool(self.authorize(rule, target, credentials, do_raise=False))
        if key is not None and self._rule_is_pure(rule):
            if len(decisions) >= MAX_DECISIONS:
                decisions.clear()
            decisions[key] = decision
        return decision


def build_enforcer(conf: cfg.ConfigOpts,
                   routes: Mapping[str, Mapping[str, Endpoint]] = router.ROUTES) -> Enforcer:
    """The enforcer of ``conf``, with the defaults of the base rules and of
    the rules of the route table ``routes`` (the service's)."""
    # Every base rule has a deprecated default: warning about each of them
    # whenever the rules are loaded would only fill the logs.
    enforcer = Enforcer(conf)
    enforcer.suppress_default_change_warnings = True
    enforcer.register_defaults(BASE_RULES + api_rules(routes))
    return enforcer


def get_enforcer() -> Enforcer:
    """Entry point for oslopolicy-policy-generator and oslopolicy-checker:
    the enforcer of this deployment (its configuration files and
    environment, so its policy file)."""
    return build_enforcer(placement_conf.build_conf())
