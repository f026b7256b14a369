"""Who a single sign-on is, and the roles their groups give (docs/sso.md).

After the provider's tokens are verified (accounts/oidc.py), ``sign_in`` finds
the Berth user for the provider's subject, links one at the first sign-in (an
existing user with the same username, else a new user without a password), and
makes the roles the group map owns follow the person's groups: the
``platform-admins`` and ``approvers`` groups here, team memberships through the
policy app (``BERTH_SSO_TEAM_ROLES``, queues/sso.py). Every way it can fail
raises ``SingleSignOnRefused``, with what to tell the person and what to log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from accounts.group_map import Roles, TeamRoleChanges
from accounts.models import SingleSignOnIdentity
from accounts.roles import APPROVERS_GROUP, PLATFORM_ADMINS_GROUP
from accounts.sso_config import SingleSignOn

logger = logging.getLogger(__name__)
# How many of a refused person's groups are named back to them (and logged).
GROUPS_SHOWN = 10


@dataclass
class SingleSignOnRefused(Exception):
    """A single sign-on Berth refuses. ``message`` is for the person (what
    happened and what to do), ``detail`` for the access log."""

    code: str
    message: str
    detail: str = ""
    username: str = ""

    def __str__(self) -> str:
        return f"{self.code}: {self.detail or self.message}"


def groups_in(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The groups claim as a list of names: a list, a single name, or absent.
    A claim name with dots that is not itself a claim is read as a path
    (``realm_access.roles``)."""
    value: Any = claims.get(claim)
    if value is None and "." in claim:
        value = claims
        for part in claim.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [item for item in value if isinstance(item, str)]
    return []


def _shown(groups: list[str]) -> str:
    if not groups:
        return "none"
    more = f" and {len(groups) - GROUPS_SHOWN} more" if len(groups) > GROUPS_SHOWN else ""
    return ", ".join(sorted(groups)[:GROUPS_SHOWN]) + more


def _username(claims: Mapping[str, Any], config: SingleSignOn) -> str:
    provider = config.provider_name
    value = claims.get(config.username_claim)
    if not isinstance(value, str) or not value.strip():
        raise SingleSignOnRefused(
            "no-username",
            f"{provider} did not say who you are: its answer has no "
            f"{config.username_claim!r} claim, which Berth takes your username from. Ask your "
            "platform team to check BERTH_OIDC_USERNAME_CLAIM and the scopes Berth asks for.",
            f"claim {config.username_claim!r} missing (subject {claims.get('sub')!r})",
        )
    username = value.strip()
    try:
        if len(username) > 150:
            raise ValidationError("longer than 150 characters")
        UnicodeUsernameValidator()(username)
    except ValidationError:
        raise SingleSignOnRefused(
            "bad-username",
            f"{provider} gave the username {username!r}, which Berth cannot use (letters, "
            "digits and @.+-_ only, at most 150). Ask your platform team to pick another claim "
            "with BERTH_OIDC_USERNAME_CLAIM.",
            f"claim {config.username_claim!r} = {username!r} is not a valid username",
            username=username[:150],
        ) from None
    return username


def _set_group(user: Any, name: str, present: bool) -> bool:
    group, _ = Group.objects.get_or_create(name=name)
    has = user.groups.filter(pk=group.pk).exists()
    if present and not has:
        user.groups.add(group)
    elif has and not present:
        user.groups.remove(group)
    return has != present


def _apply_global_roles(user: Any, roles: Roles, config: SingleSignOn) -> list[str]:
    """The two Django groups (and the flags a platform admin needs for the admin
    console), for the roles the map names; returns what changed."""
    changes: list[str] = []
    group_map = config.group_map
    if group_map.manages_platform_admin:
        want = roles.platform_admin
        changed = _set_group(user, PLATFORM_ADMINS_GROUP, want)
        if user.is_superuser != want or user.is_staff != want:
            user.is_superuser = user.is_staff = want
            user.save(update_fields=["is_superuser", "is_staff"])
            changed = True
        if changed:
            changes.append(("+" if want else "-") + "platform-admin")
    if group_map.manages_approver and _set_group(user, APPROVERS_GROUP, roles.approver):
        changes.append(("+" if roles.approver else "-") + "approver")
    return changes


def _team_roles() -> Callable[..., TeamRoleChanges]:
    follow: Callable[..., TeamRoleChanges] = import_string(settings.BERTH_SSO_TEAM_ROLES)
    return follow


def apply_roles(user: Any, roles: Roles, config: SingleSignOn) -> list[str]:
    """Make the roles the map owns follow ``roles``; returns what changed, for the log."""
    changes = _apply_global_roles(user, roles, config)
    teams = _team_roles()(
        user,
        wanted=roles.team_roles,
        managed=config.group_map.managed_team_roles,
        note=f"single sign-on: {user.get_username()}'s groups at {config.provider_name}",
    )
    changes += [f"+{grant}" for grant in teams.added]
    changes += [f"-{grant}" for grant in teams.removed]
    for slug in teams.missing_teams:
        logger.warning(
            "single sign-on: BERTH_OIDC_GROUP_MAP gives %s a role in team %r, which does not "
            "exist in Berth: create the team or fix the map",
            user.get_username(),
            slug,
        )
    return changes


def _update_profile(user: Any, claims: Mapping[str, Any]) -> None:
    fields = []
    for field, claim, limit in (
        ("email", "email", 254),
        ("first_name", "given_name", 150),
        ("last_name", "family_name", 150),
    ):
        value = claims.get(claim)
        if isinstance(value, str) and value[:limit] != getattr(user, field):
            setattr(user, field, value[:limit])
            fields.append(field)
    if fields:
        user.save(update_fields=fields)


def _link(claims: Mapping[str, Any], config: SingleSignOn, subject: str, roles: Roles) -> Any:
    """The user for a subject seen for the first time: the user with its
    username (unless another subject holds it), else a new one; None when the
    person is not admitted (nothing is created or linked for them)."""
    username = _username(claims, config)
    users = get_user_model()._default_manager
    user = users.filter(username=username).first()
    if user is not None:
        existing = SingleSignOnIdentity.objects.filter(user=user).first()
        if existing is not None and existing.issuer == config.issuer:
            raise SingleSignOnRefused(
                "identity-conflict",
                f"The Berth account {username!r} already belongs to another "
                f"{config.provider_name} identity. Ask a platform admin: the provider may have "
                "given your username to someone else.",
                f"username {username!r} is linked to subject {existing.subject!r}, not {subject!r}",
                username=username,
            )
    if not roles.admitted:
        return None
    if user is None:
        user = users.create_user(username=username)
        user.set_unusable_password()
        user.save(update_fields=["password"])
    # A link to an earlier issuer (the provider was replaced) moves to this one.
    SingleSignOnIdentity.objects.update_or_create(
        user=user, defaults={"issuer": config.issuer, "subject": subject}
    )
    return user


def sign_in(claims: Mapping[str, Any], config: SingleSignOn) -> Any:
    """The Berth user these verified claims sign in, with their roles applied;
    raises SingleSignOnRefused."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise SingleSignOnRefused(
            "no-subject",
            f"{config.provider_name}'s answer names nobody (no 'sub'). Try again; if it keeps "
            "happening, tell your platform team.",
            "no subject in the claims",
        )
    groups = groups_in(claims, config.groups_claim)
    roles = config.group_map.roles_for(groups)
    changes: list[str] = []
    try:
        with transaction.atomic():
            identity = (
                SingleSignOnIdentity.objects.select_related("user")
                .select_for_update()
                .filter(issuer=config.issuer, subject=subject)
                .first()
            )
            user = identity.user if identity is not None else _link(claims, config, subject, roles)
            if user is not None:
                changes = apply_roles(user, roles, config)
                _update_profile(user, claims)
                SingleSignOnIdentity.objects.filter(user=user).update(
                    groups=sorted(groups), last_sign_in_at=timezone.now()
                )
    except IntegrityError:
        # Two first sign-ins of one person at once: the other one linked them.
        raise SingleSignOnRefused(
            "conflict",
            "Your account was being set up by another sign-in at the same moment. Sign in again.",
            f"concurrent first sign-in of subject {subject!r}",
        ) from None
    username = user.get_username() if user is not None else str(claims.get(config.username_claim))
    if not roles.admitted:
        # Committed above: a person the provider no longer puts in any mapped group
        # loses the roles the map gives at this attempt, API tokens included.
        raise SingleSignOnRefused(
            "no-mapped-group",
            f"Your {config.provider_name} account is in none of the groups that give access to "
            f"Berth (your groups: {_shown(groups)}). Ask your platform team to add you to one.",
            f"no group in BERTH_OIDC_GROUP_MAP; claim {config.groups_claim!r}: {_shown(groups)}"
            + (f"; removed {', '.join(changes)}" if user is not None and changes else ""),
            username=username[:150],
        )
    if not user.is_active:
        raise SingleSignOnRefused(
            "inactive",
            f"Your Berth account {username!r} is deactivated. Ask a platform admin.",
            "the user is not active",
            username=username,
        )
    logger.info(
        "single sign-on: %s signed in (groups %s): %s%s",
        username,
        _shown(list(roles.matched_groups)),
        roles.describe(),
        f"; changed {', '.join(changes)}" if changes else "",
    )
    return user
