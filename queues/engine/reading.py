"""Reading scenario input with every error collected, each naming its field path
and rule. Shared by the scenario, workload and generator readers.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from queues import names
from queues import rules as policy_rules
from queues.engine.model import Taint, Toleration
from queues.errors import FieldError
from queues.quantity import parse_decimal


class Reader:
    """Collects every error with its path instead of stopping at the first."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def error(self, path: str, rule: str, message: str) -> None:
        self.errors.append(FieldError(path, rule, message))

    def mapping(self, path: str, value: Any, known: tuple[str, ...]) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.error(path, "type", "must be a mapping")
            return {}
        for key in value:
            if key not in known:
                self.error(
                    f"{path}.{key}",
                    "unknown-field",
                    f"is not a known field; expected one of: {', '.join(known)}",
                )
        return value

    def items(self, path: str, value: Any) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.error(path, "type", "must be a list")
            return []
        return value

    def choice(self, path: str, value: Any, enum: type[Any], default: Any) -> Any:
        if value is None:
            return default
        try:
            return enum(value)
        except ValueError:
            allowed = ", ".join(member.value for member in enum if member.value)
            self.error(
                path, "unsupported-value", f"{value!r} is not supported: use one of {allowed}"
            )
            return default

    def option(
        self, path: str, spec: Mapping[str, Any], key: str, enum: type[Any], default: Any
    ) -> Any:
        """``spec[key]`` as a member of ``enum``, its error at ``path.key``."""
        return self.choice(f"{path}.{key}", spec.get(key), enum, default)

    def integer(self, path: str, value: Any, default: int | None = None) -> int | None:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(path, "type", "must be a whole number")
            return default
        return value

    def number(
        self, path: str, value: Any, default: float | None = None, minimum: float | None = 0
    ) -> float | None:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.error(path, "type", "must be a number")
            return default
        if not math.isfinite(value):
            # YAML's .nan and .inf: a NaN time orders nothing consistently (a
            # victim search's sort), and none of these fields means "never".
            self.error(path, "finite", "must be a finite number, not .nan or .inf")
            return default
        if minimum is not None and value < minimum:
            self.error(path, "range", f"must be at least {minimum}")
            return default
        return float(value)

    def name(self, path: str, value: Any, kind: str = "subdomain") -> str:
        if not isinstance(value, str):
            self.error(path, "required", "must be a name")
            return ""
        check = names.dns_label_error if kind == "label" else names.dns_subdomain_error
        problem = check(value)
        if problem:
            self.error(path, f"dns-1123-{kind}", problem)
        return value

    def weight(self, path: str, value: Any) -> float:
        parsed, errors = policy_rules.parse_weight(path, value)
        self.errors.extend(errors)
        return float(parsed) if parsed is not None else 1.0


def read_taints(reader: Reader, path: str, raw: Any) -> tuple[Taint, ...]:
    items = reader.items(path, raw)
    for error in policy_rules.node_taint_errors(path, items):
        reader.errors.append(error)
    return tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
        for t in items
        if isinstance(t, Mapping)
    )


def read_tolerations(reader: Reader, path: str, raw: Any) -> tuple[Toleration, ...]:
    items = reader.items(path, raw)
    converted = [
        {("toleration_seconds" if k == "tolerationSeconds" else k): v for k, v in t.items()}
        if isinstance(t, Mapping)
        else t
        for t in items
    ]
    for error in policy_rules.toleration_errors(path, converted):
        reader.error(
            error.field.replace("toleration_seconds", "tolerationSeconds"),
            error.rule,
            error.message,
        )
    return tuple(
        Toleration(
            str(t.get("key", "")),
            str(t.get("operator", "Equal")),
            str(t.get("value", "")),
            str(t.get("effect", "")),
        )
        for t in items
        if isinstance(t, Mapping)
    )


def read_labels(reader: Reader, path: str, raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    reader.errors.extend(policy_rules.node_label_errors(path, raw))
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+")


def read_seconds(reader: Reader, path: str, value: Any, *, required: bool = False) -> float | None:
    """Seconds given as a number (``3600``) or a duration string (``1h``, ``30m``,
    ``200ms``)."""
    if value is None:
        if required:
            reader.error(path, "required", "is required")
        return None
    if isinstance(value, bool):
        reader.error(path, "type", "must be a number of seconds or a duration like 30m")
        return None
    if isinstance(value, int | float):
        if math.isnan(value):
            reader.error(path, "finite", "must be a number of seconds (.inf: never), not .nan")
            return None
        if value < 0:
            reader.error(path, "non-negative", "must be 0 or more")
            return None
        return float(value)
    if isinstance(value, str):
        if value.startswith("-") and _DURATION.fullmatch(value[1:]):
            reader.error(path, "non-negative", "must be 0 or more")
            return None
        if _DURATION.fullmatch(value):
            # Go durations too: 1h30m, 5m0s, 1.5h, 300ms.
            return sum(
                float(parse_decimal(number)) * _UNIT_SECONDS[unit]
                for number, unit in _DURATION_PART.findall(value)
            )
    reader.error(
        path, "duration", f"{value!r} is not a duration: use seconds or 200ms, 30s, 15m, 2h, 1d"
    )
    return None
