"""Notifying approvers: e-mail to each approver with an address, and the
Slack-compatible webhook, here a real HTTP server on loopback. A webhook that
fails is audited and does not stop the request."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core import mail
from django.db import connection

from approvals.controller import PASS_LOCK, drive_approvals
from approvals.models import ApprovalAction
from approvals.notify import notify_approvers
from queues.backends.simulated import SimulatedBackend
from queues.locks import try_lock
from tests.approvals.approval_support import approval_request, approvers
from tests.jobs.conftest import Org


class Hook:
    def __init__(self, status: int) -> None:
        self.status = status
        self.received: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                hook.received.append(
                    {
                        "content_type": self.headers.get("Content-Type"),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                self.send_response(hook.status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T/B/X"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook(200)
    yield server
    server.close()


def test_approvers_get_mail_and_the_webhook_a_slack_payload(
    org: Org, settings: Any, hook: Hook
) -> None:
    settings.BERTH_APPROVAL_WEBHOOK_URL = hook.url
    settings.BERTH_PUBLIC_URL = "https://berth.example.com"
    approvers()
    request = approval_request(org.users["alice"])
    sent = notify_approvers(request)
    assert sent["approvers"] == ["carol", "erin"] and sent["webhook"] == 200
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert sorted(message.to) == ["carol@example.com", "erin@example.com"]
    assert f"Approval #{request.pk}" in message.subject
    assert "release 2026.12 blocker" in message.body
    assert f"https://berth.example.com/approvals/{request.pk}/" in message.body

    assert len(hook.received) == 1
    call = hook.received[0]
    assert call["content_type"] == "application/json"
    payload = call["body"]
    assert payload["text"].startswith(f"Approval #{request.pk}: alice (research)")
    assert [b["type"] for b in payload["blocks"]] == ["section", "section", "context"]
    assert payload["berth"]["approval_id"] == request.pk
    assert payload["berth"]["workload"] == "research/job-release-fix"
    assert payload["berth"]["url"] == f"https://berth.example.com/approvals/{request.pk}/"
    actions = list(request.events.values_list("action", flat=True))
    assert actions == [ApprovalAction.NOTIFIED]


def test_a_failing_webhook_is_audited_and_mail_still_goes(org: Org, settings: Any) -> None:
    broken = Hook(500)
    try:
        settings.BERTH_APPROVAL_WEBHOOK_URL = broken.url
        approvers()
        request = approval_request(org.users["alice"])
        sent = notify_approvers(request)
    finally:
        broken.close()
    assert "webhook" not in sent and len(mail.outbox) == 1
    failed = request.events.get(action=ApprovalAction.NOTIFY_FAILED)
    assert "webhook" in failed.message and "500" in failed.message


def test_nobody_but_admins_to_ask_when_a_team_has_no_approvers(org: Org) -> None:
    request = approval_request(org.users["alice"])
    admin = org.users["admin"]
    admin.email = "root@example.com"
    admin.save(update_fields=["email"])
    sent = notify_approvers(request)
    assert sent["approvers"] == ["root"] and sent["email"] == ["root@example.com"]


def test_a_request_nobody_was_told_of_is_notified_by_the_next_pass_once(org: Org) -> None:
    """A pass that crashed after raising the request, before telling anyone."""
    approvers()
    request = approval_request(org.users["alice"])
    assert request.notified_at is None
    backend = SimulatedBackend()
    assert drive_approvals(backend)["notified"] == 1
    assert drive_approvals(backend)["notified"] == 0
    assert len(mail.outbox) == 1
    request.refresh_from_db()
    assert request.notified_at is not None


def test_passes_do_not_overlap(org: Org) -> None:
    held, release = threading.Event(), threading.Event()

    def other_pass() -> None:
        try:
            with try_lock(PASS_LOCK) as taken:
                assert taken
                held.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    thread = threading.Thread(target=other_pass)
    thread.start()
    try:
        assert held.wait(timeout=30)
        assert drive_approvals(SimulatedBackend()) == {"skipped": 1}
    finally:
        release.set()
        thread.join(timeout=30)
    assert "skipped" not in drive_approvals(SimulatedBackend())
