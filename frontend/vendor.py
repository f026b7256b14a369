"""plotly.js from the installed plotly package: the dashboard works on
air-gapped clusters, with no CDN. Gzipped once per process, cached by the
browser for a day under a versioned URL."""

from __future__ import annotations

import gzip
from functools import cache
from pathlib import Path

import plotly
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PLOTLY_VERSION = plotly.__version__


@cache
def _bodies() -> tuple[bytes, bytes]:
    raw = PLOTLY_JS.read_bytes()
    return raw, gzip.compress(raw, compresslevel=6, mtime=0)


@require_GET
def plotly_js(request: HttpRequest, version: str) -> HttpResponse:
    raw, packed = _bodies()
    zipped = "gzip" in request.headers.get("Accept-Encoding", "")
    response = HttpResponse(packed if zipped else raw, content_type="application/javascript")
    if zipped:
        response["Content-Encoding"] = "gzip"
    response["Vary"] = "Accept-Encoding"
    response["Cache-Control"] = "public, max-age=86400, immutable"
    return response
