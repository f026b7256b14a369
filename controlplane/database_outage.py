"""A database that does not answer is a 503 with Retry-After, not a 500.

When PostgreSQL restarts, fails over or drops connections, the queries of the
requests in flight fail with ``OperationalError`` (or ``InterfaceError`` on a
connection already closed). That is Berth being unavailable for a moment, not
Berth being wrong: clients and load balancers should try again, so the answer
says so (JSON under ``/api/``, a short page elsewhere) and logs one line, not an
ERROR with a traceback. Nothing needs restarting afterwards: Django drops a
connection that failed at the end of the request, and the next request opens a
new one (``CONN_HEALTH_CHECKS``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.html import escape

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
MESSAGE = "Berth's database is not answering right now; try again in a few seconds."
# The database may have stopped answering after the change was committed (the
# answer is built after the commit), so a client must not take a 503 for "not stored".
MAY_BE_STORED = " The change may have been stored before it stopped: look before sending it again."
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Berth is unavailable</title></head>
<body><h1>Berth is unavailable for a moment</h1>
<p>{message}</p></body></html>
"""


class AnswerDatabaseOutages:
    """Turns a database error that escaped a view into a 503. Rendered pages
    included: Django passes errors raised while rendering a template response
    to ``process_exception`` as well."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        log.warning(
            "%s %s: the database did not answer (%s); answered 503",
            request.method,
            request.path,
            str(exception).strip().splitlines()[0] if str(exception).strip() else "no message",
        )
        message = MESSAGE if request.method in SAFE_METHODS else MESSAGE + MAY_BE_STORED
        response: HttpResponse
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": message, "rule": "database-unavailable"}, status=503)
        else:
            response = HttpResponse(
                PAGE.format(message=escape(message)),
                status=503,
                content_type="text/html; charset=utf-8",
            )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        # One line per request, the one above with the cause: Django's request
        # logger would add an ERROR "Service Unavailable" line for every 5xx.
        response._has_been_logged = True  # type: ignore[attr-defined]
        return response
