"""YAML for ``-o yaml`` and ``berth submit --dry-run``'s manifests, written
with the standard library so the CLI installs without PyYAML.

Block style, two spaces per level. A string is written plain only when no
YAML reader could take it for anything else (it starts with a letter and holds
only letters, digits, spaces and ``_./()-``, and is not a YAML 1.1 boolean or
null such as ``yes`` or ``off``); every other string is double-quoted, with
JSON's escapes, which YAML reads the same way. ``tests/cli/test_cli_yaml.py``
reads random documents back with PyYAML.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_./() -]*")
# What YAML 1.1 readers (PyYAML among them) resolve to a boolean or null.
_RESERVED = frozenset(["y", "yes", "n", "no", "true", "false", "on", "off", "null"])
_INDENT = "  "


def dump(data: Any) -> str:
    """One document, ending in a newline."""
    return "\n".join(_lines(data, 0)) + "\n"


def dump_all(documents: Iterable[Any]) -> str:
    """Documents separated by ``---``."""
    return "---\n".join(dump(document) for document in documents)


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and not text.endswith(" ") and text.lower() not in _RESERVED:
        return text
    return _quoted(text)


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:  # YAML 1.1 floats need the dot: 1e+20 -> 1.0e+20
        mantissa += ".0"
    return mantissa + e + exponent


def _quoted(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    # JSON escapes only the C0 controls; YAML also refuses other unprintables.
    return "".join(c if c.isprintable() or c in '\\"' else _escape(c) for c in quoted[1:-1]).join(
        '""'
    )


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _lines(value: Any, depth: int) -> list[str]:
    """``value`` as the lines of a block node at ``depth`` (its first line
    carries no indentation of its own: the caller places it)."""
    pad = _INDENT * depth
    if isinstance(value, Mapping):
        if not value:
            return ["{}"]
        out: list[str] = []
        for key, item in value.items():
            head = f"{pad}{scalar(key)}:"
            out.extend(_entry(head, item, depth))
        out[0] = out[0][len(pad) :]
        return out
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if not value:
            return ["[]"]
        out = []
        for item in value:
            if isinstance(item, Mapping) and item:
                # "- key: value", the other keys under the first.
                inner = _lines(item, depth + 1)
                out.append(f"{pad}- {inner[0]}")
                out.extend(inner[1:])
            elif _is_block(item):
                out.append(f"{pad}-")
                out.extend(_indented(_lines(item, depth + 1), depth + 1))
            else:  # a scalar, or an empty mapping or list
                out.append(f"{pad}- {_lines(item, depth + 1)[0]}")
        out[0] = out[0][len(pad) :]
        return out
    return [scalar(value)]


def _entry(head: str, item: Any, depth: int) -> list[str]:
    if _is_block(item):
        return [head, *_indented(_lines(item, depth + 1), depth + 1)]
    rendered = _lines(item, depth + 1)
    return [f"{head} {rendered[0]}"]


def _indented(lines: list[str], depth: int) -> list[str]:
    return [_INDENT * depth + lines[0], *lines[1:]]


def _is_block(value: Any) -> bool:
    if isinstance(value, Mapping):
        return bool(value)
    return isinstance(value, Sequence) and not isinstance(value, str | bytes) and bool(value)
