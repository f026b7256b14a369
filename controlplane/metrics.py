"""``GET /metrics``: every app's figures in Prometheus' exposition format.

Each app has one collector that reads its own tables when Prometheus scrapes
(``queues.metrics``, ``cluster.metrics``, ``jobs.metrics``,
``approvals.metrics``); they are registered here at start-up, in one registry
of Berth's own (no process or Python figures, which a scrape of one web
worker would misreport). ``prometheus_client`` writes the format, the text
format 0.0.4 by default and OpenMetrics when the scraper asks for it.

Access: with ``BERTH_METRICS_TOKEN`` set, only ``Authorization: Bearer
<token>`` (401 otherwise). Without it, requests from loopback (not forwarded by
a proxy) and signed-in platform admins; anyone else gets 403 naming the setting.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric

from accounts.models import AccessDenial
from accounts.services import record_access_denial
from approvals.metrics import ApprovalsCollector
from cluster.fairness_metrics import FairnessCollector
from cluster.metrics import ClusterCollector
from jobs.metrics import JobsCollector
from queues.access import may_change_policy
from queues.metrics import ReconcileCollector


class Registry(CollectorRegistry):
    """Families in the order of their written names, whichever app they come
    from, so that two scrapes read alike."""

    def collect(self) -> Iterator[Metric]:
        def written(family: Metric) -> str:
            return family.name + ("_total" if family.type == "counter" else "")

        return iter(sorted(super().collect(), key=written))


# auto_describe off: registering must not query the database.
REGISTRY = Registry(auto_describe=False)
for collector in (ClusterCollector(), JobsCollector(), ReconcileCollector(), ApprovalsCollector()):
    REGISTRY.register(collector)
# Fair shares (cluster.fairness_metrics): figures the beat task keeps.
REGISTRY.register(FairnessCollector())


FORBIDDEN_TEXT = (
    "403 Forbidden: /metrics answers loopback and signed-in platform admins only; "
    "set BERTH_METRICS_TOKEN and scrape with Authorization: Bearer <token>\n"
)
UNAUTHORIZED_TEXT = "401 Unauthorized: send Authorization: Bearer <BERTH_METRICS_TOKEN>\n"


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, credentials = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


def from_loopback(request: HttpRequest) -> bool:
    """A request from this machine, not forwarded by a proxy (behind a proxy on
    the same host every request comes from loopback; the proxy's forwarding
    header gives it away)."""
    if request.META.get("HTTP_X_FORWARDED_FOR") or request.META.get("HTTP_FORWARDED"):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _text(body: str, status: int) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="text/plain; charset=utf-8")


def refusal(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read /metrics, else the answer (recorded in
    the access log like every refused attempt)."""
    token: str = settings.BERTH_METRICS_TOKEN
    if token:
        given = _bearer(request)
        if given is not None and hmac.compare_digest(given.encode(), token.encode()):
            return None
        reason = (
            AccessDenial.Reason.NOT_AUTHENTICATED
            if given is None
            else AccessDenial.Reason.BAD_CREDENTIALS
        )
        record_access_denial(request, reason=reason, detail="/metrics: no valid metrics token")
        response = _text(UNAUTHORIZED_TEXT, 401)
        response["WWW-Authenticate"] = 'Bearer realm="berth-metrics"'
        return response
    if from_loopback(request) or may_change_policy(getattr(request, "user", None)):
        return None
    record_access_denial(
        request,
        reason=AccessDenial.Reason.FORBIDDEN,
        detail="/metrics: not loopback, not a platform admin, no BERTH_METRICS_TOKEN set",
    )
    return _text(FORBIDDEN_TEXT, 403)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus scrape endpoint; see the module docstring for who may read it."""
    refused = refusal(request)
    if refused is not None:
        return refused
    encode, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
    response = HttpResponse(encode(REGISTRY), content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
