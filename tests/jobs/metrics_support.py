"""What the /metrics tests (``test_metrics*.py``) share: a small parser for
the Prometheus text format, strict about what the tests rely on (HELP then
TYPE before a family's samples, each family once, label values unescaped),
lookups of samples by name and labels, ``scrape`` (GET /metrics, check the
status and content type, parse), and the endpoint's URL and a label value
with a quote, a backslash and a newline in it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.test import Client

from cluster.exposition import CONTENT_TYPE

URL = "/metrics"
ODD_REASON = 'Said "no" \\ then\nleft'


# ---------------------------------------------------------------------------
# A small parser for the text format, strict about what the tests rely on
# ---------------------------------------------------------------------------

_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_SAMPLE = re.compile(rf"^({_NAME})(\{{.*\}})? (\S+)$")
_LABEL_NAME = re.compile(rf"({_NAME})=\"")
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


@dataclass
class Family:
    help: str | None = None
    type: str | None = None
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def parse_labels(text: str) -> dict[str, str]:
    """``{a="x",b="y\\"z"}`` → {"a": "x", "b": 'y"z'}, undoing the escapes."""
    assert text.startswith("{") and text.endswith("}"), text
    body, labels, at = text[1:-1], {}, 0
    while at < len(body):
        match = _LABEL_NAME.match(body, at)
        assert match, f"bad label at {body[at:]!r}"
        at = match.end()
        value: list[str] = []
        while body[at] != '"':
            if body[at] == "\\":
                value.append(_UNESCAPE[body[at + 1]])
                at += 2
            else:
                assert body[at] != "\n"
                value.append(body[at])
                at += 1
        labels[match.group(1)] = "".join(value)
        at += 1
        if at < len(body):
            assert body[at] == ",", body[at:]
            at += 1
    return labels


def parse(text: str) -> dict[str, Family]:
    """Families by name. Every family has HELP then TYPE before its samples,
    appears once, and its samples follow it without another family between."""
    assert text.endswith("\n")
    families: dict[str, Family] = {}
    current: str | None = None
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in families, f"{name} twice"
            families[name] = Family(help=help_text)
            current = name
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert name == current and families[name].type is None, line
            assert kind in ("gauge", "counter", "histogram"), line
            families[name].type = kind
        else:
            match = _SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            name, labels, value = match.groups()
            assert current is not None and families[current].type is not None, line
            family = families[current]
            allowed = {current}
            if family.type == "histogram":
                allowed = {current + suffix for suffix in _HISTOGRAM_SUFFIXES}
            assert name in allowed, f"{name} inside family {current}"
            family.samples.append((name, parse_labels(labels) if labels else {}, float(value)))
    return families


def values(families: dict[str, Family], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples called ``name`` (a family or a histogram's series), by labels."""
    family = families.get(name) or families[name.rsplit("_", 1)[0]]
    return {
        tuple(sorted(labels.items())): value
        for sample, labels, value in family.samples
        if sample == name
    }


def one(families: dict[str, Family], name: str, **labels: str) -> float:
    return values(families, name)[tuple(sorted(labels.items()))]


def scrape(client: Client, **extra: Any) -> dict[str, Family]:
    response = client.get(URL, **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == CONTENT_TYPE
    return parse(response.content.decode())
