"""API plumbing shared by every app: pagination and one error format.

Every refused request answers with ``{"detail": ..., "errors": [{"field",
"rule", "message"}]}`` for bad input (400), ``{"detail", "rule", "references"}``
for conflicts (409/412), and DRF's ``{"detail"}`` otherwise. Field paths look
like ``resource_groups[0].flavors[1].resources[0].lending_limit``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import ProtectedError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from django.views.defaults import server_error as django_server_error
from rest_framework import exceptions, parsers, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from accounts.models import AccessDenial
from accounts.services import record_access_denial
from queues.errors import FieldError, HiddenRefusal, PolicyConflict, PolicyInvalid
from queues.services import StaleRevision


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, with absurdly nested input refused as a parse error
    (Python's json module would otherwise hit the recursion limit: a 500), and
    text no Berth field may hold refused with the field named (see
    ``text_errors``)."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deeply") from None
        errors = text_errors(data)
        if errors:
            raise PolicyInvalid(errors)
        return data


def _unfit_text(text: str) -> str | None:
    if "\x00" in text:
        return "holds a NUL character (\\x00), which PostgreSQL cannot store"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds an unpaired surrogate (e.g. \\ud800), which is not a character"
    return None


def _shown(text: str) -> str:
    """The text quoted with what cannot be shown escaped: ``'\\ud800'``."""
    escaped = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "'" + escaped.replace("\x00", "\\x00") + "'"


def text_errors(data: Any, path: str = "") -> list[FieldError]:
    """Every string in a JSON body, key or value, that no field may hold: a NUL
    character or an unpaired surrogate (JSON's ``"\\ud800"``), which would
    otherwise fail in the database or when the answer is encoded."""
    errors: list[FieldError] = []
    if isinstance(data, str):
        problem = _unfit_text(data)
        if problem:
            errors.append(FieldError(path or "body", "invalid-text", f"the text {problem}"))
    elif isinstance(data, dict):
        for key, value in data.items():
            problem = _unfit_text(key)
            if problem:
                errors.append(
                    FieldError(path or "body", "invalid-text", f"the key {_shown(key)} {problem}")
                )
                continue
            errors.extend(text_errors(value, f"{path}.{key}" if path else key))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            errors.extend(text_errors(item, f"{path}[{index}]"))
    return errors


class ContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, with a ``?format=`` the endpoint does not have (empty,
    repeated, unknown) a 400 naming the formats it has. DRF answers 404, as if
    the endpoint were missing, or ignores an empty one."""

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        asked = request.query_params.getlist(self.settings.URL_FORMAT_OVERRIDE)
        known = sorted({renderer.format for renderer in renderers})
        if format_suffix is None and asked and (len(asked) > 1 or asked[0] not in known):
            raise _unknown_format(asked[0] if len(asked) == 1 else asked, known)
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except Http404:
            raise _unknown_format(format_suffix, known) from None


def _unknown_format(asked: Any, known: list[str]) -> exceptions.ValidationError:
    message = f"{asked!r} is not a format of this endpoint: use one of {', '.join(known)}"
    return exceptions.ValidationError({"format": [message]})


class Pagination(PageNumberPagination):
    """Page numbers from 1 and page sizes from 1 to 500, read strictly: a
    malformed ``page`` or ``page_size`` is a 400 naming it (DRF would fall back
    to the default size, or answer 404). A page past the last is still 404."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def _whole_number(self, request: Any, name: str, maximum: int | None) -> int | None:
        values = request.query_params.getlist(name)
        if not values:
            return None
        if len(values) > 1:
            raise exceptions.ValidationError(
                {name: [f"is given {len(values)} times: give it once"]}
            )
        value = values[0].strip()
        bound = f" and at most {maximum}" if maximum else ""
        if not value.isdigit() or not 1 <= int(value) <= (maximum or int(value)):
            raise exceptions.ValidationError(
                {name: [f"must be a whole number of at least 1{bound}, not {values[0]!r}"]}
            )
        return int(value)

    def get_page_size(self, request: Any) -> int:
        size = self._whole_number(request, self.page_size_query_param, self.max_page_size)
        return size if size is not None else self.page_size

    def check_query(self, request: Any) -> None:
        """Refuse a malformed ``page`` or ``page_size`` (for answers that are
        not paged, such as a CSV export, as for those that are)."""
        self._whole_number(request, self.page_query_param, None)
        self.get_page_size(request)

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> Any:
        self.check_query(request)
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {self.page_query_param: {"minimum": 1}}
        bounds[self.page_size_query_param] = {"minimum": 1, "maximum": self.max_page_size}
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters


def flatten_errors(detail: Any, path: str = "") -> list[FieldError]:
    """DRF's nested error structure as a flat list of field paths."""
    if isinstance(detail, dict):
        result: list[FieldError] = []
        for key, value in detail.items():
            if isinstance(key, int):
                child = f"{path}[{key}]"
            elif key == "non_field_errors":
                child = path
            else:
                child = f"{path}.{key}" if path else str(key)
            result.extend(flatten_errors(value, child))
        return result
    if isinstance(detail, list):
        if all(isinstance(item, str) for item in detail):
            return [
                FieldError(
                    path or "non_field_errors",
                    getattr(item, "code", "invalid") or "invalid",
                    str(item),
                )
                for item in detail
            ]
        result = []
        for index, item in enumerate(detail):
            if item:
                result.extend(flatten_errors(item, f"{path}[{index}]"))
        return result
    return [
        FieldError(
            path or "non_field_errors", getattr(detail, "code", "invalid") or "invalid", str(detail)
        )
    ]


def invalid_response(errors: list[FieldError]) -> Response:
    noun = "error" if len(errors) == 1 else "errors"
    return Response(
        {
            "detail": f"Nothing was changed: {len(errors)} {noun} in the request.",
            "errors": [error.as_dict() for error in errors],
        },
        status=status.HTTP_400_BAD_REQUEST,
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    request = context.get("request")
    if isinstance(exc, HiddenRefusal) and request is not None:
        record_access_denial(request, reason=AccessDenial.Reason.FORBIDDEN, detail=exc.denial)
    if isinstance(exc, PolicyInvalid):
        return invalid_response(exc.errors)
    if isinstance(exc, PolicyConflict):
        code = (
            status.HTTP_412_PRECONDITION_FAILED
            if isinstance(exc, StaleRevision)
            else status.HTTP_409_CONFLICT
        )
        return Response(
            {"detail": exc.message, "rule": exc.rule, "references": exc.references}, status=code
        )
    if isinstance(exc, ProtectedError):
        return Response(
            {
                "detail": "The object is still referenced; remove the references first.",
                "rule": "in-use",
                "references": {},
            },
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, exceptions.ValidationError):
        return invalid_response(flatten_errors(exc.detail))
    if isinstance(exc, exceptions.ParseError):
        return invalid_response([FieldError("body", "parse-error", str(exc.detail))])
    if request is not None and isinstance(
        exc,
        exceptions.NotAuthenticated | exceptions.AuthenticationFailed | exceptions.PermissionDenied,
    ):
        reason = {
            exceptions.NotAuthenticated: AccessDenial.Reason.NOT_AUTHENTICATED,
            exceptions.AuthenticationFailed: AccessDenial.Reason.BAD_CREDENTIALS,
        }.get(type(exc), AccessDenial.Reason.FORBIDDEN)
        record_access_denial(request, reason=reason, detail=str(exc.detail))
    return drf_exception_handler(exc, context)


def _wants_json(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 as JSON under /api/ (clients parse it), Django's page elsewhere."""
    if _wants_json(request):
        return JsonResponse(
            {"detail": f"No API endpoint at {request.path}; see /api/schema/ for the list."},
            status=404,
        )
    return page_not_found(request, exception or Exception("not found"))


def server_error(request: HttpRequest) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse(
            {"detail": "Berth failed to answer this request; the error is in its log."},
            status=500,
        )
    return django_server_error(request)
