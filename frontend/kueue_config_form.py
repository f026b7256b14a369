"""The Kueue configuration page's form: what each setting does in plain words,
the form's values, the request body a submitted form makes, and the settings
as people read them ("5 min (5m)", never a bare 300).

Every input is named by the API's camelCase path (``waitForPodsReady.timeout``),
so an error's field path names the input it belongs to. A section's switch
(``admissionFairSharing.enable``) is the form's own: the API says "off" with a
null section.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.http import QueryDict

from queues import display, durations
from queues.choices import PreemptionStrategies, RequeuingTimestamp
from queues.errors import FieldError

Options = tuple[tuple[str, str], ...]

STRATEGY_OPTIONS: Options = (
    (PreemptionStrategies.FINAL_THEN_INITIAL.value, "Final share, then initial share (default)"),
    (PreemptionStrategies.FINAL_SHARE.value, "Final share only"),
    (PreemptionStrategies.INITIAL_SHARE.value, "Initial share only"),
)
TIMESTAMP_OPTIONS: Options = (
    (RequeuingTimestamp.EVICTION.value, "Eviction time (to the back of the queue)"),
    (RequeuingTimestamp.CREATION.value, "Creation time (its old place)"),
)


@dataclass(frozen=True)
class Setting:
    path: str  # the API's field path, and the input's name
    label: str
    widget: str  # checkbox | duration | seconds | count | select
    help: str
    options: Options = ()
    placeholder: str = ""
    short: str = ""  # its name in the policy page's one-line summary, if not the label

    @property
    def summary_label(self) -> str:
        return self.short or self.label.lower()


@dataclass(frozen=True)
class Section:
    key: str  # the API's section
    title: str
    intro: str
    switch: Setting
    settings: tuple[Setting, ...]


FAIR_SHARING = Section(
    "fairSharing",
    "Fair sharing",
    "Kueue decides whom to preempt in a cohort by each queue's weighted share of the "
    "capacity it uses, instead of by priority alone: a queue using more than its fair "
    "share gives way to one using less. A queue's or cohort's weight is its fair-sharing "
    "weight.",
    Setting(
        "fairSharing.enable",
        "Fair sharing on",
        "checkbox",
        "Off: preemption between queues of a cohort follows priority only.",
    ),
    (
        Setting(
            "fairSharing.preemptionStrategies",
            "Preemption strategies",
            "select",
            "Final share: a queue may preempt another's workload only if afterwards its own "
            "share, with the new workload, is no larger than the other's. Initial share: only "
            "if its share with the new workload stays below the other's share before the "
            "preemption. Kueue tries them in this order.",
            STRATEGY_OPTIONS,
        ),
    ),
)
ADMISSION_FAIR_SHARING = Section(
    "admissionFairSharing",
    "Admission fair sharing",
    "Orders the workloads waiting in a ClusterQueue by how much their LocalQueue (their "
    "team's namespace) used lately, so a team that ran little goes first. It applies to "
    "the cluster queues whose admission fair sharing mode is UsageBasedAdmissionFairSharing "
    "(set on each cluster queue).",
    Setting("admissionFairSharing.enable", "Admission fair sharing on", "checkbox", ""),
    (
        Setting(
            "admissionFairSharing.usageHalfLifeTime",
            "Usage half-life",
            "duration",
            "How fast past use is forgotten: use this long ago counts half. Required.",
            placeholder="168h",
        ),
        Setting(
            "admissionFairSharing.usageSamplingInterval",
            "Sampling interval",
            "duration",
            "How often Kueue measures each LocalQueue's use. Empty: 5m.",
            placeholder="5m",
        ),
    ),
)
WAIT_FOR_PODS_READY = Section(
    "waitForPodsReady",
    "Wait for pods ready",
    "Kueue watches that an admitted workload's pods all start. If they are not ready in "
    "time (an image that never pulls, a gang that cannot be placed), it evicts the workload, "
    "frees its quota and requeues it after a backoff, so a stuck job does not hold GPUs.",
    Setting("waitForPodsReady.enable", "Wait for pods ready on", "checkbox", ""),
    (
        Setting(
            "waitForPodsReady.timeout",
            "Timeout",
            "duration",
            "How long an admitted workload's pods may take to be ready. Empty: 5m.",
            placeholder="5m",
        ),
        Setting(
            "waitForPodsReady.blockAdmission",
            "Block admission while pods start",
            "checkbox",
            "Admit nothing else until the last admitted workload's pods are ready: gangs "
            "never compete for nodes, but admission is slower.",
            short="block admission",
        ),
        Setting(
            "waitForPodsReady.recoveryTimeout",
            "Recovery timeout",
            "duration",
            "How long a running workload whose pods stop being ready (a node lost) may take "
            "to recover before it is evicted. Empty: no limit.",
            placeholder="3m",
        ),
        Setting(
            "waitForPodsReady.requeuingStrategy.timestamp",
            "Requeue order",
            "select",
            "Which time places a requeued workload in its queue: its eviction (the back of "
            "the line) or its creation (its old place).",
            TIMESTAMP_OPTIONS,
        ),
        Setting(
            "waitForPodsReady.requeuingStrategy.backoffLimitCount",
            "Requeue limit",
            "count",
            "Requeues before Kueue deactivates the workload. Empty: no limit.",
            placeholder="no limit",
        ),
        Setting(
            "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
            "Backoff base (seconds)",
            "seconds",
            "The wait before the first requeue; it doubles with each requeue. Empty: 60.",
            placeholder="60",
            short="backoff from",
        ),
        Setting(
            "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
            "Backoff maximum (seconds)",
            "seconds",
            "The longest wait before a requeue. Empty: 3600.",
            placeholder="3600",
            short="backoff up to",
        ),
    ),
)
SECTIONS = (FAIR_SHARING, ADMISSION_FAIR_SHARING, WAIT_FOR_PODS_READY)
SETTINGS = {s.path: s for section in SECTIONS for s in (section.switch, *section.settings)}
# What the inputs of a section that is off show: Kueue's defaults.
_OFF_VALUES = {
    "admissionFairSharing.usageSamplingInterval": "5m",
    "waitForPodsReady.timeout": "5m",
    "waitForPodsReady.requeuingStrategy.timestamp": RequeuingTimestamp.EVICTION.value,
    "waitForPodsReady.requeuingStrategy.backoffBaseSeconds": "60",
    "waitForPodsReady.requeuingStrategy.backoffMaxSeconds": "3600",
}


def _flat(value: Any, path: str, into: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, child in value.items():
            _flat(child, f"{path}.{key}", into)
    else:
        into[path] = value


def form_values(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs for a configuration snapshot: checkboxes as booleans, the
    rest as the text an input holds."""
    flat: dict[str, Any] = {}
    for section in SECTIONS:
        _flat(snapshot.get(section.key) or {}, section.key, flat)
    values: dict[str, Any] = {}
    for path, setting in SETTINGS.items():
        if setting.widget == "checkbox":
            values[path] = bool(flat.get(path))
        elif path == "fairSharing.preemptionStrategies":
            values[path] = ",".join(flat.get(path) or [])
        else:
            value = flat.get(path, _OFF_VALUES.get(path))
            values[path] = "" if value is None else str(value)
    values["admissionFairSharing.enable"] = snapshot.get("admissionFairSharing") is not None
    values["waitForPodsReady.enable"] = snapshot.get("waitForPodsReady") is not None
    return values


def read_form(post: QueryDict) -> dict[str, Any]:
    """The values a submitted form holds (an unticked checkbox is not sent)."""
    return {
        path: (path in post) if s.widget == "checkbox" else post.get(path, "").strip()
        for path, s in SETTINGS.items()
    }


def request_body(values: Mapping[str, Any]) -> dict[str, Any]:
    """The API's request for the form: a section switched off is null; an empty
    input is left out (its default applies; the requeue limit: none)."""

    def given(*paths: str) -> dict[str, Any]:
        return {path.rsplit(".", 1)[1]: values[path] for path in paths if values[path] != ""}

    strategies = values["fairSharing.preemptionStrategies"]
    body: dict[str, Any] = {
        "fairSharing": {
            "enable": values["fairSharing.enable"],
            "preemptionStrategies": strategies.split(",") if strategies else [],
        },
        "admissionFairSharing": None,
        "waitForPodsReady": None,
    }
    if values["admissionFairSharing.enable"]:
        body["admissionFairSharing"] = given(
            "admissionFairSharing.usageHalfLifeTime", "admissionFairSharing.usageSamplingInterval"
        )
    if values["waitForPodsReady.enable"]:
        strategy = "waitForPodsReady.requeuingStrategy"
        requeuing = given(f"{strategy}.timestamp", f"{strategy}.backoffBaseSeconds")
        requeuing.update(given(f"{strategy}.backoffMaxSeconds"))
        limit = values[f"{strategy}.backoffLimitCount"]
        requeuing["backoffLimitCount"] = limit if limit != "" else None
        body["waitForPodsReady"] = {
            **given("waitForPodsReady.timeout", "waitForPodsReady.recoveryTimeout"),
            "blockAdmission": values["waitForPodsReady.blockAdmission"],
            "requeuingStrategy": requeuing,
        }
    return body


def input_of(error: FieldError) -> str:
    """The input an error's field path points at (a list index dropped)."""
    return re.sub(r"\[\d+\]$", "", error.field)


def readable(setting: Setting, value: Any) -> str:
    """A value as people read it: ``5 min (5m)``, ``1 min``, ``no limit``."""
    if setting.widget == "checkbox":
        return "yes" if value else "no"
    if value in ("", None):
        return {"count": "no limit", "duration": "none"}.get(setting.widget, "default")
    if setting.widget == "duration":
        try:
            return f"{durations.describe(durations.parse(str(value)))} ({value})"
        except durations.DurationError:
            return str(value)
    if setting.widget == "seconds":
        text = str(value)
        return display.duration(int(text)) if text.isdigit() else text
    return dict(setting.options).get(str(value), str(value))


def form_sections(
    values: Mapping[str, Any], errors: tuple[FieldError, ...]
) -> list[dict[str, Any]]:
    """The sections as the template draws them, each input with its errors."""
    by_input: dict[str, list[FieldError]] = {}
    for error in errors:
        by_input.setdefault(input_of(error), []).append(error)

    def draw(setting: Setting) -> dict[str, Any]:
        return {
            "setting": setting,
            "value": values.get(setting.path, ""),
            "readable": readable(setting, values.get(setting.path, "")),
            "errors": by_input.get(setting.path, []),
        }

    return [
        {
            "section": section,
            "switch": draw(section.switch),
            "settings": [draw(setting) for setting in section.settings],
        }
        for section in SECTIONS
    ]


def summary(snapshot: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(section, how it is set) in words, for the policy page."""
    values = form_values(snapshot)
    rows = []
    for section in SECTIONS:
        if not values[section.switch.path]:
            rows.append((section.title, "off"))
            continue
        parts = [f"{s.summary_label} {readable(s, values[s.path])}" for s in section.settings]
        rows.append((section.title, "on: " + "; ".join(parts)))
    return rows
