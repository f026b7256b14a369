"""What every dashboard page shares: who may see what, the page context
(navigation, live updates, plotly), pagination and sorting of tables."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.roles import is_platform_admin
from frontend.vendor import PLOTLY_VERSION

T = TypeVar("T")
PAGE_SIZE = 50


def page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    nav: str,
    live: bool = True,
    charts: bool = False,
) -> HttpResponse:
    """Render a dashboard page. ``live`` pages poll themselves every 2 s."""
    return render(
        request,
        template,
        {
            **context,
            "nav": nav,
            "live": live,
            "charts": charts,
            "plotly_version": PLOTLY_VERSION,
            "is_admin": is_platform_admin(request.user),
        },
    )


def sorted_rows(
    request: HttpRequest,
    rows: Sequence[T],
    keys: dict[str, Callable[[T], Any]],
    default: str,
) -> tuple[list[T], str]:
    """Rows sorted by ``?sort=key`` or ``?sort=-key`` (one of ``keys``); unknown
    keys fall back to ``default``. None sorts last either way."""
    wanted = request.GET.get("sort", default)
    name = wanted.lstrip("-")
    if name not in keys:
        wanted, name = default, default.lstrip("-")
    key = keys[name]
    present = [r for r in rows if key(r) is not None]
    missing = [r for r in rows if key(r) is None]
    present.sort(key=key, reverse=wanted.startswith("-"))
    return present + missing, wanted


def paginate(request: HttpRequest, items: Any, size: int = PAGE_SIZE) -> Page[Any]:
    return Paginator(items, size).get_page(request.GET.get("page"))


def query_without(request: HttpRequest, *names: str) -> str:
    """The current query string without ``names`` (for sort and page links)."""
    params = request.GET.copy()
    for name in names:
        params.pop(name, None)
    encoded = params.urlencode()
    return f"{encoded}&" if encoded else ""
