"""Writes for Kueue's manager configuration (``queues.models.KueueConfiguration``).

The request is Kueue's own camelCase shape, three sections of its
``Configuration``::

    {"fairSharing": {"enable", "preemptionStrategies"},
     "admissionFairSharing": {"usageHalfLifeTime", "usageSamplingInterval"} | null,
     "waitForPodsReady": {"enable"?, "timeout", "blockAdmission", "recoveryTimeout",
                          "requeuingStrategy": {"timestamp", "backoffLimitCount",
                                                "backoffBaseSeconds", "backoffMaxSeconds"}} | null}

A write replaces the whole configuration (what is left out returns to its
default, a null section is off), under the policy write lock, against the
revision the client edited (compare-and-set), with a history entry, like every
other policy write. Every broken rule is reported at its camelCase path
(``waitForPodsReady.requeuingStrategy.backoffBaseSeconds``) and nothing is
saved. The rules are Kueue's (``pkg/config/validation.go``), made strict where
Kueue would start with a value that cannot mean anything (a zero timeout).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queues import durations, snapshots
from queues.choices import ChangeAction, PolicyKind, PreemptionStrategies, RequeuingTimestamp
from queues.errors import FieldError, raise_if
from queues.models import KueueConfiguration
from queues.models.kueue_configuration import FIVE_MINUTES, SINGLETON_ID
from queues.rules import INT32_MAX
from queues.services.common import check_revision, policy_write, record_change

# The history's object name: the ConfigMap the configuration renders to.
OBJECT_NAME = "kueue-manager-config"
SECTIONS = ("fairSharing", "admissionFairSharing", "waitForPodsReady")
FAIR_SHARING_FIELDS = ("enable", "preemptionStrategies")
ADMISSION_FAIR_SHARING_FIELDS = ("usageHalfLifeTime", "usageSamplingInterval")
WAIT_FOR_PODS_READY_FIELDS = (
    "enable",
    "timeout",
    "blockAdmission",
    "requeuingStrategy",
    "recoveryTimeout",
)
REQUEUING_STRATEGY_FIELDS = (
    "timestamp",
    "backoffLimitCount",
    "backoffBaseSeconds",
    "backoffMaxSeconds",
)
STRATEGY_LISTS = {value: value.split(",") for value in PreemptionStrategies.values}


class _Reader:
    """Reads one request, collecting every broken rule instead of stopping at
    the first, so the admin sees them all at once."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def fail(self, path: str, rule: str, message: str) -> None:
        self.errors.append(FieldError(path, rule, message))

    def section(self, raw: Any, path: str, known: tuple[str, ...]) -> dict[str, Any] | None:
        """The object at ``path``; None when it is absent or null."""
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            self.fail(path, "type", "must be an object, or null")
            return None
        for key in raw:
            if key not in known:
                self.fail(
                    f"{path}.{key}",
                    "unknown-field",
                    f"is not a setting Berth keeps; known fields: {', '.join(known)}",
                )
        return dict(raw)

    def boolean(self, section: Mapping[str, Any], path: str, key: str, default: bool) -> bool:
        value = section.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(f"{path}.{key}", "type", "must be true or false")
            return default
        return value

    def duration(
        self,
        section: Mapping[str, Any],
        path: str,
        key: str,
        default: int | None,
        *,
        required: bool = False,
    ) -> int | None:
        """Nanoseconds of a Go duration that must be longer than zero."""
        value = section.get(key)
        where = f"{path}.{key}"
        if value in (None, ""):
            if required:
                self.fail(where, "required", f"is required: {durations.FORMS}")
            return default
        try:
            nanoseconds = durations.parse(value)
        except durations.DurationError as exc:
            self.fail(where, "duration", str(exc))
            return default
        if nanoseconds <= 0:
            self.fail(where, "positive", f"must be longer than zero, not {value!r}")
            return default
        return nanoseconds

    def integer(
        self,
        section: Mapping[str, Any],
        path: str,
        key: str,
        default: int | None,
        *,
        minimum: int,
    ) -> int | None:
        """A whole number from ``minimum`` to Kueue's int32 limit; absent or
        null gives ``default``."""
        value = section.get(key)
        where = f"{path}.{key}"
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, "type", "must be a whole number")
            return default
        if value < minimum:
            self.fail(where, "min-value", f"must be at least {minimum}, not {value}")
            return default
        if value > INT32_MAX:
            self.fail(where, "max-value", f"must be at most {INT32_MAX} (Kueue's int32)")
            return default
        return value

    def strategies(self, section: Mapping[str, Any], path: str) -> str:
        value = section.get("preemptionStrategies")
        if value is None:
            return PreemptionStrategies.FINAL_THEN_INITIAL.value
        joined = ",".join(value) if isinstance(value, list | tuple) else None
        if joined is None or joined not in STRATEGY_LISTS or list(value) != STRATEGY_LISTS[joined]:
            allowed = "; ".join(f"[{', '.join(v)}]" for v in STRATEGY_LISTS.values())
            self.fail(
                f"{path}.preemptionStrategies",
                "unsupported-value",
                f"{value!r} is not a list Kueue accepts: use one of {allowed}",
            )
            return PreemptionStrategies.FINAL_THEN_INITIAL.value
        return joined

    def timestamp(self, section: Mapping[str, Any], path: str) -> str:
        value = section.get("timestamp")
        if value is None:
            return RequeuingTimestamp.EVICTION.value
        if value not in RequeuingTimestamp.values:
            self.fail(
                f"{path}.timestamp",
                "unsupported-value",
                f"{value!r} is not supported: use one of {', '.join(RequeuingTimestamp.values)}",
            )
            return RequeuingTimestamp.EVICTION.value
        return str(value)


def parse(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[FieldError]]:
    """The model fields ``data`` asks for, and every rule it breaks."""
    read = _Reader()
    known = ", ".join(SECTIONS)
    for key in data:
        if key not in SECTIONS:
            read.fail(key, "unknown-field", f"is not a section Berth keeps; known: {known}")
    fields: dict[str, Any] = {}

    fair = read.section(data.get("fairSharing"), "fairSharing", FAIR_SHARING_FIELDS) or {}
    fields["fair_sharing_enable"] = read.boolean(fair, "fairSharing", "enable", False)
    fields["fair_sharing_preemption_strategies"] = read.strategies(fair, "fairSharing")

    path = "admissionFairSharing"
    admission = read.section(data.get(path), path, ADMISSION_FAIR_SHARING_FIELDS)
    fields["admission_fair_sharing_enable"] = admission is not None
    if admission is not None:
        fields["usage_half_life_time_ns"] = read.duration(
            admission, path, "usageHalfLifeTime", None, required=True
        )
        fields["usage_sampling_interval_ns"] = read.duration(
            admission, path, "usageSamplingInterval", FIVE_MINUTES
        )
    else:
        fields["usage_half_life_time_ns"] = None
        fields["usage_sampling_interval_ns"] = FIVE_MINUTES

    fields.update(_wait_for_pods_ready(read, data.get("waitForPodsReady")))
    return fields, read.errors


def _wait_for_pods_ready(read: _Reader, raw: Any) -> dict[str, Any]:
    path = "waitForPodsReady"
    section = read.section(raw, path, WAIT_FOR_PODS_READY_FIELDS)
    # Kueue's own shape has "enable"; present without it means on.
    enabled = section is not None and read.boolean(section, path, "enable", True)
    section = section or {}
    strategy_path = f"{path}.requeuingStrategy"
    strategy = (
        read.section(section.get("requeuingStrategy"), strategy_path, REQUEUING_STRATEGY_FIELDS)
        or {}
    )
    # Read (and so check) everything even when "enable" is false: a typo in a
    # switched-off section is still refused rather than silently dropped.
    fields = {
        "wait_for_pods_ready_enable": enabled,
        "wait_for_pods_ready_timeout_ns": read.duration(section, path, "timeout", FIVE_MINUTES),
        "block_admission": read.boolean(section, path, "blockAdmission", False),
        "recovery_timeout_ns": read.duration(section, path, "recoveryTimeout", None),
        "requeuing_timestamp": read.timestamp(strategy, strategy_path),
        "backoff_limit_count": read.integer(
            strategy, strategy_path, "backoffLimitCount", None, minimum=0
        ),
        "backoff_base_seconds": read.integer(
            strategy, strategy_path, "backoffBaseSeconds", 60, minimum=0
        ),
        "backoff_max_seconds": read.integer(
            strategy, strategy_path, "backoffMaxSeconds", 3600, minimum=1
        ),
    }
    if not enabled:
        # Off: the section keeps no values of its own, so turning it on again
        # starts from Kueue's defaults, and history shows exactly what Kueue gets.
        defaults = KueueConfiguration.unsaved()
        fields = {name: getattr(defaults, name) for name in fields}
    return fields


def update(
    *, actor: Any, data: Mapping[str, Any], expected_revision: int | None = None
) -> KueueConfiguration:
    """Replace the configuration with ``data``. Raises ``PolicyInvalid`` (nothing
    saved) or ``StaleRevision`` when ``expected_revision`` is not the stored one.
    The first save creates the row; a save that changes nothing records nothing."""
    with policy_write():
        existing = KueueConfiguration.objects.select_for_update().filter(pk=SINGLETON_ID).first()
        configuration = existing or KueueConfiguration.unsaved()
        check_revision(configuration, expected_revision)
        fields, errors = parse(data)
        raise_if(errors)
        before = snapshots.kueue_configuration(existing) if existing is not None else None
        for name, value in fields.items():
            setattr(configuration, name, value)
        after = snapshots.kueue_configuration(configuration)
        if existing is not None and after == before:
            return existing
        configuration.revision = existing.revision + 1 if existing is not None else 1
        configuration.save()
        record_change(
            actor=actor,
            kind=PolicyKind.KUEUE_CONFIGURATION,
            object_name=OBJECT_NAME,
            action=ChangeAction.CREATED if existing is None else ChangeAction.UPDATED,
            before=before,
            after=after,
        )
        return configuration
