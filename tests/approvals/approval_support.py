"""Approval requests for tests that need one without running the controller,
and the people who decide them (on top of the ``org`` fixture)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import Group
from django.utils import timezone

from accounts.roles import APPROVERS_GROUP
from approvals.models import ApprovalRequest
from queues import services
from queues.models import Team
from tests.factories import user


def approvers() -> dict[str, Any]:
    """carol approves for research, dave for serving, erin everywhere (group
    ``approvers``); each also gets an e-mail address."""
    people = {name: user(name) for name in ("carol", "dave", "erin")}
    for name, team in (("carol", "research"), ("dave", "serving")):
        services.set_membership(
            actor=None,
            team=Team.objects.get(slug=team),
            username=name,
            role="approver",
            present=True,
        )
    Group.objects.get_or_create(name=APPROVERS_GROUP)[0].user_set.add(people["erin"])
    for name, person in people.items():
        person.email = f"{name}@example.com"
        person.save(update_fields=["email"])
    return people


def approval_request(requester: Any, **overrides: Any) -> ApprovalRequest:
    """A pending request for a research workload in the shared ``urgent`` queue."""
    now = timezone.now()
    fields: dict[str, Any] = {
        "workload_uid": f"uid-{ApprovalRequest.objects.count() + 1}",
        "namespace": "research",
        "workload_name": "job-release-fix",
        "cluster_queue": "urgent",
        "local_queue": "urgent",
        "team": None,
        "requester": requester,
        "requested": {"nvidia.com/gpu": 8},
        "gpus": 8,
        "priority": 100000,
        "priority_class": "train-high",
        "justification": "release 2026.12 blocker: regression in eval",
        "impact": {
            "computed_at": now.isoformat(),
            "preempts": [],
            "gpus_preempted": 0,
            "gpu_hours_lost": 0,
            "summary": "No running workload is preempted: it fits in free or its own quota",
        },
        "created_at": now,
        "expires_at": now + timedelta(hours=4),
    }
    fields.update(overrides)
    if fields["team"] is None and "team" not in overrides:
        fields["team"] = Team.objects.get(slug="research")
    return ApprovalRequest.objects.create(**fields)
