from django.urls import path
from django.views.i18n import JavaScriptCatalog

from agents import views

urlpatterns = [
    path("", views.chat, name="chat"),
    path("c/<int:conversation_id>/", views.chat, name="conversation"),
    path("c/new/", views.conversation_new, name="conversation_new"),
    path(
        "c/<int:conversation_id>/archive/", views.conversation_archive, name="conversation_archive"
    ),
    path("archived/", views.archived, name="archived"),
    # Browsers ask for /favicon.ico whatever the page names; the page's icon answers.
    path("favicon.ico", views.favicon, name="favicon"),
    # A token is URL-safe base64 (agents/models.py): anything else is no share, a 404.
    path("s/<slug:token>/", views.shared_conversation, name="shared_conversation"),
    path("accounts/login/", views.login_view, name="login"),
    path("accounts/logout/", views.logout_view, name="logout"),
    path("accounts/signup/", views.signup, name="signup"),
    path("accounts/password/", views.password_change, name="password_change"),
    path("accounts/password/done/", views.password_change_done, name="password_change_done"),
    path("preferences/", views.preferences, name="preferences"),
    path("account/api-keys/", views.api_keys, name="api_keys"),
    path(
        "account/api-keys/<int:key_id>/revoke/",
        views.api_key_revoke_view,
        name="api_key_revoke",
    ),
    # The strings of static/js/ in the page's language, loaded before the app's modules.
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    path("accounts/password-reset/", views.password_reset, name="password_reset"),
    path("accounts/password-reset/sent/", views.password_reset_done, name="password_reset_done"),
    path(
        "accounts/reset/<uidb64>/<token>/",
        views.password_reset_confirm,
        name="password_reset_confirm",
    ),
    path("accounts/reset/done/", views.password_reset_complete, name="password_reset_complete"),
]
