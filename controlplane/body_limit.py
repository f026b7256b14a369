"""Refuse an API request whose body is larger than Berth reads
(``DATA_UPLOAD_MAX_MEMORY_SIZE``) with a JSON 413, before anything reads it.

Left to Django, reading it raises RequestDataTooBig: an HTML 400 page for an
API client, and an ERROR with a traceback in the log for what is only a client
sending too much.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


class RefuseOversizedApiBodies:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        length = request.META.get("CONTENT_LENGTH") or ""
        if (
            request.path.startswith("/api/")
            and limit is not None
            and length.isdigit()
            and int(length) > limit
        ):
            return JsonResponse(
                {
                    "detail": f"The body is {length} bytes; at most {limit} are accepted.",
                    "rule": "body-too-large",
                },
                status=413,
            )
        return self.get_response(request)
