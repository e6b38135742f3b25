from django.urls import path
from django.views.i18n import JavaScriptCatalog

from agents import schedule_views, sso, views

urlpatterns = [
    path("", views.chat, name="chat"),
    path("c/<int:conversation_id>/", views.chat, name="conversation"),
    path("c/new/", views.conversation_new, name="conversation_new"),
    path(
        "c/<int:conversation_id>/archive/", views.conversation_archive, name="conversation_archive"
    ),
    path("archived/", views.archived, name="archived"),
    path("usage/", views.usage, name="usage"),
    # Browsers ask for /favicon.ico whatever the page names; the page's icon answers.
    path("favicon.ico", views.favicon, name="favicon"),
    # A token is URL-safe base64 (agents/models.py): anything else is no share, a 404.
    path("s/<slug:token>/", views.shared_conversation, name="shared_conversation"),
    path(
        "s/<slug:token>/files/<int:attachment_id>/",
        views.shared_attachment_file,
        name="shared_attachment_file",
    ),
    path("files/<int:attachment_id>/", views.attachment_file, name="attachment_file"),
    path("files/<int:attachment_id>/rows/", views.attachment_rows, name="attachment_rows"),
    path("accounts/login/", views.login_view, name="login"),
    path("accounts/logout/", views.logout_view, name="logout"),
    path("accounts/signup/", views.signup, name="signup"),
    # Single sign-on: 404 unless configured (agents/sso.py). The names are the library's.
    path("accounts/sso/start/", sso.sign_in_start, name="oidc_authentication_init"),
    path("accounts/sso/callback/", sso.sign_in_callback, name="oidc_authentication_callback"),
    path("accounts/password/", views.password_change, name="password_change"),
    path("accounts/password/done/", views.password_change_done, name="password_change_done"),
    path("preferences/", views.preferences, name="preferences"),
    path("preferences/instructions/", views.custom_instructions, name="custom_instructions"),
    # What the python tool's code saved, for the conversation's owner (agents/tools/sandbox.py).
    path("sandbox-files/<uuid:file_id>/<str:name>", views.sandbox_file, name="sandbox_file"),
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
    # Schedules, notifications and webhooks (agents/schedule_views.py).
    path("schedules/", schedule_views.schedules, name="schedules"),
    path("schedules/<int:schedule_id>/", schedule_views.schedule_edit, name="schedule_edit"),
    path(
        "schedules/<int:schedule_id>/<slug:action>/",
        schedule_views.schedule_action,
        name="schedule_action",
    ),
    path("notifications/", schedule_views.notifications, name="notifications"),
    path(
        "notifications/<int:notification_id>/open/",
        schedule_views.notification_open,
        name="notification_open",
    ),
    path("notifications/email/", schedule_views.notification_email, name="notification_email"),
    path("webhooks/", schedule_views.webhook_create, name="webhook_create"),
    path("webhooks/<int:webhook_id>/delete/", schedule_views.webhook_delete, name="webhook_delete"),
]
