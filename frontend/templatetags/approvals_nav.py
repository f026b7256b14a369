"""``{% approvals_summary as s %}``: what the nav badge says about approvals
(the inbox exists for this user; how many requests wait for their decision),
worked out once per request."""

from __future__ import annotations

from typing import Any

from django import template

from frontend.views.approvals import NOTHING, Summary, summary_for

register = template.Library()


@register.simple_tag(takes_context=True)
def approvals_summary(context: dict[str, Any]) -> Summary:
    request = context.get("request")
    return summary_for(request) if request is not None else NOTHING
