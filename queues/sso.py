"""Team memberships that follow the identity provider's groups.

At every single sign-on (accounts/sso.py) the person's team roles named by
``BERTH_OIDC_GROUP_MAP`` are made to match their groups: added where a group
gives them, removed where none does. Only the (team, role) pairs the map names
are touched; memberships in other teams stay as an admin left them. Changes go
through ``set_membership``, so they are in the policy history like any other,
with a note saying they came from the identity provider. A team the map names
but Berth does not have is skipped (and reported), never created.
"""

from __future__ import annotations

from typing import Any

from accounts.group_map import TeamRoleChanges, TeamRoleGrant
from queues.choices import TeamRole
from queues.models import Team, TeamMembership
from queues.services.common import noted, policy_write
from queues.services.teams import set_membership


def follow_identity_provider(
    user: Any,
    *,
    wanted: frozenset[TeamRoleGrant],
    managed: frozenset[TeamRoleGrant],
    note: str,
) -> TeamRoleChanges:
    """Give ``user`` exactly the ``wanted`` roles among the ``managed`` ones."""
    unknown_roles = {grant.role for grant in managed} - set(TeamRole.values)
    if unknown_roles:
        raise ValueError(f"team roles {sorted(unknown_roles)} are not {TeamRole.values}")
    slugs = {grant.team for grant in managed}
    held = {
        TeamRoleGrant(team=slug, role=role)
        for slug, role in TeamMembership.objects.filter(user=user, team__slug__in=slugs)
        .order_by()
        .values_list("team__slug", "role")
    } & managed
    teams = {team.slug: team for team in Team.objects.filter(slug__in=slugs)}
    wanted = wanted & managed
    missing = tuple(sorted({grant.team for grant in wanted} - teams.keys()))
    to_add = sorted(grant for grant in wanted - held if grant.team in teams)
    to_remove = sorted(held - wanted)
    if not to_add and not to_remove:
        # Nothing to write: no lock, no history, no reconcile.
        return TeamRoleChanges(missing_teams=missing)
    username = user.get_username()
    with policy_write(), noted(note):
        for grant in to_add:
            set_membership(
                actor=None, team=teams[grant.team], username=username, role=grant.role, present=True
            )
        for grant in to_remove:
            set_membership(
                actor=None,
                team=teams[grant.team],
                username=username,
                role=grant.role,
                present=False,
            )
    return TeamRoleChanges(added=tuple(to_add), removed=tuple(to_remove), missing_teams=missing)
