"""The demo organisation (tests.jobs.conftest) with a global approver, and a
builder for grant requests."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from accounts.roles import APPROVERS_GROUP
from tests.factories import token_client, user
from tests.jobs.conftest import Org, org

__all__ = ["org"]


@pytest.fixture
def carol(org: Org) -> Any:
    """A global approver (group ``approvers``): decides quota grants."""
    person = user("carol")
    group, _ = Group.objects.get_or_create(name=APPROVERS_GROUP)
    person.groups.add(group)
    org.users["carol"] = person
    return person


@pytest.fixture
def carol_client(carol: Any) -> Any:
    return token_client(carol)


def ask(**overrides: Any) -> dict[str, Any]:
    """+16 h100 GPUs of nominal quota for research for three days."""
    body: dict[str, Any] = {
        "cluster_queue": "research",
        "kind": "nominal",
        "flavor": "h100",
        "amount": "16",
        "ends_at": (timezone.now() + timedelta(days=3)).isoformat(),
        "justification": "release candidate training",
    }
    body.update(overrides)
    return body
