"""The JSON API under /api/ (docs/protocol.md, "HTTP API")."""

from django.urls import path

from agents.api import v1_schedules, views

app_name = "api"

urlpatterns = [
    path("conversations/", views.ConversationCollectionView.as_view(), name="conversations"),
    path("conversations/bulk/", views.ConversationBulkView.as_view(), name="conversations-bulk"),
    path("folders/", views.FolderCollectionView.as_view(), name="folders"),
    path("folders/<int:folder_id>/", views.FolderItemView.as_view(), name="folder"),
    path(
        "conversations/<int:conversation_id>/",
        views.ConversationItemView.as_view(),
        name="conversation",
    ),
    path(
        "conversations/<int:conversation_id>/messages/",
        views.ConversationMessagesView.as_view(),
        name="conversation-messages",
    ),
    path(
        "conversations/<int:conversation_id>/regenerate/",
        views.ConversationRegenerateView.as_view(),
        name="conversation-regenerate",
    ),
    path(
        "conversations/<int:conversation_id>/branch/",
        views.ConversationBranchView.as_view(),
        name="conversation-branch",
    ),
    path(
        "conversations/<int:conversation_id>/compact/",
        views.ConversationCompactView.as_view(),
        name="conversation-compact",
    ),
    path(
        "conversations/<int:conversation_id>/pin/",
        views.ConversationPinView.as_view(),
        name="conversation-pin",
    ),
    path(
        "conversations/<int:conversation_id>/export/",
        views.ConversationExportView.as_view(),
        name="conversation-export",
    ),
    path(
        "conversations/<int:conversation_id>/share/",
        views.ConversationShareView.as_view(),
        name="conversation-share",
    ),
    path("messages/<int:message_id>/edit/", views.MessageEditView.as_view(), name="message-edit"),
    path(
        "messages/<int:message_id>/continue/",
        views.MessageContinueView.as_view(),
        name="message-continue",
    ),
    path(
        "messages/<int:message_id>/feedback/",
        views.MessageFeedbackView.as_view(),
        name="message-feedback",
    ),
    path("runs/<int:run_id>/cancel/", views.RunCancelView.as_view(), name="run-cancel"),
    path("runs/<int:run_id>/continue/", views.RunContinueView.as_view(), name="run-continue"),
    path("runs/<int:run_id>/fork/", views.RunForkView.as_view(), name="run-fork"),
    path(
        "approvals/<int:approval_id>/decide/",
        views.ApprovalDecideView.as_view(),
        name="approval-decide",
    ),
    path("profiles/", views.ProfileListView.as_view(), name="profiles"),
    # The key API's schedules (/v1/schedules), here for the site's own session.
    path(
        "schedules/",
        v1_schedules.ScheduleCollectionView.as_view(**v1_schedules.SESSION_ONLY),
        name="schedules",
    ),
    path(
        "schedules/<int:schedule_id>/",
        v1_schedules.ScheduleItemView.as_view(**v1_schedules.SESSION_ONLY),
        name="schedule",
    ),
    path(
        "schedules/<int:schedule_id>/run/",
        v1_schedules.ScheduleRunView.as_view(**v1_schedules.SESSION_ONLY),
        name="schedule-run",
    ),
    path(
        "conversations/<int:conversation_id>/attachments/",
        views.ConversationAttachmentsView.as_view(),
        name="conversation-attachments",
    ),
    path("attachments/<int:attachment_id>/", views.AttachmentItemView.as_view(), name="attachment"),
]
