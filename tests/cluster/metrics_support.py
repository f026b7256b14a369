"""What the /metrics tests (``test_metrics*.py``) share: the page read by
prometheus_client's own parser (each family once), lookups of samples by name
and labels, ``scrape`` (GET /metrics, check the status and content type,
parse), and the endpoint's URL and a label value with a quote, a backslash
and a newline in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.test import Client
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4 as CONTENT_TYPE
from prometheus_client.parser import text_string_to_metric_families

URL = "/metrics"
ODD_REASON = 'Said "no" \\ then\nleft'


@dataclass
class Family:
    help: str | None = None
    type: str | None = None
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def parse(text: str) -> dict[str, Family]:
    """Families by name as written (a counter's with ``_total``), read by
    prometheus_client's own parser."""
    assert text.endswith("\n")
    families: dict[str, Family] = {}
    for read in text_string_to_metric_families(text):
        family = Family(
            help=read.documentation,
            type=read.type,
            samples=[(s.name, dict(s.labels), float(s.value)) for s in read.samples],
        )
        name = read.name + ("_total" if read.type == "counter" else "")
        assert name not in families, f"{name} twice"
        families[name] = family
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
