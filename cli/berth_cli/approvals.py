"""``berth approvals``: list, show, approve and reject approval requests (the
``urgent-release`` queue class), through ``/api/v1/approvals/``."""

import argparse
from datetime import UTC, datetime
from typing import Any

from berth_cli.base import EXIT_OK, EXIT_USAGE, CliError
from berth_cli.client import ApiError, Client
from berth_cli.commands import connect
from berth_cli.output import age, emit, format_time, human_seconds, parse_time, table

STATES = ("pending", "approved", "rejected", "expired", "withdrawn")


def approval_id(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an approval id (a number, e.g. 12)")
    return int(text)


def add_approvals_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """``berth approvals COMMAND``, under the top-level ``commands``."""
    approvals = commands.add_parser(
        "approvals",
        parents=[common],
        help="approval requests (urgent-release): list, show, approve, reject",
        description="Approval requests for queues that need one (urgent-release).",
    )
    sub = approvals.add_subparsers(
        dest="approvals_command", metavar="COMMAND", parser_class=type(approvals)
    )
    sub.required = True

    listing = sub.add_parser(
        "list",
        parents=[common],
        help="the pending requests you can decide (--all: every one you can see)",
    )
    listing.add_argument(
        "--all", action="store_true", help="every request you can see, decided ones too"
    )
    listing.add_argument("--state", choices=STATES, help="only requests in this state")
    listing.add_argument("--queue", help="ClusterQueue")
    listing.add_argument("--team", help="the job's team")
    listing.set_defaults(func=cmd_approvals_list)

    show = sub.add_parser("show", parents=[common], help="a request, its impact and history")
    show.add_argument("id", type=approval_id, metavar="ID")
    show.set_defaults(func=cmd_approvals_show)

    approve = sub.add_parser("approve", parents=[common], help="approve a pending request")
    approve.add_argument("id", type=approval_id, metavar="ID")
    approve.add_argument("--comment", default="", help="a note for the requester (optional)")
    approve.set_defaults(func=cmd_approvals_approve)

    reject = sub.add_parser("reject", parents=[common], help="reject a pending request")
    reject.add_argument("id", type=approval_id, metavar="ID")
    reject.add_argument(
        "--reason", required=True, help="why it may not run (shown to the requester)"
    )
    reject.set_defaults(func=cmd_approvals_reject)


# --- formats -----------------------------------------------------------------------


def impact_text(impact: Any) -> str:
    """GPU-hours lost, how many running workloads approving preempts, and how
    many waiting ones (quota reserved, not running) lose their reservation."""
    if not isinstance(impact, dict) or not impact:
        return "-"
    victims = impact.get("preempts") or []
    waiting = sum(1 for v in victims if isinstance(v, dict) and v.get("state") == "reserved")
    text = f"{impact.get('gpu_hours_lost', 0)} GPU-h, {len(victims) - waiting} preempted"
    return text + (f", {waiting} lose a reservation" if waiting else "")


def expires_text(request: dict[str, Any], now: datetime) -> str:
    if request.get("state") != "pending":
        return "-"
    expires = parse_time(request.get("expires_at"))
    if expires is None:
        return "-"
    left = (expires - now).total_seconds()
    return f"in {human_seconds(left)}" if left > 0 else "overdue"


def decision_text(request: dict[str, Any]) -> str:
    state = str(request.get("state"))
    if state == "pending":
        return "pending: " + ("you can decide it" if request.get("can_decide") else "not by you")
    text = state
    if request.get("decided_by"):
        text += f" by {request['decided_by']}"
    if request.get("decided_at"):
        text += f" at {format_time(request['decided_at'])}"
    if request.get("comment"):
        text += f": {request['comment']}"
    return text


# --- commands ----------------------------------------------------------------------


def cmd_approvals_list(args: argparse.Namespace) -> int:
    client = connect(args)
    # Without --all or --state: what waits for you. A state asks about everything
    # you can see (a decided request is nobody's to decide any more).
    waiting_for_me = not args.all and not args.state
    query: list[tuple[str, str]] = [("page_size", "500")]
    if waiting_for_me:
        query.append(("decidable", "true"))
    if args.state:
        query.append(("state", args.state))
    if args.queue:
        query.append(("cluster_queue", args.queue))
    if args.team:
        query.append(("team", args.team))
    requests = client.get_all("approvals/", query)
    if args.output != "table":
        emit(requests, args.output)
        return EXIT_OK
    if not requests:
        print("No approval requests wait for you." if waiting_for_me else "No approval requests.")
        return EXIT_OK
    now = datetime.now(UTC)
    rows = [
        (
            r.get("id"),
            r.get("state"),
            r.get("workload"),
            r.get("cluster_queue"),
            r.get("team") or "-",
            r.get("requester") or "-",
            r.get("gpus"),
            impact_text(r.get("impact")),
            expires_text(r, now),
        )
        for r in requests
    ]
    print(
        table(
            (
                "ID",
                "STATE",
                "WORKLOAD",
                "QUEUE",
                "TEAM",
                "REQUESTER",
                "GPUS",
                "IMPACT",
                "EXPIRES",
            ),
            rows,
        )
    )
    return EXIT_OK


def _not_found(approval: int) -> CliError:
    return CliError(f"no approval request #{approval} that you can see")


def _call(client: Client, method: str, approval: int, path: str = "", body: Any = None) -> Any:
    try:
        return client.call(method, f"approvals/{approval}/{path}", body=body)
    except ApiError as exc:
        if exc.status == 404:
            raise _not_found(approval) from None
        if exc.status == 403 and isinstance(exc.body, dict) and exc.body.get("rule"):
            raise CliError(f"not allowed: {exc.detail} ({exc.body['rule']})") from None
        raise


def cmd_approvals_show(args: argparse.Namespace) -> int:
    request = _call(connect(args), "GET", args.id)
    if args.output != "table":
        emit(request, args.output)
        return EXIT_OK
    for line in show_lines(request, datetime.now(UTC)):
        print(line)
    return EXIT_OK


def show_lines(request: dict[str, Any], now: datetime) -> list[str]:
    impact = request.get("impact") or {}
    queue = f"{request.get('local_queue') or '-'} → ClusterQueue {request.get('cluster_queue')}"
    created = request.get("created_at")
    expires = format_time(request.get("expires_at"))
    if request.get("state") == "pending":
        expires += f" ({expires_text(request, now)})"
    fields = [
        ("Approval", f"#{request.get('id')} (attempt {request.get('attempt')})"),
        ("State", decision_text(request)),
        ("Workload", request.get("workload")),
        ("Queue", queue),
        ("Team", request.get("team") or "-"),
        ("Requester", request.get("requester") or "-"),
        ("Job", request.get("job") if request.get("job") is not None else "-"),
        ("GPUs", request.get("gpus")),
        ("Priority", f"{request.get('priority_class') or '-'} ({request.get('priority')})"),
        ("Justification", request.get("justification") or "(none given)"),
        ("Impact", impact.get("summary") or impact_text(impact)),
        ("Requested", f"{format_time(created)} ({age(created, now)})"),
        ("Expires", expires),
    ]
    if request.get("reapproval_of"):
        fields.append(("Re-approves", f"#{request['reapproval_of']}"))
    if request.get("state") != "pending":
        applied = request.get("applied_at")
        fields.append(("On the Workload", format_time(applied) if applied else "not yet"))
    width = max(len(label) for label, _ in fields) + 1
    lines = [f"{(label + ':').ljust(width)}  {value}" for label, value in fields]
    victims = impact.get("preempts") or []
    if victims:
        lines += ["", "Preempts:"]
        rows = [
            (
                v.get("workload"),
                v.get("team") or "-",
                v.get("priority"),
                v.get("gpus"),
                v.get("gpu_hours_lost"),
                v.get("status"),
                v.get("state") or "running",
            )
            for v in victims
        ]
        lines += [
            "  " + line
            for line in table(
                ("WORKLOAD", "TEAM", "PRIORITY", "GPUS", "GPU-H LOST", "STATUS", "NOW"), rows
            ).splitlines()
        ]
    events = request.get("events") or []
    lines += ["", "History:"]
    if not events:
        lines.append("  (no events)")
    else:
        history = [
            (format_time(e.get("at")), e.get("action"), e.get("actor") or "-", e.get("message"))
            for e in events
        ]
        lines += [
            "  " + line for line in table(("TIME", "ACTION", "BY", "MESSAGE"), history).splitlines()
        ]
    return lines


def _decided(args: argparse.Namespace, request: dict[str, Any]) -> int:
    if args.output != "table":
        emit(request, args.output)
        return EXIT_OK
    verb = "Approved" if request.get("state") == "approved" else "Rejected"
    check = "Ready" if verb == "Approved" else "Rejected"
    print(
        f"{verb} #{request.get('id')}: {request.get('workload')} ({request.get('gpus')} GPUs "
        f"in ClusterQueue {request.get('cluster_queue')}, requested by "
        f"{request.get('requester') or 'nobody known'})."
    )
    print(f"Berth marks its admission check {check} on the Workload.")
    return EXIT_OK


def cmd_approvals_approve(args: argparse.Namespace) -> int:
    body = {"comment": args.comment} if args.comment else {}
    return _decided(args, _call(connect(args), "POST", args.id, "approve/", body))


def cmd_approvals_reject(args: argparse.Namespace) -> int:
    reason = (args.reason or "").strip()
    if not reason:
        # Refused here, before anything is sent; the API refuses it too.
        raise CliError(
            "--reason must say why it may not run (the requester sees it)", code=EXIT_USAGE
        )
    return _decided(args, _call(connect(args), "POST", args.id, "reject/", {"reason": reason}))
