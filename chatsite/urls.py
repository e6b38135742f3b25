from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from agents.views import admin_sign_in

urlpatterns = [
    # Before the admin's own: refused while password sign-in is off (agents/views.py).
    path("admin/login/", admin_sign_in),
    path("admin/", admin.site.urls),
    # The OpenAPI schema of the key API, then the key API itself (OpenAI's paths: /v1/…).
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/", include("agents.api.urls")),
    path("v1/", include("agents.api.v1_urls")),
    path("", include("agents.urls")),
]
