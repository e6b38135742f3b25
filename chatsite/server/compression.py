"""Pages and API answers compressed on the way out; streams left as they are.

Django's ``GZipMiddleware`` pads each compressed body with random bytes, which with the
masked CSRF token keeps BREACH from reading secrets off the compressed length. A streamed
response (a run's live log in the admin, a profile's try-out, an export) is not compressed:
gzip holds back what it has not filled a block with, and a live event would wait for the
next. Static files are compressed once at ``collectstatic`` and served by whitenoise.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware


class PageCompressionMiddleware(GZipMiddleware):
    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if response.streaming:
            return response
        return super().process_response(request, response)
