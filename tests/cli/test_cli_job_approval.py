"""``berth status`` and ``berth why`` show a job's approval request: where it
stands (waiting since when and until when, or who decided and why) and where
to see it, and nothing when the job has none.

The job detail's ``approval`` field (``GET /api/v1/jobs/{id}/``: null, or
``{id, state, requested_at, deadline, decided_by, decided_at, reason, url}``)
is Berth's own: the last test uses it with a real approval request. To show
every state (and an older API without the field), the others run the CLI
against a pass-through server in front of the real Berth (pytest-django's live
server) that sets the field, in that shape, on the real detail; every other
answer is Berth's own."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from accounts.services import create_token
from jobs.models import JobRequest
from tests.cli.test_cli import Berth
from tests.jobs.conftest import Org, job


class WithApproval:
    """Forwards every request to Berth; sets (or drops) ``approval`` on job details."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.approval: Any = None  # what the next job detail carries
        self.add = True  # False: no such field, as before the API had it
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                request = urllib.request.Request(
                    outer.upstream + self.path,
                    headers={"Authorization": self.headers.get("Authorization", "")},
                )
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        status, body = answer.status, answer.read()
                except urllib.error.HTTPError as refused:
                    status, body = refused.code, refused.read()
                path = self.path.split("?")[0].rstrip("/").split("/")
                if status == 200 and path[-2:-1] == ["jobs"] and path[-1].isdigit():
                    detail = json.loads(body)
                    detail.pop("approval", None)
                    if outer.add:
                        detail["approval"] = outer.approval
                    body = json.dumps(detail).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def proxy(live_server: Any) -> Iterator[WithApproval]:
    server = WithApproval(live_server.url)
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def alice(
    transactional_db: Any,
    org: Org,
    proxy: WithApproval,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Berth:
    monkeypatch.setenv("BERTH_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("BERTH_URL", proxy.url)
    monkeypatch.setenv("BERTH_TOKEN", create_token(user=org.users["alice"], name="cli").secret)
    response = org.alice.post(
        "/api/v1/jobs/",
        job(name="release-fix", queue="urgent-release", nodes=1, justification="blocker"),
        format="json",
    )
    assert response.status_code == 201, response.content
    return Berth(capsys)


def label_lines(out: str, label: str) -> list[str]:
    """A status field's line and its continuation lines."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(label + ":"))
    width = lines[start].index(lines[start].split(":", 1)[1].strip())
    taken = [lines[start][width:]]
    for line in lines[start + 1 :]:
        if not line.startswith(" " * width) or not line.strip():
            break
        taken.append(line[width:])
    return taken


def test_a_pending_request_shows_since_when_until_when_and_where(
    alice: Berth, proxy: WithApproval
) -> None:
    now = timezone.now()
    proxy.approval = {
        "id": 12,
        "state": "pending",
        "requested_at": (now - timedelta(hours=2)).isoformat(),
        "deadline": (now + timedelta(hours=3, minutes=48, seconds=30)).isoformat(),
        "decided_by": None,
        "decided_at": None,
        "reason": "",
        "url": "/approvals/12/",
    }
    code, out, err = alice("status", "release-fix")
    assert code == 0, err
    since = (now - timedelta(hours=2)).strftime("%Y-%m-%d %H:%M:%SZ")
    until = (now + timedelta(hours=3, minutes=48, seconds=30)).strftime("%Y-%m-%d %H:%M:%SZ")
    assert label_lines(out, "Approval") == [
        f"#12 pending, waiting since {since} (2h ago); deadline {until} (in 3h48m)",
        f"{proxy.url}/approvals/12/",  # the API's path, on the Berth the CLI talks to
    ]
    lines = out.splitlines()
    assert lines.index(next(x for x in lines if x.startswith("Approval:"))) == 3  # under State

    code, out, err = alice("why", "release-fix")
    assert code == 0, err
    first, second, third, *_ = out.splitlines()
    assert first.startswith("release-fix is ")
    assert (
        second
        == f"Approval: #12 pending, waiting since {since} (2h ago); deadline {until} (in 3h48m)"
    )
    assert third == f"          {proxy.url}/approvals/12/"


def test_a_decided_request_shows_who_and_why(alice: Berth, proxy: WithApproval) -> None:
    proxy.approval = {
        "id": 13,
        "state": "rejected",
        "requested_at": "2026-12-01T09:00:04Z",
        "deadline": "2026-12-01T13:00:04Z",
        "decided_by": "carol",
        "decided_at": "2026-12-01T09:14:03+00:00",
        "reason": "not a release blocker: use training-large",
        "url": "https://berth.example.com/approvals/13/",
    }
    JobRequest.objects.update(state="rejected", reason="ApprovalRejected")
    code, out, err = alice("status", "release-fix")
    assert code == 0, err
    assert label_lines(out, "Approval") == [
        "#13 rejected by carol at 2026-12-01 09:14:03Z: not a release blocker: use training-large",
        "https://berth.example.com/approvals/13/",
    ]
    code, out, err = alice("why", "release-fix")
    assert code == 0, err
    assert out.splitlines()[-2:] == [
        "Approval: #13 rejected by carol at 2026-12-01 09:14:03Z: not a release blocker: "
        "use training-large",
        "          https://berth.example.com/approvals/13/",
    ]
    # Expired: nobody decided; no URL given: the CLI command that shows it.
    proxy.approval = {**proxy.approval, "state": "expired", "decided_by": None, "url": None,
                      "decided_at": "2026-12-01T13:00:04Z", "reason": "expired"}  # fmt: skip
    code, out, _ = alice("status", "release-fix")
    assert label_lines(out, "Approval") == [
        "#13 expired at 2026-12-01 13:00:04Z",
        "berth approvals show 13",
    ]


@pytest.mark.parametrize("add", [True, False], ids=["null", "absent"])
def test_no_request_shows_nothing(alice: Berth, proxy: WithApproval, add: bool) -> None:
    proxy.approval, proxy.add = None, add
    for command in ("status", "why"):
        code, out, err = alice(command, "release-fix")
        assert code == 0, err
        assert "Approval" not in out and "approvals/" not in out
    code, out, _ = alice("status", "release-fix", "-o", "json")
    assert ("approval" in json.loads(out)) is add  # -o json is the API's answer, as it is


def test_against_the_real_approval_field(
    alice: Berth, org: Org, live_server: Any, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """No pass-through: Berth's own detail, with a real approval request."""
    from approvals.models import ApprovalState
    from tests.approvals.approval_support import approval_request

    monkeypatch.setenv("BERTH_URL", live_server.url)
    stored = JobRequest.objects.get()
    code, out, _ = alice("status", "release-fix")
    assert code == 0 and "Approval" not in out  # none yet: null
    now = timezone.now()
    request = approval_request(
        org.users["alice"], job=stored, workload_name="job-release-fix",
        created_at=now - timedelta(hours=1), expires_at=now + timedelta(hours=2, seconds=30),
    )  # fmt: skip
    code, out, err = alice("status", "release-fix")
    assert code == 0, err
    assert label_lines(out, "Approval") == [
        f"#{request.pk} pending, waiting since {(now - timedelta(hours=1)):%Y-%m-%d %H:%M:%SZ} "
        f"(1h ago); deadline {(now + timedelta(hours=2, seconds=30)):%Y-%m-%d %H:%M:%SZ} (in 2h)",
        f"{settings.BERTH_PUBLIC_URL}/approvals/{request.pk}/",
    ]
    request.state, request.decided_at = ApprovalState.REJECTED, now
    request.decided_by, request.comment = org.users["admin"], "not a release blocker"
    request.save()
    code, out, err = alice("why", "release-fix")
    assert code == 0, err
    assert (
        f"Approval: #{request.pk} rejected by root at {now:%Y-%m-%d %H:%M:%SZ}: "
        "not a release blocker"
    ) in out.splitlines()
