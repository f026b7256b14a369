"""``berth grants``: ask for extra quota until a moment, list, show, approve,
reject and end quota grants, through ``/api/v1/quota-grants/``."""

import argparse
from datetime import UTC, datetime
from typing import Any

from berth_cli.base import EXIT_OK, EXIT_USAGE, CliError
from berth_cli.client import ApiError, Client
from berth_cli.commands import connect
from berth_cli.output import emit, format_time, human_seconds, parse_time, table

STATES = ("pending", "active", "rejected", "ended", "expired")
OPEN = ("pending", "active")
KINDS = ("nominal", "borrowing", "loan")


def grant_id(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a grant id (a number, e.g. 12)")
    return int(text)


def add_grants_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """``berth grants COMMAND``, under the top-level ``commands``."""
    grants = commands.add_parser(
        "grants",
        parents=[common],
        help="expiring quota grants: request, list, show, approve, reject, end",
        description="Extra quota for a team's ClusterQueue until a moment, decided once "
        "by an approver and reverted at its end.",
    )
    sub = grants.add_subparsers(dest="grants_command", metavar="COMMAND", parser_class=type(grants))
    sub.required = True

    request = sub.add_parser("request", parents=[common], help="ask for extra quota")
    request.add_argument("--queue", required=True, help="your team's ClusterQueue")
    request.add_argument("--flavor", required=True, help="ResourceFlavor, e.g. h100-ondemand")
    request.add_argument("--amount", required=True, help="how much more, e.g. 16 (GPUs)")
    request.add_argument(
        "--resource", default="nvidia.com/gpu", help="resource (default nvidia.com/gpu)"
    )
    request.add_argument(
        "--kind",
        choices=KINDS,
        default="nominal",
        help="nominal quota (default), borrowing limit, or a loan from --lender",
    )
    request.add_argument("--lender", help="for --kind loan: the ClusterQueue that lends")
    request.add_argument(
        "--until", required=True, help="when it ends, ISO 8601 (e.g. 2026-12-04T18:00:00Z)"
    )
    request.add_argument("--justification", required=True, help="why (approvers read it)")
    request.set_defaults(func=cmd_grants_request)

    listing = sub.add_parser(
        "list", parents=[common], help="open grants (pending or active); --all for every one"
    )
    listing.add_argument("--all", action="store_true", help="ended and rejected ones too")
    listing.add_argument("--state", choices=STATES, help="only grants in this state")
    listing.add_argument("--queue", help="ClusterQueue")
    listing.add_argument("--team", help="team")
    listing.set_defaults(func=cmd_grants_list)

    show = sub.add_parser("show", parents=[common], help="a grant, its impact and what it did")
    show.add_argument("id", type=grant_id, metavar="ID")
    show.set_defaults(func=cmd_grants_show)

    approve = sub.add_parser("approve", parents=[common], help="approve and apply a grant")
    approve.add_argument("id", type=grant_id, metavar="ID")
    approve.add_argument("--comment", default="", help="a note for the requester (optional)")
    approve.add_argument(
        "--acknowledge-preemption",
        action="store_true",
        help="go ahead although the impact names workloads that would be preempted",
    )
    approve.set_defaults(func=cmd_grants_approve)

    reject = sub.add_parser("reject", parents=[common], help="reject a pending grant")
    reject.add_argument("id", type=grant_id, metavar="ID")
    reject.add_argument("--reason", required=True, help="why not (the requester sees it)")
    reject.set_defaults(func=cmd_grants_reject)

    end = sub.add_parser("end", parents=[common], help="end a grant early (reverts it)")
    end.add_argument("id", type=grant_id, metavar="ID")
    end.add_argument("--reason", default="", help="why (optional)")
    end.set_defaults(func=cmd_grants_end)


def ends_text(grant: dict[str, Any], now: datetime) -> str:
    ends = parse_time(grant.get("ends_at"))
    if ends is None:
        return "-"
    left = (ends - now).total_seconds()
    if grant.get("state") not in OPEN:
        return format_time(grant.get("ended_at") or grant.get("ends_at"))
    return f"in {human_seconds(left)}" if left > 0 else "due now"


def _call(client: Client, method: str, grant: int, path: str = "", body: Any = None) -> Any:
    try:
        return client.call(method, f"quota-grants/{grant}/{path}", body=body)
    except ApiError as exc:
        if exc.status == 404:
            raise CliError(f"no quota grant #{grant} that you can see") from None
        if exc.status == 403 and isinstance(exc.body, dict) and exc.body.get("rule"):
            raise CliError(f"not allowed: {exc.detail} ({exc.body['rule']})") from None
        raise


def cmd_grants_request(args: argparse.Namespace) -> int:
    body = {
        "cluster_queue": args.queue,
        "flavor": args.flavor,
        "resource": args.resource,
        "amount": args.amount,
        "kind": args.kind,
        "ends_at": args.until,
        "justification": args.justification,
    }
    if args.lender:
        body["lender"] = args.lender
    grant = connect(args).call("POST", "quota-grants/", body=body)
    if args.output != "table":
        emit(grant, args.output)
        return EXIT_OK
    print(f"Asked for grant #{grant.get('id')}: {grant.get('summary')}.")
    impact = grant.get("impact") or {}
    print(f"Impact: {impact.get('summary') or '-'}")
    if grant.get("whatif_run"):
        print(f"What-if of the others' waits: run #{grant['whatif_run']}.")
    print("An approver decides it; `berth grants show ID` follows it.")
    return EXIT_OK


def cmd_grants_list(args: argparse.Namespace) -> int:
    query: list[tuple[str, str]] = [("page_size", "500")]
    if args.state:
        query.append(("state", args.state))
    if args.queue:
        query.append(("cluster_queue", args.queue))
    if args.team:
        query.append(("team", args.team))
    grants = connect(args).get_all("quota-grants/", query)
    if not args.all and not args.state:
        grants = [g for g in grants if g.get("state") in OPEN]
    if args.output != "table":
        emit(grants, args.output)
        return EXIT_OK
    if not grants:
        print("No quota grants." if args.all or args.state else "No open quota grants.")
        return EXIT_OK
    now = datetime.now(UTC)
    rows = [
        (
            g.get("id"),
            g.get("state"),
            g.get("cluster_queue"),
            g.get("team") or "-",
            f"+{g.get('amount')} {g.get('flavor')}",
            str(g.get("kind")) + (f" from {g['lender']}" if g.get("lender") else ""),
            g.get("requester") or "-",
            ends_text(g, now),
        )
        for g in grants
    ]
    print(table(("ID", "STATE", "QUEUE", "TEAM", "AMOUNT", "KIND", "REQUESTER", "ENDS"), rows))
    return EXIT_OK


def _wait(seconds: Any) -> str:
    return "-" if seconds is None else human_seconds(float(seconds))


def show_lines(grant: dict[str, Any], now: datetime) -> list[str]:
    impact = grant.get("impact") or {}
    state = str(grant.get("state"))
    if state == "pending":
        state += ": " + ("you can decide it" if grant.get("can_decide") else "not by you")
    elif grant.get("decided_by"):
        state += f" (decided by {grant['decided_by']} at {format_time(grant.get('decided_at'))})"
    fields = [
        ("Grant", f"#{grant.get('id')}: {grant.get('summary')}"),
        ("State", state),
        ("Team", grant.get("team") or "-"),
        ("Requester", grant.get("requester") or "-"),
        ("Justification", grant.get("justification")),
        ("Ends", f"{format_time(grant.get('ends_at'))} ({ends_text(grant, now)})"),
        ("Impact", impact.get("summary") or "-"),
        ("What-if", f"run #{grant['whatif_run']}" if grant.get("whatif_run") else "-"),
    ]
    if grant.get("comment"):
        fields.append(("Comment", grant["comment"]))
    if grant.get("end_reason"):
        fields.append(("Ended", f"{format_time(grant.get('ended_at'))}: {grant['end_reason']}"))
    width = max(len(label) for label, _ in fields) + 1
    lines = [f"{(label + ':').ljust(width)}  {value}" for label, value in fields]
    shrinks = impact.get("shrinks") or []
    if shrinks:
        lines += ["", "Lendable capacity:"]
        rows = [
            (
                s.get("cluster_queue"),
                s.get("team") or "-",
                f"{s.get('nominal')} → {s.get('nominal_after')}",
                s.get("in_use"),
                f"{s.get('lendable')} → {s.get('lendable_after')}",
            )
            for s in shrinks
        ]
        table_text = table(("QUEUE", "TEAM", "NOMINAL", "IN USE", "LENDABLE"), rows)
        lines += ["  " + line for line in table_text.splitlines()]
    whatif = grant.get("whatif") or {}
    if whatif.get("queues"):
        lines += ["", f"Waits with the grant (what-if run #{whatif.get('run')}, the last 24 h):"]
        wait_rows = [
            (
                q.get("cluster_queue") + (" (granted)" if q.get("granted") else ""),
                f"{_wait(q.get('p95_wait_today'))} → {_wait(q.get('p95_wait_with_grant'))}",
                f"{_wait(q.get('avg_wait_today'))} → {_wait(q.get('avg_wait_with_grant'))}",
            )
            for q in whatif["queues"]
        ]
        table_text = table(("QUEUE", "P95 WAIT", "AVERAGE WAIT"), wait_rows)
        lines += ["  " + line for line in table_text.splitlines()]
    elif whatif:
        lines += ["", f"What-if run #{whatif.get('run')}: {whatif.get('state')}"]
    victims = impact.get("preempts") or []
    if victims:
        lines += ["", "Would be preempted:"]
        victim_rows = [
            (v.get("workload"), v.get("team") or "-", v.get("priority"), v.get("amount"))
            for v in victims
        ]
        table_text = table(("WORKLOAD", "TEAM", "PRIORITY", "AMOUNT"), victim_rows)
        lines += ["  " + line for line in table_text.splitlines()]
    return lines


def cmd_grants_show(args: argparse.Namespace) -> int:
    grant = _call(connect(args), "GET", args.id)
    if args.output != "table":
        emit(grant, args.output)
        return EXIT_OK
    for line in show_lines(grant, datetime.now(UTC)):
        print(line)
    return EXIT_OK


def _done(args: argparse.Namespace, grant: dict[str, Any], said: str) -> int:
    if args.output != "table":
        emit(grant, args.output)
        return EXIT_OK
    print(f"{said} #{grant.get('id')}: {grant.get('summary')}.")
    return EXIT_OK


def cmd_grants_approve(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"acknowledge_preemption": bool(args.acknowledge_preemption)}
    if args.comment:
        body["comment"] = args.comment
    grant = _call(connect(args), "POST", args.id, "approve/", body)
    return _done(args, grant, "Approved and applied")


def cmd_grants_reject(args: argparse.Namespace) -> int:
    reason = (args.reason or "").strip()
    if not reason:
        raise CliError("--reason must say why (the requester sees it)", code=EXIT_USAGE)
    grant = _call(connect(args), "POST", args.id, "reject/", {"reason": reason})
    return _done(args, grant, "Rejected")


def cmd_grants_end(args: argparse.Namespace) -> int:
    body = {"reason": args.reason} if args.reason else {}
    grant = _call(connect(args), "POST", args.id, "end/", body)
    return _done(args, grant, "Ended and reverted" if grant.get("applied") else "Ended")
