"""What the job commands print: a dry run's and a submit's summary, a
job's state and wait, its approval, why it waits, a queue's GPU quota."""

from datetime import datetime
from typing import Any

from berth_cli.base import GPU, WAITING
from berth_cli.output import (
    age,
    flavors_text,
    format_time,
    human_seconds,
    parse_time,
    start_range,
    table,
)


def dry_run_summary(answer: dict[str, Any]) -> list[str]:
    lines = ["Dry run: checked and rendered, nothing was created."]
    queue_class = answer.get("queue_class")
    lines.append(
        f"Lands in:   {answer.get('namespace')}/{answer.get('local_queue')} → ClusterQueue "
        f"{answer.get('cluster_queue')}"
        + (f" ({queue_class})" if queue_class else "")
        + f", team {answer.get('team')}"
    )
    priority = answer.get("priority_class") or "(queue default)"
    lines.append(f"Priority:   {priority} ({answer.get('priority')})")
    if answer.get("fits_now"):
        fit = "yes" + (
            ", by preempting lower-priority work" if answer.get("needs_preemption") else ""
        )
    else:
        fit = "no, it would wait"
    lines.append(f"Fits now:   {fit}")
    lines.append(f"Flavors:    {flavors_text(answer.get('flavors'))}")
    position = answer.get("queue_position")
    ahead = answer.get("workloads_ahead")
    lines.append(
        f"Position:   {position if position is not None else '-'} in its queue"
        + (f" ({ahead} ahead)" if ahead is not None else "")
    )
    lines.append(f"Start:      {start_range(answer.get('estimated_start'))}")
    if answer.get("needs_approval"):
        lines.append(
            "Approval:   needed: once its quota is reserved, an approver decides "
            "(berth approvals show)"
        )
    if answer.get("preempts"):
        lines.append(f"Preempts:   {', '.join(answer['preempts'])}")
    explanation = answer.get("explanation") or {}
    if not answer.get("fits_now") and explanation.get("message"):
        lines.append(f"Why:        {explanation['message']}")
    kinds = [obj.get("kind") for obj in answer.get("manifest") or [] if isinstance(obj, dict)]
    if kinds:
        lines.append(f"Manifest:   {', '.join(str(k) for k in kinds)} (--show-manifest prints it)")
    return lines


def submitted_summary(job: dict[str, Any]) -> list[str]:
    lines = [
        f"Submitted {job.get('name')} (id {job.get('id')}) to {job.get('namespace')}/"
        f"{job.get('local_queue')} → ClusterQueue {job.get('cluster_queue')}; "
        f"state {job.get('state')}.",
    ]
    if job.get("state") == "rejected":  # the cluster refused it already (embedded mode)
        why = " — ".join(str(part) for part in (job.get("reason"), job.get("message")) if part)
        lines.append(f"Rejected: {why or 'no reason given'}")
        lines.append(f"`berth status {job.get('name')}` shows it again.")
        return lines
    lines.append(
        f"Follow it with `berth status {job.get('name')}`; `berth why {job.get('name')}` "
        "if it waits."
    )
    return lines


def state_text(job: dict[str, Any]) -> str:
    """``state: Reason — message``, as much of it as the job has."""
    text = str(job.get("state"))
    if job.get("reason"):
        text += f": {job['reason']}"
    if job.get("message"):
        text += f" — {job['message']}"
    return text


def wait_text(job: dict[str, Any], now: datetime) -> str:
    """Submitted to admitted; for a job still waiting, so far (with a ``+``)."""
    if job.get("wait_seconds") is not None:
        return human_seconds(float(job["wait_seconds"]))
    submitted = parse_time(job.get("submitted_at"))
    if job.get("state") in WAITING and submitted is not None:
        return human_seconds((now - submitted).total_seconds()) + "+"
    return "-"


def approval_lines(approval: Any, base_url: str, now: datetime) -> list[str]:
    """The job's latest approval request (the detail's ``approval``): where it
    stands, then where to see it. Nothing when the job has none."""
    if not isinstance(approval, dict) or not approval:
        return []
    state = str(approval.get("state") or "unknown")
    text = f"#{approval.get('id')} {state}"
    if state == "pending":
        requested = approval.get("requested_at")
        text += f", waiting since {format_time(requested)} ({age(requested, now)})"
        deadline = parse_time(approval.get("deadline"))
        if deadline is not None:
            left = (deadline - now).total_seconds()
            when = f"in {human_seconds(left)}" if left > 0 else "overdue"
            text += f"; deadline {format_time(approval['deadline'])} ({when})"
    else:
        if approval.get("decided_by"):
            text += f" by {approval['decided_by']}"
        if approval.get("decided_at"):
            text += f" at {format_time(approval['decided_at'])}"
        if approval.get("reason") and approval["reason"] != state:  # an expiry's is "expired"
            text += f": {approval['reason']}"
    url = str(approval.get("url") or "")
    if url.startswith("/"):  # a path on the Berth the CLI talks to
        url = base_url.rstrip("/") + url
    return [text, url or f"berth approvals show {approval.get('id')}"]


def why_lines(answer: dict[str, Any], approval: list[str] | None = None) -> list[str]:
    name, state = answer.get("name"), answer.get("state")
    queue = answer.get("cluster_queue")
    explanation = answer.get("explanation")
    # Where the approval request stands, right under what the job is doing.
    asked = [f"Approval: {approval[0]}", f"          {approval[1]}"] if approval else []
    if not explanation:
        line = f"{name} is {state} in ClusterQueue {queue}: it is not waiting."
        extra = " — ".join(p for p in (answer.get("reason"), answer.get("message")) if p)
        return [line] + ([extra] if extra else []) + asked
    lines = [f"{name} is {state} in ClusterQueue {queue}.", *asked]
    if explanation.get("message"):
        lines.append(str(explanation["message"]))
    if answer.get("fragmentation"):  # free GPUs, but not on enough nodes together
        lines.append(f"Fragmented: {answer['fragmentation']}.")
    position = answer.get("queue_position", explanation.get("position"))
    ahead = explanation.get("ahead", answer.get("workloads_ahead"))
    if position is not None:
        lines.append(
            f"Position {position} in its queue"
            + (f", {ahead} workload(s) ahead" if ahead is not None else "")
            + "; fits now: "
            + ("yes" if answer.get("fits_now") else "no")
        )
    lines.append(f"Estimated start: {start_range(answer.get('estimated_start'))}")
    shortfalls = explanation.get("shortfalls") or []
    if shortfalls:
        lines.append("")
        lines.append("Short:")
        rows = [
            (
                s.get("flavor"),
                s.get("resource"),
                s.get("requested"),
                s.get("available"),
                s.get("short_by"),
                "never fits" if s.get("never_fits") else "",
            )
            for s in shortfalls
        ]
        lines.extend(
            "  " + line
            for line in table(
                ("FLAVOR", "RESOURCE", "REQUESTED", "AVAILABLE", "SHORT BY", ""), rows
            ).splitlines()
        )
    suggestions = explanation.get("suggestions") or []
    if suggestions:
        lines.append("")
        lines.append("Suggestions:")
        lines.extend(f"  - {s.get('message')} [{s.get('kind')}]" for s in suggestions)
    return lines


def gpu_quota(row: dict[str, Any]) -> str:
    """The GPU quota of the flavors a job sent to this queue may land on."""
    parts = []
    for flavor in row.get("flavors") or []:
        for quota in flavor.get("quota") or []:
            if quota.get("resource") != GPU:
                continue
            text = f"{flavor.get('name')}={quota.get('nominal_quota')}"
            if quota.get("borrowing_limit") not in (None, ""):
                text += f" (+{quota['borrowing_limit']} borrowable)"
            parts.append(text)
    return ", ".join(parts) or "none"
