"""The single sign-on settings: the group map's syntax and meaning, and every
value Berth cannot run with stopping start-up with a message that names the
variable and the rule (accounts/group_map.py, accounts/sso_config.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accounts.group_map import GroupMapError, TeamRoleGrant, parse_group_map
from accounts.sso_config import (
    SettingError,
    authentication_backends,
    read_account_settings,
)
from controlplane.env import ConfigError, Env

ROOT = Path(__file__).resolve().parents[2]
GOOD = {
    "BERTH_OIDC_ISSUER": "https://login.example.com/realms/acme",
    "BERTH_OIDC_CLIENT_ID": "berth",
    "BERTH_OIDC_CLIENT_SECRET": "0123456789abcdef",
    "BERTH_OIDC_GROUP_MAP": '{"berth-admins": "platform-admin"}',
}


# The group map


def test_the_group_map_gives_each_kind_of_role() -> None:
    group_map = parse_group_map(
        json.dumps(
            {
                "admins": "platform-admin",
                "approvers": ["approver"],
                "research": ["team:research", "team:research:approver"],
                "vision-people": "team:vision:member",
                "everyone": "viewer",
            }
        )
    )
    roles = group_map.roles_for(["research", "approvers", "not-mapped"])
    assert roles.matched_groups == ("approvers", "research")
    assert (roles.platform_admin, roles.approver) == (False, True)
    assert roles.team_roles == {
        TeamRoleGrant("research", "member"),
        TeamRoleGrant("research", "approver"),
    }
    assert group_map.roles_for(["admins"]).platform_admin
    assert group_map.roles_for(["vision-people"]).team_roles == {TeamRoleGrant("vision", "member")}
    viewer = group_map.roles_for(["everyone"])
    assert viewer.admitted and viewer.describe() == "no role (viewer)"
    nobody = group_map.roles_for(["Admins", "admins "])  # compared exactly
    assert not nobody.admitted
    assert group_map.managed_team_roles == {
        TeamRoleGrant("research", "member"),
        TeamRoleGrant("research", "approver"),
        TeamRoleGrant("vision", "member"),
    }
    assert group_map.manages_platform_admin and group_map.manages_approver
    assert not parse_group_map('{"a": "viewer"}').manages_platform_admin


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("admins=platform-admin", "is not valid JSON (Expecting value at line 1, column 1)"),
        ('["platform-admin"]', "must be a JSON object of group → role(s)"),
        ("{}", "maps no group, so nobody could sign in"),
        ('{"a": "admin"}', "group 'a' maps to 'admin', which is not a Berth role"),
        ('{"a": "Platform-Admin"}', "which is not a Berth role"),
        ('{"a": 3}', "group 'a' maps to 3, which is not a string"),
        ('{"a": []}', "group 'a' maps to an empty list"),
        ('{"a": "team:Research"}', "'Research' is not a team slug"),
        ('{"a": "team:"}', "'' is not a team slug"),
        ('{"a": "team:research:owner"}', "a team role is team:<slug>, team:<slug>:member"),
        ('{"a": "team:r:approver:x"}', "a team role is team:<slug>"),
        ('{"a": "viewer", "a": "approver"}', "group 'a' is mapped twice"),
        ('{"": "viewer"}', "has an empty group name"),
        ('{" a": "viewer"}', "group ' a' has spaces at its ends"),
    ],
)
def test_a_bad_group_map_names_the_setting_and_the_rule(value: str, rule: str) -> None:
    with pytest.raises(GroupMapError) as raised:
        parse_group_map(value)
    assert str(raised.value).startswith("BERTH_OIDC_GROUP_MAP")
    assert rule in str(raised.value)


# The other settings


def test_nothing_set_means_local_accounts_and_no_single_sign_on() -> None:
    accounts = read_account_settings(Env({}))
    assert accounts.local_accounts and accounts.sso is None
    # docker-compose passes unset variables as empty strings: still off.
    empty = read_account_settings(Env({name: "" for name in GOOD}))
    assert empty.sso is None


def test_the_issuer_turns_single_sign_on_on_with_defaults() -> None:
    accounts = read_account_settings(Env(GOOD))
    sso = accounts.sso
    assert sso is not None and accounts.local_accounts
    assert (sso.scopes, sso.groups_claim, sso.username_claim, sso.sign_algo) == (
        "openid email profile",
        "groups",
        "preferred_username",
        "RS256",
    )
    assert sso.provider_name == "SSO" and sso.session_seconds == 12 * 3600
    assert sso.discovery_url == (
        "https://login.example.com/realms/acme/.well-known/openid-configuration"
    )
    custom = read_account_settings(
        Env(
            GOOD
            | {
                "BERTH_OIDC_SCOPES": "openid,email groups",
                "BERTH_OIDC_GROUPS_CLAIM": "realm_access.roles",
                "BERTH_OIDC_PROVIDER_NAME": "Okta",
                "BERTH_OIDC_SESSION_HOURS": "8",
                "BERTH_LOCAL_ACCOUNTS": "false",
            }
        )
    )
    assert custom.sso is not None and not custom.local_accounts
    assert custom.sso.scopes == "openid email groups"
    assert custom.sso.groups_claim == "realm_access.roles"
    assert custom.sso.session_seconds == 8 * 3600


def test_the_client_secret_may_come_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    values = {k: v for k, v in GOOD.items() if k != "BERTH_OIDC_CLIENT_SECRET"}
    sso = read_account_settings(Env(values | {"BERTH_OIDC_CLIENT_SECRET_FILE": str(secret)})).sso
    assert sso is not None and sso.client_secret == "from-a-file"


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"BERTH_OIDC_CLIENT_ID": ""}, "BERTH_OIDC_CLIENT_ID is not set: with BERTH_OIDC_ISSUER"),
        ({"BERTH_OIDC_CLIENT_SECRET": " "}, "BERTH_OIDC_CLIENT_SECRET is not set"),
        ({"BERTH_OIDC_GROUP_MAP": ""}, "BERTH_OIDC_GROUP_MAP is not set: with BERTH_OIDC_ISSUER"),
        ({"BERTH_OIDC_GROUP_MAP": '{"a": "root"}'}, "BERTH_OIDC_GROUP_MAP: group 'a' maps to"),
        ({"BERTH_OIDC_ISSUER": "http://login.example.com"}, "is plain http"),
        ({"BERTH_OIDC_ISSUER": "login.example.com"}, "is not an http(s) URL"),
        ({"BERTH_OIDC_ISSUER": "https://idp.example.com/?x=1"}, "has a query or fragment"),
        ({"BERTH_OIDC_TOKEN_ENDPOINT": "http://idp.example.com/t"}, "BERTH_OIDC_TOKEN_ENDPOINT="),
        ({"BERTH_OIDC_SCOPES": "email"}, "BERTH_OIDC_SCOPES='email' lacks 'openid'"),
        ({"BERTH_OIDC_SIGN_ALGO": "none"}, "BERTH_OIDC_SIGN_ALGO='none' is not supported"),
        ({"BERTH_OIDC_USERNAME_CLAIM": "sub"}, "BERTH_OIDC_USERNAME_CLAIM='sub' is a protocol"),
    ],
)
def test_a_bad_single_sign_on_setting_names_the_variable_and_the_rule(
    changes: dict[str, str], rule: str
) -> None:
    with pytest.raises(SettingError) as raised:
        read_account_settings(Env(GOOD | changes))
    assert rule in str(raised.value)


@pytest.mark.parametrize(
    ("values", "error", "rule"),
    [
        (
            {"BERTH_LOCAL_ACCOUNTS": "false"},
            SettingError,
            "BERTH_LOCAL_ACCOUNTS=false needs single sign-on, or nobody could sign in",
        ),
        (
            {"BERTH_OIDC_CLIENT_ID": "berth"},
            SettingError,
            "BERTH_OIDC_CLIENT_ID is set but BERTH_OIDC_ISSUER is not",
        ),
        (GOOD | {"BERTH_LOCAL_ACCOUNTS": "perhaps"}, ConfigError, "is not a boolean"),
        (GOOD | {"BERTH_OIDC_SESSION_HOURS": "0"}, ConfigError, "must be at least 1"),
    ],
)
def test_settings_that_cannot_work_together(
    values: dict[str, str], error: type[Exception], rule: str
) -> None:
    with pytest.raises(error) as raised:
        read_account_settings(Env(values))
    assert rule in str(raised.value)


def test_the_authentication_backends_follow_the_settings() -> None:
    axes, password, sso = (
        "axes.backends.AxesStandaloneBackend",
        "django.contrib.auth.backends.ModelBackend",
        "accounts.oidc.SingleSignOnBackend",
    )
    assert authentication_backends(read_account_settings(Env({}))) == [axes, password]
    assert authentication_backends(read_account_settings(Env(GOOD))) == [axes, password, sso]
    off = read_account_settings(Env(GOOD | {"BERTH_LOCAL_ACCOUNTS": "0"}))
    assert authentication_backends(off) == [axes, sso]


# Start-up, as a real process


def start_up(tmp_path: Path, **values: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    env |= {"BERTH_DATA_DIR": str(tmp_path), "BERTH_SECRET_KEY": "k" * 40, **values}
    show = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.AUTHENTICATION_BACKENDS[-1], s.BERTH_SSO.provider_name, s.BERTH_LOCAL_ACCOUNTS)"
    )
    return subprocess.run(
        [sys.executable, "-c", show],
        cwd=ROOT,
        env=env | {"DJANGO_SETTINGS_MODULE": "controlplane.settings"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_start_up_reads_the_single_sign_on_settings(tmp_path: Path) -> None:
    result = start_up(
        tmp_path, **GOOD, BERTH_OIDC_PROVIDER_NAME="Keycloak", BERTH_LOCAL_ACCOUNTS="false"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["accounts.oidc.SingleSignOnBackend", "Keycloak", "False"]


def test_a_bad_group_map_stops_start_up_naming_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    env |= {
        "BERTH_DATA_DIR": str(tmp_path),
        "BERTH_SECRET_KEY": "k" * 40,
        **GOOD,
        "BERTH_OIDC_GROUP_MAP": '{"ml-research": "team:research:lead"}',
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "berth: configuration error: BERTH_OIDC_GROUP_MAP: group 'ml-research' maps to "
        "'team:research:lead': a team role is team:<slug>, team:<slug>:member or "
        "team:<slug>:approver\n"
    )
