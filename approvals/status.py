"""The exact shapes Berth writes as an AdmissionCheck controller (pure: no
Django, no kubernetes client), so they can be checked against Kueue's CRDs.

A Workload's ``status.admissionChecks`` is a list-map keyed by ``name`` (at most
8 entries); Berth owns only its own entry, written by server-side apply through
the status subresource. Each entry needs ``name``, ``state``,
``lastTransitionTime`` and ``message`` (at most 32 KiB).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from queues.kueue.render import APPROVAL_CHECK as CHECK_NAME
from queues.kueue.render import APPROVAL_CONTROLLER as CONTROLLER_NAME

__all__ = ["CHECK_NAME", "CONTROLLER_NAME"]  # with the builders below
CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")
MAX_MESSAGE = 32 * 1024
MAX_CHECKS = 8


def rfc3339(moment: datetime) -> str:
    """Kubernetes' time format: UTC, whole seconds, a Z."""
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def clip_message(message: str) -> str:
    """At most MAX_MESSAGE bytes of UTF-8, cut on a character boundary."""
    encoded = message.encode()
    if len(encoded) <= MAX_MESSAGE:
        return message
    marker = " [truncated]"
    return encoded[: MAX_MESSAGE - len(marker)].decode(errors="ignore") + marker


def check_entry(state: str, message: str, at: datetime) -> dict[str, Any]:
    """One ``status.admissionChecks`` entry for Berth's check."""
    if state not in CHECK_STATES:
        raise ValueError(f"admission check state {state!r} is not one of {CHECK_STATES}")
    return {
        "name": CHECK_NAME,
        "state": state,
        "lastTransitionTime": rfc3339(at),
        "message": clip_message(message),
    }


def check_status_patch(state: str, message: str, at: datetime) -> dict[str, Any]:
    """The ``status`` Berth applies to a Workload: its own check entry only, so
    the list-map merge leaves every other controller's entry alone."""
    return {"admissionChecks": [check_entry(state, message, at)]}


def check_of(workload: Mapping[str, Any]) -> dict[str, Any] | None:
    """Berth's entry in a Workload's status, if Kueue has added it."""
    for entry in (workload.get("status") or {}).get("admissionChecks") or []:
        if entry.get("name") == CHECK_NAME:
            return dict(entry)
    return None


def active_condition(generation: int, at: datetime) -> dict[str, Any]:
    """The AdmissionCheck's ``Active`` condition: without it True, Kueue marks
    every ClusterQueue using the check inactive and admits nothing there."""
    return {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "message": "Berth's approval controller is answering this check",
        "observedGeneration": generation,
        "lastTransitionTime": rfc3339(at),
    }


def is_active(admission_check: Mapping[str, Any]) -> bool:
    generation = (admission_check.get("metadata") or {}).get("generation")
    for condition in (admission_check.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Active":
            return condition.get("status") == "True" and (
                generation is None or condition.get("observedGeneration") == generation
            )
    return False
