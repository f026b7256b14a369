"""A new grant is told to its deciders once it commits: e-mail to the global
approvers (never the requester, admins only when there is no approver) and
the approvals' webhook, here a real HTTP server on loopback."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.core import mail

from accounts.roles import APPROVERS_GROUP
from grants.models import QuotaGrant
from grants.notify import notify_requested
from grants.services import request_grant
from tests.approvals.test_approval_notify import Hook, hook
from tests.grants.conftest import ask
from tests.jobs.conftest import Org

__all__ = ["hook"]


def with_address(person: Any) -> Any:
    person.email = f"{person.get_username()}@example.com"
    person.save(update_fields=["email"])
    return person


def test_the_deciders_are_told_by_mail_and_webhook_after_the_commit(
    org: Org, carol: Any, settings: Any, hook: Hook, django_capture_on_commit_callbacks: Any
) -> None:
    settings.BERTH_APPROVAL_WEBHOOK_URL = hook.url
    settings.BERTH_PUBLIC_URL = "https://berth.example.com"
    with_address(carol)
    alice = with_address(org.users["alice"])
    Group.objects.get(name=APPROVERS_GROUP).user_set.add(alice)  # asks: never told
    with django_capture_on_commit_callbacks(execute=False) as queued:
        grant = request_grant(alice, ask())
    assert mail.outbox == []  # nothing before the commit
    for callback in queued:
        callback()
    [message] = mail.outbox
    assert message.to == ["carol@example.com"]
    assert message.subject.startswith(f"[Berth] Quota grant #{grant.pk} asked by alice: +16 h100")
    assert "release candidate training" in message.body
    assert f"https://berth.example.com/grants/{grant.pk}/" in message.body
    [call] = hook.received
    assert call["body"]["berth"]["event"] == "quota-grant-requested"
    assert call["body"]["berth"]["grant_id"] == grant.pk
    assert call["body"]["text"].startswith(f"Quota grant #{grant.pk} asked by alice")


def test_admins_are_told_when_there_is_no_global_approver(org: Org) -> None:
    with_address(org.users["admin"])
    grant = request_grant(org.users["alice"], ask())
    sent = notify_requested(grant.pk)
    assert sent["emailed"] == ["root"] and mail.outbox[0].to == ["root@example.com"]
    assert QuotaGrant.objects.count() == 1
