"""Which Berth roles an identity provider's groups give: ``BERTH_OIDC_GROUP_MAP``.

The setting is a JSON object from a group name, exactly as the provider sends
it in the groups claim, to one role or a list of roles::

    {"berth-admins": "platform-admin",
     "gpu-approvers": "approver",
     "ml-research": ["team:research", "team:research:approver"],
     "engineering": "viewer"}

The roles are Berth's own (``accounts.roles`` and the team memberships):

- ``platform-admin``: the ``platform-admins`` group (and Django's superuser
  and staff flags, so the admin console opens);
- ``approver``: the global ``approvers`` group;
- ``team:<slug>`` (or ``team:<slug>:member``): member of that team;
- ``team:<slug>:approver``: approver of that team;
- ``viewer``: no role; the group's people may sign in and read the policy.

A person in none of the mapped groups is refused. The map owns exactly the
roles it names: at every sign-in each of them is granted when one of the
person's groups maps to it and removed when none does; roles it never names
(a team it does not mention, say) are left as they are.

Pure: no Django, so settings can parse it at start-up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PLATFORM_ADMIN = "platform-admin"
APPROVER = "approver"
VIEWER = "viewer"
TEAM_PREFIX = "team:"
# The two roles of queues.choices.TeamRole (accounts sits below queues, so the
# values are repeated here; queues.sso checks them against TeamRole).
TEAM_MEMBER = "member"
TEAM_APPROVER = "approver"
TEAM_ROLES = (TEAM_MEMBER, TEAM_APPROVER)
# A team's slug is an RFC 1123 label (queues.rules), like a namespace name.
_SLUG = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

ROLE_SYNTAX = "platform-admin, approver, viewer, team:<slug> (a member) or team:<slug>:approver"
EXAMPLE = '{"berth-admins": "platform-admin", "ml-research": ["team:research"]}'


class GroupMapError(ValueError):
    """The setting cannot be used; the message names it and the rule."""


@dataclass(frozen=True, order=True)
class TeamRoleGrant:
    team: str
    role: str

    def __str__(self) -> str:
        return f"{self.role} of team {self.team}"


@dataclass(frozen=True)
class TeamRoleChanges:
    """What applying a person's team roles changed (queues.sso)."""

    added: tuple[TeamRoleGrant, ...] = ()
    removed: tuple[TeamRoleGrant, ...] = ()
    # Teams the map names that do not exist in Berth: their roles were not given.
    missing_teams: tuple[str, ...] = ()


@dataclass(frozen=True)
class Roles:
    """What one person's groups give."""

    platform_admin: bool
    approver: bool
    team_roles: frozenset[TeamRoleGrant]
    # The person's groups that the map names; none means they are refused.
    matched_groups: tuple[str, ...]

    @property
    def admitted(self) -> bool:
        return bool(self.matched_groups)

    def describe(self) -> str:
        parts = [PLATFORM_ADMIN] if self.platform_admin else []
        parts += [APPROVER] if self.approver else []
        parts += [str(grant) for grant in sorted(self.team_roles)]
        return ", ".join(parts) or "no role (viewer)"


@dataclass(frozen=True)
class GroupMap:
    """The parsed setting: group name → the roles it gives."""

    grants: Mapping[str, tuple[str, ...]]

    def roles_for(self, groups: Iterable[str]) -> Roles:
        matched = tuple(sorted({group for group in groups if group in self.grants}))
        roles = {role for group in matched for role in self.grants[group]}
        return Roles(
            platform_admin=PLATFORM_ADMIN in roles,
            approver=APPROVER in roles,
            team_roles=frozenset(team_grant(role) for role in roles if role.startswith("team:")),
            matched_groups=matched,
        )

    @property
    def _all_roles(self) -> set[str]:
        return {role for roles in self.grants.values() for role in roles}

    @property
    def manages_platform_admin(self) -> bool:
        return PLATFORM_ADMIN in self._all_roles

    @property
    def manages_approver(self) -> bool:
        return APPROVER in self._all_roles

    @property
    def managed_team_roles(self) -> frozenset[TeamRoleGrant]:
        """The (team, role) pairs the map names: only these follow the provider."""
        return frozenset(team_grant(role) for role in self._all_roles if role.startswith("team:"))


def team_grant(role: str) -> TeamRoleGrant:
    """``team:research`` → member of research; ``team:research:approver`` → approver."""
    _, team, *rest = role.split(":")
    return TeamRoleGrant(team=team, role=rest[0] if rest else TEAM_MEMBER)


def _role_error(name: str, group: str, role: Any) -> str | None:
    """Why ``role`` is not a role the map may give, or None if it is."""
    if not isinstance(role, str):
        return f"group {group!r} maps to {role!r}, which is not a string: use {ROLE_SYNTAX}"
    if role in (PLATFORM_ADMIN, APPROVER, VIEWER):
        return None
    if not role.startswith(TEAM_PREFIX):
        return f"group {group!r} maps to {role!r}, which is not a Berth role: use {ROLE_SYNTAX}"
    parts = role.split(":")
    if len(parts) > 3 or (len(parts) == 3 and parts[2] not in TEAM_ROLES):
        return (
            f"group {group!r} maps to {role!r}: a team role is team:<slug>, team:<slug>:member "
            "or team:<slug>:approver"
        )
    if not _SLUG.match(parts[1]):
        return (
            f"group {group!r} maps to {role!r}: {parts[1]!r} is not a team slug (lower-case "
            "letters, digits and '-', at most 63, starting and ending with a letter or digit)"
        )
    return None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise GroupMapError(f"group {key!r} is mapped twice: give it one entry with a list")
        seen[key] = value
    return seen


def parse_group_map(text: str, *, name: str = "BERTH_OIDC_GROUP_MAP") -> GroupMap:
    """Parse the setting ``name``; raise GroupMapError naming it and the rule broken."""
    try:
        raw = json.loads(text, object_pairs_hook=_unique_keys)
    except GroupMapError as exc:
        raise GroupMapError(f"{name}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise GroupMapError(
            f"{name} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): "
            f"write an object of group → role(s), e.g. {EXAMPLE}"
        ) from None
    if not isinstance(raw, dict):
        raise GroupMapError(f"{name} must be a JSON object of group → role(s), e.g. {EXAMPLE}")
    if not raw:
        raise GroupMapError(
            f"{name} maps no group, so nobody could sign in: map at least one group, e.g. {EXAMPLE}"
        )
    grants: dict[str, tuple[str, ...]] = {}
    for group, value in raw.items():
        if not group.strip():
            raise GroupMapError(f"{name} has an empty group name: name each group as it is sent")
        if group != group.strip():
            raise GroupMapError(
                f"{name}: group {group!r} has spaces at its ends: group names are compared "
                "exactly as the identity provider sends them"
            )
        roles = value if isinstance(value, list) else [value]
        if not roles:
            raise GroupMapError(
                f"{name}: group {group!r} maps to an empty list: give at least one role "
                f"({ROLE_SYNTAX}), or 'viewer' to let its people sign in with no role"
            )
        for role in roles:
            problem = _role_error(name, group, role)
            if problem:
                raise GroupMapError(f"{name}: {problem}")
        grants[group] = tuple(dict.fromkeys(roles))
    return GroupMap(grants=grants)
