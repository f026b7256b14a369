"""A new grant is told to its deciders once it commits: e-mail to the global
approvers (never the requester, admins only when there is no approver) and
the approvals' webhook, here a real HTTP server on loopback."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.core import mail

from accounts.roles import APPROVERS_GROUP
from grants import lifecycle
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


def test_the_requester_is_told_of_the_approval_and_of_the_end_at_its_end(
    org: Org, carol: Any, settings: Any, hook: Hook, django_capture_on_commit_callbacks: Any
) -> None:
    settings.BERTH_APPROVAL_WEBHOOK_URL = hook.url
    alice = with_address(org.users["alice"])
    grant = request_grant(alice, ask())
    mail.outbox.clear()
    hook.received.clear()
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.approve(carol, grant.pk, comment="go")
    [told] = mail.outbox
    assert told.to == ["alice@example.com"]
    assert told.subject.startswith(f"[Berth] Quota grant #{grant.pk} approved by carol and applied")
    assert told.subject.endswith(": go")
    assert [c["body"]["berth"]["event"] for c in hook.received] == ["quota-grant-active"]

    grant.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.revert_ended(grant.ends_at)
    assert mail.outbox[-1].subject.startswith(f"[Berth] Quota grant #{grant.pk} ended (its end")
    assert mail.outbox[-1].subject.endswith("passed): reverted")
    assert hook.received[-1]["body"]["berth"]["event"] == "quota-grant-ended"


def test_the_requester_is_told_of_a_rejection_but_not_of_what_she_did_herself(
    org: Org, carol: Any, django_capture_on_commit_callbacks: Any
) -> None:
    alice = with_address(org.users["alice"])
    rejected = request_grant(alice, ask())
    withdrawn = request_grant(alice, ask())
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.reject(carol, rejected.pk, reason="no capacity this week")
        lifecycle.end(alice, withdrawn.pk, reason="not needed")
    [told] = mail.outbox
    assert told.to == ["alice@example.com"]
    assert told.subject == (
        f"[Berth] Quota grant #{rejected.pk} rejected by carol: no capacity this week"
    )
