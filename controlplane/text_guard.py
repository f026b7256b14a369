"""Refuse a NUL character in a request's path, query string or form fields
before any view runs.

No name, slug or filter value of Berth's can hold one and PostgreSQL's text
columns cannot store one: passed through, it reaches the database driver as a
``DataError`` (a 500). It is refused here, once, with a 400 that says which
part of the request held it. JSON bodies are checked by the API's parser
(``queues.api.conventions.JSONParser``), which also names the field.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

NUL = "\x00"
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _shown(name: str) -> str:
    return name.replace(NUL, "\\x00")


def _where_nul(request: HttpRequest) -> tuple[str, str] | None:
    """The field holding a NUL and how to name it to a person; None if none does."""
    if NUL in request.path:  # already percent-decoded: %00 is a NUL here
        return "path", "path"
    sources = [("query parameter", request.GET)]
    # Under /api/ a form body is refused by the API itself (415, JSON only);
    # reading it here would hide it from the API and turn that into a 400.
    api = request.path.startswith("/api/")
    if request.method == "POST" and request.content_type in _FORM_TYPES and not api:
        sources.append(("form field", request.POST))
    for what, fields in sources:
        for name, values in fields.lists():
            if NUL in name or any(NUL in value for value in values):
                return _shown(name), f"{what} {_shown(name)!r}"
    return None


class RefuseNulCharacters:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        found = _where_nul(request)
        if found is None:
            return self.get_response(request)
        field, where = found
        message = f"the {where} holds a NUL character (\\x00), which no Berth name or text may"
        if request.path.startswith("/api/"):
            return JsonResponse(
                {
                    "detail": "Nothing was changed: 1 error in the request.",
                    "errors": [{"field": field, "rule": "nul-character", "message": message}],
                },
                status=400,
            )
        return HttpResponseBadRequest(f"Bad request: {message}.", content_type="text/plain")
