"""The commands: login, submit, list, status, why, cancel, queues."""

import argparse
import getpass
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from berth_cli import yaml_text
from berth_cli.base import ENDED, EXIT_OK, EXIT_USAGE, CliError
from berth_cli.client import ApiError, Client
from berth_cli.config import load_config, save_config
from berth_cli.job_text import (
    approval_lines,
    dry_run_summary,
    gpu_quota,
    state_text,
    submitted_summary,
    wait_text,
    why_lines,
)
from berth_cli.output import (
    age,
    emit,
    flavors_text,
    format_time,
    human_seconds,
    parse_time,
    table,
)

# --- commands ----------------------------------------------------------------------


def connect(args: argparse.Namespace) -> Client:
    """A client for the address and token in force: the environment's, else the saved ones."""
    url = os.environ.get("BERTH_URL", "").strip()
    token = os.environ.get("BERTH_TOKEN", "").strip()
    if not (url and token):  # the file is read only when it is needed
        saved = load_config()
        url, token = url or saved.get("url", ""), token or saved.get("token", "")
    if not url:
        raise CliError("no Berth address: run `berth login --url URL`, or set BERTH_URL")
    if not token:
        raise CliError(f"no token for {url}: run `berth login`, or set BERTH_TOKEN")
    return Client(url, token)


def cmd_login(args: argparse.Namespace) -> int:
    saved = load_config()
    url = (args.url or os.environ.get("BERTH_URL", "") or saved.get("url", "")).strip()
    if not url:
        raise CliError("berth login needs --url URL (Berth's address)", code=EXIT_USAGE)
    token = (args.token or os.environ.get("BERTH_TOKEN", "")).strip()
    if not token:
        try:
            token = getpass.getpass(
                "Token (create one in the browser or with POST /api/v1/tokens/): "
            ).strip()
        except EOFError:
            token = ""
    if not token:
        raise CliError("no token given: pass --token, set BERTH_TOKEN, or paste it at the prompt")
    client = Client(url, token)
    me = client.get("me/")
    path = save_config(client.url, token)
    if args.output != "table":
        emit({"url": client.url, "config": str(path), "me": me}, args.output)
        return EXIT_OK
    teams = ", ".join(f"{t.get('team')} ({t.get('role')})" for t in me.get("teams") or [])
    roles = [
        name
        for name, flag in (
            ("platform admin", me.get("is_platform_admin")),
            ("approver", me.get("is_global_approver")),
        )
        if flag
    ]
    print(f"Logged in to {client.url} as {me.get('username')}.")
    print(f"Teams: {teams or 'none'}" + (f"; roles: {', '.join(roles)}" if roles else ""))
    print(f"Saved to {path} (readable by you only).")
    return EXIT_OK


SUBMIT_FIELDS = (
    # (argparse dest, API field)
    ("name", "name"),
    ("image", "image"),
    ("queue", "queue"),
    ("nodes", "nodes"),
    ("gpus_per_node", "gpus_per_node"),
    ("priority", "priority_class"),
    ("checkpoint", "checkpoint_uri"),
    ("kind", "kind"),
    ("team", "team"),
    ("namespace", "namespace"),
    ("cpu_per_node", "cpu_per_node"),
    ("memory_per_node", "memory_per_node"),
    ("max_runtime", "max_runtime_seconds"),
    ("expected_runtime", "expected_runtime_seconds"),
    ("retries", "retries"),
    ("min_nodes", "min_nodes"),
    ("topology_required", "topology_required"),
    ("topology_preferred", "topology_preferred"),
    ("spot_allowed", "spot_allowed"),
    ("justification", "justification"),
    ("runtime", "training_runtime"),
)


def submit_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {
        field: getattr(args, dest)
        for dest, field in SUBMIT_FIELDS
        if getattr(args, dest) is not None
    }
    if args.env:
        body["env"] = dict(args.env)
    if args.label:
        body["labels"] = dict(args.label)
    body["command"] = list(args.command)
    return body


def cmd_submit(args: argparse.Namespace) -> int:
    if not args.command:
        raise CliError(
            "give the command after `--`, e.g. berth submit ... -- python train.py",
            code=EXIT_USAGE,
        )
    client = connect(args)
    query = [("dry_run", "true")] if args.dry_run else []
    answer = client.call("POST", "jobs/", query=query, body=submit_body(args))
    if args.show_manifest:
        summary = dry_run_summary(answer) if args.dry_run else submitted_summary(answer)
        print("\n".join(f"# {line}".rstrip() for line in summary))
        print(yaml_text.dump_all(answer.get("manifest") or []).rstrip("\n"))
    elif args.output != "table":
        emit(answer, args.output)
    else:
        print("\n".join(dry_run_summary(answer) if args.dry_run else submitted_summary(answer)))
    return EXIT_OK


def find_job(client: Client, name: str, team: str | None, *, live: bool = False) -> dict[str, Any]:
    """The newest job of that name in the caller's teams (a live one first if ``live``)."""
    query = [("name", name), ("page_size", "50")]
    if team:
        query.append(("team", team))
    found = client.get("jobs/", query)
    results = found.get("results") if isinstance(found, dict) else found
    if not results:
        raise no_job(name, team)
    if live:
        running = [job for job in results if job.get("state") not in ENDED]
        namespaces = sorted({f"{job.get('team')}/{job.get('namespace')}" for job in running})
        if len(namespaces) > 1:
            raise CliError(
                f"job {name} is live in {', '.join(namespaces)}: pass --team", code=EXIT_USAGE
            )
        if running:
            return dict(running[0])
    return dict(results[0])


def no_job(name: str, team: str | None) -> CliError:
    return CliError(f"no job {name} in " + (f"team {team}" if team else "your teams"))


def cmd_list(args: argparse.Namespace) -> int:
    client = connect(args)
    query: list[tuple[str, str]] = []
    if args.team:
        query.append(("team", args.team))
    for state in args.state or []:
        query.append(("state", state))
    if args.queue:
        query.append(("queue", args.queue))
    count: int | None = None
    if args.all:
        jobs = client.get_all("jobs/", [*query, ("page_size", "500")])
    else:
        page = client.get("jobs/", query)
        jobs = list(page.get("results") or [])
        count = page.get("count")
    if args.output != "table":
        emit(jobs, args.output)
        return EXIT_OK
    if not jobs:
        print("No jobs.")
        return EXIT_OK
    now = datetime.now(UTC)
    rows = [
        (
            job.get("name"),
            job.get("team"),
            job.get("cluster_queue") or job.get("local_queue"),
            job.get("state"),
            f"{job.get('nodes')}×{job.get('gpus_per_node')}",
            wait_text(job, now),
            age(job.get("submitted_at"), now),
        )
        for job in jobs
    ]
    print(table(("NAME", "TEAM", "QUEUE", "STATE", "NODES×GPUS", "WAIT", "SUBMITTED"), rows))
    if count is not None and count > len(jobs):
        print(f"({len(jobs)} of {count} shown; --all lists every page)")
    return EXIT_OK


@contextmanager
def job_still_there(args: argparse.Namespace) -> Iterator[None]:
    """A 404 inside means the job went away between the lookup and this call:
    say so as ``find_job`` would have."""
    try:
        yield
    except ApiError as exc:
        if exc.status == 404:
            raise no_job(args.name, args.team) from None
        raise


def cmd_status(args: argparse.Namespace) -> int:
    client = connect(args)
    job_id = find_job(client, args.name, args.team)["id"]
    with job_still_there(args):
        job = client.get(f"jobs/{job_id}/")
        events = client.get(f"jobs/{job_id}/events/")
    if args.output != "table":
        emit({**job, "events": events}, args.output)
        return EXIT_OK
    now = datetime.now(UTC)
    queue_class = job.get("queue_class")
    state = state_text(job)
    queue = f"{job.get('local_queue')} → ClusterQueue {job.get('cluster_queue')}"
    if queue_class:
        queue += f" ({queue_class})"
    submitted = job.get("submitted_at")
    fields: list[tuple[str, Any]] = [
        ("Name", f"{job.get('name')} (id {job.get('id')}, {job.get('kind')})"),
        ("Team", f"{job.get('team')}, namespace {job.get('namespace')}"),
        ("State", state),
        ("Approval", "\n".join(approval_lines(job.get("approval"), client.url, now))),
        ("Queue", queue),
        ("Priority", f"{job.get('priority_class') or '(queue default)'} ({job.get('priority')})"),
        (
            "Size",
            f"{job.get('nodes')} node(s) × {job.get('gpus_per_node')} GPU(s) = {job.get('gpus')}",
        ),
        ("Workload", job.get("workload") or "-"),
        ("Flavors", flavors_text(job.get("flavors"))),
        ("Submitted", f"{format_time(submitted)} ({age(submitted, now)})"),
        ("Wait", wait_text(job, now)),
        ("Preemptions", job.get("preemptions", 0)),
        ("GPU-hours", f"{job.get('gpu_hours_used', 0)} used, {job.get('gpu_hours_lost', 0)} lost"),
    ]
    fields = [(label, value) for label, value in fields if label != "Approval" or value]
    width = max(len(label) for label, _ in fields) + 1
    for label, value in fields:
        head, *rest = str(value).split("\n")
        print(f"{(label + ':').ljust(width)}  {head}")
        for line in rest:
            print(" " * (width + 2) + line)
    print()
    print("Timeline:")
    if not events:
        print("  (no events yet)")
        return EXIT_OK
    first = parse_time(events[0].get("at"))
    rows = []
    for event in events:
        at = parse_time(event.get("at"))
        offset = f"+{human_seconds((at - first).total_seconds())}" if at and first else ""
        rows.append(
            (
                format_time(event.get("at")),
                offset,
                event.get("type"),
                event.get("reason") or "",
                event.get("message") or "",
            )
        )
    for line in table(("TIME", "", "EVENT", "REASON", "MESSAGE"), rows).splitlines():
        print("  " + line)
    return EXIT_OK


def cmd_why(args: argparse.Namespace) -> int:
    client = connect(args)
    job_id = find_job(client, args.name, args.team)["id"]
    with job_still_there(args):
        answer = client.get(f"jobs/{job_id}/explain/")
    if args.output != "table":
        emit(answer, args.output)
        return EXIT_OK
    # The approval request is on the job's detail, not in its explanation.
    with job_still_there(args):
        approval = client.get(f"jobs/{job_id}/").get("approval")
    for line in why_lines(answer, approval_lines(approval, client.url, datetime.now(UTC))):
        print(line)
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    client = connect(args)
    job_id = find_job(client, args.name, args.team, live=True)["id"]
    with job_still_there(args):
        job = client.call("DELETE", f"jobs/{job_id}/")
    if args.output != "table":
        emit(job, args.output)
        return EXIT_OK
    print(f"Cancelling {job.get('name')} in {job.get('namespace')} (state {job.get('state')}).")
    return EXIT_OK


def cmd_queues(args: argparse.Namespace) -> int:
    client = connect(args)
    query = [("page_size", "500")]
    if args.team:
        query.append(("team", args.team))
    elif args.all:
        query.append(("all", "true"))
    rows = client.get_all("jobs/queues/", query)
    if args.output != "table":
        emit(rows, args.output)
        return EXIT_OK
    if not rows:
        print("No LocalQueues" + (f" for {args.team}." if args.team else "."))
        return EXIT_OK
    print(
        table(
            ("NAMESPACE", "LOCAL QUEUE", "CLUSTER QUEUE", "CLASS", "SHARED", "GPU QUOTA"),
            [
                (
                    r.get("namespace"),
                    r.get("local_queue"),
                    r.get("cluster_queue"),
                    r.get("queue_class") or "-",
                    "yes" if r.get("shared") else "no",
                    gpu_quota(r),
                )
                for r in rows
            ],
        )
    )
    # What the table leaves out, so a missing flavor or an empty queue is explained.
    notes = []
    for r in rows:
        where = f"{r.get('namespace')}/{r.get('local_queue')}"
        if r.get("problem"):
            notes.append(f"  {where}: no job can run there: {r['problem']}")
        for flavor in r.get("unusable_flavors") or []:
            notes.append(f"  {where}: not {flavor.get('name')}: {flavor.get('reason')}")
    if notes:
        print()
        print("Not offered to jobs there:")
        print("\n".join(notes))
    return EXIT_OK
