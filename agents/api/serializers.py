"""Shapes of the JSON API: output serializers for models, input serializers for requests.

Output serializers only read; every write goes through a service in the view.
"""

from __future__ import annotations

from django.urls import reverse
from django.utils.translation import gettext as _
from rest_framework import serializers

from agents import selectors
from agents.models import (
    AgentProfile,
    AgentRun,
    AnswerFeedback,
    Attachment,
    Conversation,
    ConversationFolder,
    ConversationShare,
    Message,
)
from agents.protocol import CLIENT_ID_MAX_CHARS
from agents.services.conversations import BULK_MAX_CONVERSATIONS
from agents.snippets import snippet_segments


class MessageSerializer(serializers.ModelSerializer):
    run_id = serializers.IntegerField(read_only=True, allow_null=True)
    parent_id = serializers.IntegerField(read_only=True, allow_null=True)

    class Meta:
        model = Message
        fields = [
            "id",
            "role",
            "content",
            "client_id",
            "run_id",
            "parent_id",
            "on_active_branch",
            "created_at",
        ]
        read_only_fields = fields


class RunSerializer(serializers.ModelSerializer):
    conversation_id = serializers.IntegerField(read_only=True)
    trigger_message_id = serializers.IntegerField(read_only=True)
    continues_answer_id = serializers.IntegerField(read_only=True, allow_null=True)

    class Meta:
        model = AgentRun
        fields = [
            "id",
            "conversation_id",
            "trigger_message_id",
            "continues_answer_id",
            "status",
            "model_name",
            "mode",
            "attempts",
            "prompt_tokens",
            "completion_tokens",
            "error_code",
            "error_message",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class ConversationSerializer(serializers.ModelSerializer):
    profile: serializers.SlugRelatedField[AgentProfile] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )

    pinned = serializers.SerializerMethodField()
    active_leaf_id = serializers.IntegerField(read_only=True, allow_null=True)
    folder_id = serializers.IntegerField(read_only=True, allow_null=True)
    has_active_run = serializers.SerializerMethodField()
    snippet = serializers.SerializerMethodField()

    class Meta:
        model = Conversation
        fields = [
            "id",
            "title",
            "profile",
            "archived",
            "pinned",
            "pinned_at",
            "folder_id",
            "has_active_run",
            "snippet",
            "last_seq",
            "active_leaf_id",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_pinned(self, conversation: Conversation) -> bool:
        return conversation.pinned_at is not None

    def get_has_active_run(self, conversation: Conversation) -> bool:
        # The list annotates it (one query per page); a single conversation asks once.
        annotated = getattr(conversation, "has_active_run", None)
        if annotated is not None:
            return bool(annotated)
        return selectors.conversation_has_active_run(conversation=conversation)

    def get_snippet(self, conversation: Conversation) -> list[dict[str, object]] | None:
        """Search results only: where the newest matching message matched, as segments."""
        query = self.context.get("q", "")
        return snippet_segments(getattr(conversation, "match_excerpt", None), query)


class FolderSerializer(serializers.ModelSerializer):
    class Meta:
        model = ConversationFolder
        fields = ["id", "name", "created_at"]
        read_only_fields = fields


class ProfileSerializer(serializers.ModelSerializer):
    class Meta:
        model = AgentProfile
        fields = ["slug", "name", "description", "mode", "is_default"]
        read_only_fields = fields


class FeedbackSerializer(serializers.ModelSerializer):
    message_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = AnswerFeedback
        fields = ["message_id", "rating", "comment", "updated_at"]
        read_only_fields = fields


class ShareSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()

    class Meta:
        model = ConversationShare
        fields = ["token", "url", "created_at"]
        read_only_fields = fields

    def get_url(self, share: ConversationShare) -> str:
        path = reverse("shared_conversation", args=[share.token])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class AttachmentSerializer(serializers.ModelSerializer):
    """A file attached to a conversation: what its chip shows, and where its bytes are."""

    url = serializers.SerializerMethodField()
    rows_url = serializers.SerializerMethodField()

    class Meta:
        model = Attachment
        fields = [
            "id", "conversation_id", "name", "kind", "size", "state", "error", "parts", "url",
            "rows_url", "created_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_url(self, attachment: Attachment) -> str:
        return reverse("attachment_file", args=[attachment.pk])

    def get_rows_url(self, attachment: Attachment) -> str | None:
        """A table's rows page, where a citation of a row opens (``?row=12``)."""
        if attachment.kind not in ("csv", "xlsx"):
            return None
        return reverse("attachment_rows", args=[attachment.pk])


# ---- input ------------------------------------------------------------------------------


class ConversationCreateInput(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    profile = serializers.SlugField(required=False, allow_null=True, default=None)


class ConversationUpdateInput(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)
    archived = serializers.BooleanField(required=False)
    # The folder to file it in (one of the user's), or null to take it out of its folder.
    folder = serializers.IntegerField(min_value=1, required=False, allow_null=True)

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError(_("Send 'title', 'archived', 'folder' or several."))
        return attrs


class FolderInput(serializers.Serializer):
    # Its length and emptiness are the service's to judge (agents/services/folders.py).
    name = serializers.CharField(trim_whitespace=False, allow_blank=True, max_length=1000)


class ConversationBulkInput(serializers.Serializer):
    action = serializers.ChoiceField(choices=["archive", "unarchive", "delete"])
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        min_length=1,
        max_length=BULK_MAX_CONVERSATIONS,
    )


class ContentInput(serializers.Serializer):
    # Whitespace is kept as typed; emptiness and length get their own error codes in the view.
    content = serializers.CharField(trim_whitespace=False, allow_blank=True)
    client_id = serializers.CharField(
        max_length=CLIENT_ID_MAX_CHARS, required=False, allow_null=True, default=None
    )


class MessageSendInput(ContentInput):
    profile = serializers.SlugField(required=False, allow_null=True, default=None)
    # The message the new one follows (the end of the branch the client shows); without it,
    # the conversation's active branch.
    parent_id = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)


class BranchSwitchInput(serializers.Serializer):
    message_id = serializers.IntegerField(min_value=1)


class RunForkInput(serializers.Serializer):
    step_seq = serializers.IntegerField(min_value=1)


class FeedbackInput(serializers.Serializer):
    rating = serializers.ChoiceField(choices=AnswerFeedback.Rating.choices)
    comment = serializers.CharField(
        max_length=AnswerFeedback.COMMENT_MAX_CHARS, required=False, allow_blank=True, default=""
    )
