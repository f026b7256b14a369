"""What Berth writes as the controller of the ``berth-approval`` AdmissionCheck, against
Kueue v0.19.2's CRDs: the status it applies to a Workload (its own ``admissionChecks``
entry) and the AdmissionCheck's ``Active`` condition, with unknown fields refused, the state
enum, the required fields and the message's 32 KiB bound. Pure: no database, no cluster."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from functools import cache
from typing import Any

import jsonschema
import pytest

from approvals.status import (
    CHECK_NAME,
    CHECK_STATES,
    MAX_CHECKS,
    MAX_MESSAGE,
    active_condition,
    check_entry,
    check_of,
    check_status_patch,
    clip_message,
    is_active,
)
from queues.kueue.render import render_admission_check
from tests.jobs.crds import strict
from tests.kueue.crds import rules_at, schema

AT = datetime(2026, 5, 1, 10, 0, 0, 654321, tzinfo=UTC)
RFC3339_SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
_FORMATS = jsonschema.FormatChecker()


RFC3339 = re.compile(r"^\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)$")


@_FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    # jsonschema checks date-time only with an optional package; the API server always does.
    if not isinstance(value, str):
        return True
    datetime.fromisoformat(value.upper().replace("Z", "+00:00"))  # a real date and time
    return bool(RFC3339.match(value))


@_FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@cache
def _validator(kind: str) -> jsonschema.Draft7Validator:
    """The kind's ``status`` schema, strict: a property it does not declare is refused."""
    status = strict(schema(kind)["properties"]["status"])
    return jsonschema.Draft7Validator(status, format_checker=_FORMATS)


def errors(kind: str, status: dict[str, Any]) -> list[str]:
    return sorted(
        f"{'.'.join(str(p) for p in error.absolute_path) or '<status>'}: {error.message}"
        for error in _validator(kind).iter_errors(status)
    )


# --- the Workload's admissionChecks entry ------------------------------------------------------


@pytest.mark.parametrize("state", CHECK_STATES)
def test_every_state_berth_writes_is_a_valid_workload_status(state: str) -> None:
    patch = check_status_patch(state, f"{state} by carol (approval #7)", AT)
    assert errors("Workload", patch) == []
    assert list(patch) == ["admissionChecks"]  # nothing of the status but its own entry
    [entry] = patch["admissionChecks"]
    assert entry == {
        "name": CHECK_NAME,
        "state": state,
        "lastTransitionTime": "2026-05-01T10:00:00Z",
        "message": f"{state} by carol (approval #7)",
    }


def test_the_entry_holds_exactly_the_required_fields_of_the_crd() -> None:
    checks = schema("Workload")["properties"]["status"]["properties"]["admissionChecks"]
    item = checks["items"]
    assert sorted(check_entry("Ready", "", AT)) == sorted(item["required"])
    assert tuple(item["properties"]["state"]["enum"]) == CHECK_STATES
    assert item["properties"]["message"]["maxLength"] == MAX_MESSAGE
    assert checks["maxItems"] == MAX_CHECKS
    # a list-map keyed by name: Berth's entry merges with the other checks' entries
    assert checks["x-kubernetes-list-type"] == "map"
    assert checks["x-kubernetes-list-map-keys"] == ["name"]
    # the name is the AdmissionCheck reconcile renders, within the CRD's bounds
    assert render_admission_check()["metadata"]["name"] == CHECK_NAME
    assert 1 <= len(CHECK_NAME) <= item["properties"]["name"]["maxLength"]
    # and the entry meets no CEL rule the schema check above would miss
    patch = check_status_patch("Ready", "", AT)
    reached = [path for path, _, _ in rules_at(schema("Workload")["properties"]["status"], patch)]
    assert [p for p in reached if p.startswith(".admissionChecks")] == []
    assert errors("Workload", check_status_patch("Pending", "", AT)) == []  # may be empty


def test_the_strict_schema_does_refuse_what_a_real_server_would() -> None:
    """The checks above could not fail if the validator accepted anything."""
    entry = check_entry("Ready", "ok", AT)
    assert errors("Workload", {"admissionChecks": [entry | {"approvedBy": "carol"}]}) == [
        "admissionChecks.0: Additional properties are not allowed ('approvedBy' was unexpected)"
    ]
    assert errors("Workload", {"admissionChecks": [entry | {"state": "Approved"}]}) == [
        "admissionChecks.0.state: 'Approved' is not one of ['Pending', 'Ready', 'Retry', "
        "'Rejected']"
    ]
    missing = {k: v for k, v in entry.items() if k != "lastTransitionTime"}
    assert errors("Workload", {"admissionChecks": [missing]}) == [
        "admissionChecks.0: 'lastTransitionTime' is a required property"
    ]
    assert errors("Workload", {"admissionChecks": [entry | {"lastTransitionTime": "soon"}]}) == [
        "admissionChecks.0.lastTransitionTime: 'soon' is not a 'date-time'"
    ]
    assert errors("Workload", {"admissionChecks": [entry] * (MAX_CHECKS + 1)}) != []


@pytest.mark.parametrize("state", ["Approved", "pending", "", "Ready "])
def test_a_state_outside_the_enum_is_refused_before_anything_is_written(state: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(state))):
        check_entry(state, "message", AT)
    with pytest.raises(ValueError):
        check_status_patch(state, "message", AT)


def test_the_transition_time_is_utc_whole_seconds() -> None:
    elsewhere = datetime(2026, 5, 1, 12, 30, 59, 999999, tzinfo=timezone(timedelta(hours=2)))
    entry = check_entry("Ready", "", elsewhere)
    assert entry["lastTransitionTime"] == "2026-05-01T10:30:59Z"
    assert RFC3339_SECONDS.match(entry["lastTransitionTime"])


# --- the message's 32 KiB ----------------------------------------------------------------------


def test_a_message_of_at_most_32_kib_is_kept_whole() -> None:
    assert check_entry("Rejected", "x" * MAX_MESSAGE, AT)["message"] == "x" * MAX_MESSAGE
    assert MAX_MESSAGE == 32 * 1024


@pytest.mark.parametrize(
    "text",
    [
        "x" * (MAX_MESSAGE + 1),
        "é" * 20_000,  # 20,000 characters, but 40,000 bytes
        "€" * 11_000,  # three bytes each: the cut falls inside a character
        "🚀" * 9_000,  # four bytes each
        "reason: " + "ß€🚀" * 5_000,
    ],
    ids=["ascii", "two-byte", "three-byte", "four-byte", "mixed"],
)
def test_a_longer_message_is_cut_to_32_kib_of_utf8_on_a_character_boundary(text: str) -> None:
    entry = check_entry("Rejected", text, AT)
    message = entry["message"]
    encoded = message.encode()  # a str: valid UTF-8 by construction, no partial character
    assert len(encoded) <= MAX_MESSAGE
    assert len(encoded) > MAX_MESSAGE - 16  # not cut much shorter than it has to be
    assert message.endswith(" [truncated]")
    assert text.startswith(message.removesuffix(" [truncated]"))
    assert errors("Workload", {"admissionChecks": [entry]}) == []
    assert clip_message(message) == message  # clipping again changes nothing


# --- the AdmissionCheck's Active condition -----------------------------------------------------


def test_the_active_condition_is_a_valid_admission_check_status() -> None:
    condition = active_condition(3, AT)
    status = {"conditions": [condition]}
    assert errors("AdmissionCheck", status) == []
    conditions = schema("AdmissionCheck")["properties"]["status"]["properties"]["conditions"]
    assert sorted(conditions["items"]["required"]) == sorted(
        k for k in condition if k != "observedGeneration"
    )
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]  # merged with others' types
    assert condition["type"] == "Active" and condition["status"] == "True"
    assert condition["observedGeneration"] == 3
    assert condition["lastTransitionTime"] == "2026-05-01T10:00:00Z"
    assert errors("AdmissionCheck", {"conditions": [condition | {"status": "Yes"}]}) != []
    assert errors("AdmissionCheck", {"conditions": [condition | {"reason": "not ok"}]}) != []


def test_is_active_wants_true_for_the_current_generation() -> None:
    def admission_check(generation: int, *conditions: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"generation": generation}, "status": {"conditions": list(conditions)}}

    other = {
        "type": "Other",
        "status": "False",
        "reason": "X",
        "message": "",
        "observedGeneration": 2,
    }
    assert is_active(admission_check(2, other, active_condition(2, AT)))
    assert not is_active(admission_check(3, active_condition(2, AT)))  # the spec changed since
    assert not is_active(admission_check(2, active_condition(2, AT) | {"status": "False"}))
    assert not is_active(admission_check(2, other))
    assert not is_active({"metadata": {"generation": 1}})


def test_check_of_finds_berths_entry_among_the_others() -> None:
    mine = check_entry("Pending", "", AT)
    theirs = {"name": "provision-gpus", "state": "Ready", "message": "", "lastTransitionTime": ""}
    workload = {"status": {"admissionChecks": [theirs, mine]}}
    assert check_of(workload) == mine
    assert check_of({"status": {"admissionChecks": [theirs]}}) is None
    assert check_of({"metadata": {"name": "no-status-yet"}}) is None
