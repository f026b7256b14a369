"""Template filters for the dashboard: durations, quantities in Kubernetes
notation, relative times with the absolute one on hover."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.safestring import SafeString

from queues import display
from queues.quantity import format_readable

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """45 s, 4 min 30 s, 2 h 5 min, 1 d 3 h (queues.display); an em dash for unknown."""
    return display.duration(seconds)


@register.filter
def quantity(amount: int | None, resource: str) -> str:
    """A canonical amount as people read it: Kubernetes notation when short,
    else three significant digits (GPUs and counts stay plain)."""
    if amount is None:
        return "—"
    return format_readable(resource, int(amount))


@register.filter
def reltime(moment: datetime | str | None) -> SafeString | str:
    """<time> with "5 min ago" (or "in 5 min"); the page's script puts the
    absolute time in the viewer's zone on hover (UTC until it runs)."""
    if isinstance(moment, str):
        moment = parse_datetime(moment)
    if moment is None:
        return "—"
    words = display.relative(moment, timezone.now())
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        moment.astimezone(UTC).isoformat(),
        display.timestamp(moment),
        words,
    )


@register.simple_tag
def start_estimate(earliest: datetime | str | None, latest: datetime | str | None) -> str:
    """When a pending job may start, in words: now, in 5 min – 20 min, or why not known."""
    low = parse_datetime(earliest) if isinstance(earliest, str) else earliest
    high = parse_datetime(latest) if isinstance(latest, str) else latest
    return display.start_estimate(low, high, timezone.now())


@register.filter
def kueue(message: str | None) -> str:
    """Kueue's message with taints as key=value:Effect."""
    return display.kueue_text(message or "")


@register.filter
def gpu_hours(value: float | None) -> str:
    """GPU-hours: 0.01, 2.5, 12.5, < 0.01 (queues.display)."""
    return display.gpu_hours(value)


@register.filter
def get(mapping: dict[str, object], key: str) -> object:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def hours(seconds: float | None) -> str:
    """GPU-seconds as GPU-hours, two decimals."""
    return "—" if seconds is None else f"{float(seconds) / 3600:.2f}"


@register.filter
def count(value: int | None) -> str:
    """A count with thousands separated: 12,345."""
    return "—" if value is None else f"{int(value):,}"
