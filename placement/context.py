"""The request context: who is calling, plus what handlers need to serve them
(the database, the configuration, the policy enforcer)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from oslo_context import context

from placement import exceptions

if TYPE_CHECKING:
    from oslo_config import cfg

    from placement.db.api import Database


class Enforcer(Protocol):
    """What a context asks of the policy enforcer (placement.policies)."""

    def allows(self, rule: str, target: Mapping, credentials: dict) -> bool: ...


class RequestContext(context.RequestContext):
    db: Database
    conf: cfg.ConfigOpts
    enforcer: Enforcer

    def can(self, rule: str, target: dict | None = None) -> None:
        """Raise PolicyNotAuthorized unless ``rule`` allows this request.

        A request whose scope is not among the rule's scope types (a
        system-scoped token, as every rule is project-scoped) is refused like
        any other: oslo.policy answers False instead of raising InvalidScope
        because ``do_raise`` is off.
        """
        if target is None:
            target = {"project_id": self.project_id, "user_id": self.user_id}
        if not self.enforcer.allows(rule, target, self._credentials()):
            raise exceptions.PolicyNotAuthorized(rule)

    def _credentials(self) -> dict:
        credentials = dict(self.to_policy_values())
        if not self.enforcer.scope_enforced:
            # Without scope enforcement a system-scoped token is judged by
            # its roles alone, as oslo.policy did before it always enforced.
            credentials.pop("system_scope", None)
        return credentials
