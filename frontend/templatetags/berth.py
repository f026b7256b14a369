"""Template filters for the dashboard: durations, quantities in Kubernetes
notation, relative times with the absolute one on hover."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from queues.quantity import format_readable

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """4 s, 3 min 20 s, 2 h 5 min, 3 d 4 h; an em dash for unknown."""
    if seconds is None:
        return "—"
    seconds = max(0, round(float(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs and minutes < 10 else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


@register.filter
def quantity(amount: int | None, resource: str) -> str:
    """A canonical amount as people read it: Kubernetes notation when short,
    else three significant digits (GPUs and counts stay plain)."""
    if amount is None:
        return "—"
    return format_readable(resource, int(amount))


@register.filter
def reltime(moment: datetime | None) -> SafeString | str:
    """<time> with "5 min ago" (or "in 5 min") and the UTC timestamp on hover."""
    if moment is None:
        return "—"
    now = timezone.now()
    delta = (now - moment).total_seconds()
    words = f"{duration(abs(delta))} ago" if delta >= 0 else f"in {duration(-delta)}"
    if abs(delta) < 5:
        words = "just now"
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return format_html('<time datetime="{}" title="{}">{}</time>', moment.isoformat(), stamp, words)


@register.filter
def get(mapping: dict[str, object], key: str) -> object:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def hours(seconds: float | None) -> str:
    """GPU-seconds as GPU-hours, two decimals."""
    return "—" if seconds is None else f"{float(seconds) / 3600:.2f}"
