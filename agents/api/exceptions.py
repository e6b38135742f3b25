"""Every error of the JSON API as ``{"code", "message"}`` (docs/protocol.md, "HTTP API").

Registered as Django REST framework's ``EXCEPTION_HANDLER``, so a view raises and never
builds an error response itself: the same shape as the socket's ``error`` frame.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.utils.translation import gettext as _
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler

from agents.protocol import RefusalCode, RequestRefused

# Refusals the user fixes by waiting rather than by changing the request.
TOO_MANY_REQUESTS_CODES = frozenset(
    {RefusalCode.RATE_LIMITED, RefusalCode.QUOTA_EXCEEDED, RefusalCode.MONTHLY_BUDGET_REACHED}
)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RequestRefused):
        body: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.field is not None:
            body["fields"] = {exc.field: [exc.message]}
        return Response(body, status=refusal_status(exc.code))
    if isinstance(exc, RequestDataTooBig):
        # Django would answer with a bare HTML 400; a JSON client deserves the reason.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {
                "code": "request_too_large",
                "message": _("The request body is over %(limit)s bytes.") % {"limit": limit},
            },
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    response = exception_handler(exc, context)
    if response is None or not isinstance(exc, APIException):
        return response
    if isinstance(exc, ValidationError):
        response.data = {
            "code": "invalid",
            "message": _("The request has invalid fields."),
            "fields": exc.detail,
        }
    else:
        codes = exc.get_codes()
        response.data = {
            "code": codes if isinstance(codes, str) else exc.default_code,
            "message": str(exc.detail),
        }
    return response


def refusal_status(code: RefusalCode) -> int:
    if code == RefusalCode.NOT_FOUND:
        return status.HTTP_404_NOT_FOUND
    if code == RefusalCode.FILE_TOO_LARGE:
        return status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    if code in TOO_MANY_REQUESTS_CODES:
        return status.HTTP_429_TOO_MANY_REQUESTS
    return status.HTTP_400_BAD_REQUEST
