"""What an ``OPTIONS`` request on an API route answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework.metadata import SimpleMetadata

if TYPE_CHECKING:  # DRF loads this class while rest_framework.views is being imported
    from rest_framework.request import Request
    from rest_framework.views import APIView


class RouteMetadata(SimpleMetadata):
    """The route's name, description, methods and media types, without DRF's description
    of a serializer's fields: most views build theirs from the request's objects, which an
    ``OPTIONS`` request does not name (it raised, and answered 500)."""

    def determine_metadata(self, request: Request, view: APIView) -> dict[str, Any]:
        return {
            "name": view.get_view_name(),
            "description": view.get_view_description(),
            "allowed_methods": list(view.allowed_methods),
            "renders": [renderer.media_type for renderer in view.renderer_classes],
            "parses": [parser.media_type for parser in view.parser_classes],
        }
