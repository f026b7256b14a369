"""The rules a job request must meet before anything is rendered: its own
(names, image, shape, gangs) and its queue class's (spot, checkpoint, max
runtime, retries, justification, gang)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from berth_cli import durations
from jobs import validation as rules
from jobs.flavor_offer import spot_usable
from jobs.manifest_spec import JOB_KINDS
from queues.errors import FieldError
from queues.models import (
    ClusterQueue,
    QueueClass,
)


def own_rules(data: Mapping[str, Any]) -> list[FieldError]:
    errors = [
        *rules.name_errors(data.get("name")),
        *rules.image_errors(data.get("image")),
        *rules.command_errors(data.get("command")),
        *rules.env_errors(data.get("env") or {}, kind=data.get("kind") or "Job"),
        *rules.label_errors(data.get("labels") or {}),
        *rules.checkpoint_errors(data.get("checkpoint_uri") or ""),
        *rules.shape_errors(
            int(data.get("nodes", 1)),
            int(data.get("gpus_per_node", 0)),
            data.get("kind", "Job"),
            JOB_KINDS,
        ),
        *rules.gang_errors(
            int(data.get("nodes", 1)),
            data.get("kind") or "Job",
            data.get("min_nodes"),
            data.get("topology_required") or "",
            data.get("topology_preferred") or "",
        ),
    ]
    return errors


def class_rules(
    data: Mapping[str, Any], queue: ClusterQueue, queue_class: QueueClass | None
) -> tuple[list[FieldError], bool, int | None, int | None]:
    """Errors, spot allowed, max runtime and checkpoint interval under the queue class."""
    errors: list[FieldError] = []
    class_name = queue_class.name if queue_class else "(none)"
    spot_requested = data.get("spot_allowed")
    if spot_requested and not spot_usable(queue_class):
        errors.append(
            FieldError(
                "spot_allowed",
                "spot-not-allowed",
                f"queue class {class_name} does not run jobs on spot capacity",
            )
        )
    spot = spot_usable(queue_class, spot_requested)
    checkpoint = data.get("checkpoint_uri") or ""
    if not checkpoint and queue_class and queue_class.requires_checkpoint:
        errors.append(
            FieldError(
                "checkpoint_uri",
                "checkpoint-required",
                f"queue class {class_name} may preempt or reclaim its jobs at any time: "
                "give a checkpoint URI (e.g. s3://bucket/run) so work resumes",
            )
        )
    elif not checkpoint and spot:
        errors.append(
            FieldError(
                "checkpoint_uri",
                "checkpoint-required",
                "a job that may run on spot capacity needs a checkpoint URI; "
                "give one, or set spot_allowed to false",
            )
        )
    errors.extend(_gang_errors(data, queue_class))
    runtime = data.get("max_runtime_seconds")
    limit = queue_class.max_runtime_seconds if queue_class else None
    if runtime is not None and limit is not None and runtime > limit:
        errors.append(
            FieldError(
                "max_runtime_seconds",
                "max-runtime-above-limit",
                f"{durations.format_duration(runtime)} ({runtime} s) is more than queue class "
                f"{class_name} allows ({durations.format_duration(limit)})",
            )
        )
    retries = int(data.get("retries") or 0)
    retry_limit = queue_class.max_retries if queue_class else None
    if retry_limit is not None and retries > retry_limit:
        errors.append(
            FieldError(
                "retries",
                "retries-above-limit",
                f"{retries} retries is more than queue class {class_name} allows ({retry_limit})",
            )
        )
    if (
        queue_class
        and queue_class.requires_approval
        and not (data.get("justification") or "").strip()
    ):
        errors.append(
            FieldError(
                "justification",
                "justification-required",
                f"queue class {class_name} needs an approver's yes: say why this job is urgent",
            )
        )
    interval = data.get("checkpoint_interval_seconds")
    if checkpoint and interval is None:
        interval = int(settings.BERTH_CHECKPOINT_INTERVAL)
    return errors, spot, runtime if runtime is not None else limit, interval if checkpoint else None


def _gang_errors(data: Mapping[str, Any], queue_class: QueueClass | None) -> list[FieldError]:
    """A class that starts all of a job's nodes together admits no part of one."""
    if data.get("min_nodes") is None or not (queue_class and queue_class.gang_required):
        return []
    return [
        FieldError(
            "min_nodes",
            "gang-required",
            f"queue class {queue_class.name} starts all of a job's nodes together (a gang): "
            "leave min_nodes out, or use a queue class that admits part of a job",
        )
    ]
