"""Kubernetes name and label syntax, with errors in plain words.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import re

# Used with fullmatch: `$` alone would also accept a trailing newline.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

LABEL_MAX = 63
SUBDOMAIN_MAX = 253


def _dns_name_error(value: str, pattern: re.Pattern[str], limit: int, rule: str) -> str | None:
    if not isinstance(value, str) or not value:
        return "must not be empty"
    if len(value) > limit:
        return f"is {len(value)} characters long; at most {limit} are allowed"
    if not pattern.fullmatch(value):
        return f"{value!r} is not a valid name: {rule}"
    return None


def dns_label_error(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 label (namespaces, team slugs, LocalQueues)."""
    return _dns_name_error(
        value,
        _LABEL,
        LABEL_MAX,
        "use lowercase letters, digits and '-', "
        "starting and ending with a letter or digit (RFC 1123 label)",
    )


def dns_subdomain_error(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 subdomain (cluster-scoped Kueue objects)."""
    return _dns_name_error(
        value,
        _SUBDOMAIN,
        SUBDOMAIN_MAX,
        "use lowercase letters, digits, '-' and '.', "
        "starting and ending with a letter or digit (RFC 1123 subdomain)",
    )


def qualified_name_error(value: str) -> str | None:
    """Why ``value`` is not a qualified name (label keys, taint keys, resource names)."""
    if not isinstance(value, str) or not value:
        return "must not be empty"
    prefix, slash, name = value.rpartition("/")
    if slash:
        if not prefix:
            return f"{value!r} has an empty prefix before '/'"
        prefix_error = dns_subdomain_error(prefix)
        if prefix_error:
            return f"the prefix of {value!r} {prefix_error}"
    if len(name) > LABEL_MAX:
        return f"the name part of {value!r} is longer than {LABEL_MAX} characters"
    if not _QUALIFIED_NAME_PART.fullmatch(name):
        return (
            f"{value!r} is not a valid key: an optional DNS prefix and '/', then letters, "
            "digits, '-', '_' and '.', starting and ending with a letter or digit"
        )
    return None


def label_value_error(value: str) -> str | None:
    """Why ``value`` is not a valid label value (may be empty)."""
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > LABEL_MAX:
        return f"is {len(value)} characters long; at most {LABEL_MAX} are allowed"
    if not _LABEL_VALUE.fullmatch(value):
        return (
            f"{value!r} is not a valid label value: letters, digits, '-', '_' and '.', "
            "starting and ending with a letter or digit"
        )
    return None
