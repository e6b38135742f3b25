"""The site's URLs plus two views that fail, to see the CSP on Django's own error pages."""

from django.core.exceptions import PermissionDenied
from django.urls import path

from chatsite.urls import urlpatterns as site_urlpatterns


def _crash(request):
    raise RuntimeError("a bug in a view")


def _forbidden(request):
    raise PermissionDenied


urlpatterns = [
    path("test-crash/", _crash),
    path("test-forbidden/", _forbidden),
    *site_urlpatterns,
]
