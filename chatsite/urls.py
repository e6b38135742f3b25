from django.contrib import admin
from django.urls import include, path

from agents.views import admin_sign_in

urlpatterns = [
    # Before the admin's own: refused while password sign-in is off (agents/views.py).
    path("admin/login/", admin_sign_in),
    path("admin/", admin.site.urls),
    path("api/", include("agents.api.urls")),
    path("", include("agents.urls")),
]
