"""Shapes of the key API under /v1/ (docs/protocol.md, "API keys and /v1/").

Input serializers check requests; output serializers describe what the views build, for the
OpenAPI schema (drf-spectacular), and are what schemathesis checks every response against.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from rest_framework import serializers

from agents.models import Schedule
from agents.protocol import CLIENT_ID_MAX_CHARS

ROLES = ("system", "developer", "user", "assistant", "tool")


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    # Declared fields leave the class body (DRF's metaclass), so this does not shadow
    # Serializer.fields at run time.
    fields = serializers.DictField(required=False)  # type: ignore[assignment]


# ---- requests --------------------------------------------------------------------------


class ChatMessageInput(serializers.Serializer):
    role = serializers.ChoiceField(choices=ROLES)
    # A string, or OpenAI's list of parts ({"type": "text", "text": ...}); null for a call.
    content = serializers.JSONField(required=False, allow_null=True)
    name = serializers.CharField(required=False)


class ChatCompletionInput(serializers.Serializer):
    model = serializers.CharField(
        max_length=50, help_text="An agent profile's slug (GET /v1/models)."
    )
    messages = ChatMessageInput(many=True, allow_empty=False)
    stream = serializers.BooleanField(required=False, default=False)
    conversation_id = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Continue this conversation (chatsite's extension); absent: a new one.",
    )
    user = serializers.CharField(required=False, max_length=CLIENT_ID_MAX_CHARS)


class RunStartInput(serializers.Serializer):
    model = serializers.CharField(max_length=50, help_text="An agent profile's slug.")
    input = serializers.CharField(help_text="The question.", trim_whitespace=False)
    conversation_id = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    client_id = serializers.CharField(
        required=False,
        max_length=CLIENT_ID_MAX_CHARS,
        help_text="Repeat a start safely: the same client_id in the same conversation "
        "answers the run it started.",
    )


class ApprovalDecideInput(serializers.Serializer):
    approve = serializers.BooleanField()
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class EventsQuery(serializers.Serializer):
    after_seq = serializers.IntegerField(required=False, min_value=0, default=0)


# ---- responses -------------------------------------------------------------------------


class ModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(default="model")
    created = serializers.IntegerField()
    owned_by = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)


class ModelListSerializer(serializers.Serializer):
    object = serializers.CharField(default="list")
    data = ModelSerializer(many=True)  # type: ignore[assignment]  # as ``fields`` above


class UsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class ApprovalSerializer(serializers.Serializer):
    approval_id = serializers.IntegerField()
    call_id = serializers.CharField()
    tool = serializers.CharField()
    tool_input = serializers.JSONField()
    requested_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    decide_url = serializers.URLField()


class RunErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField(allow_blank=True)


class RunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    object = serializers.CharField(default="run")
    conversation_id = serializers.IntegerField()
    model = serializers.CharField(allow_blank=True)
    status = serializers.CharField()
    question = serializers.CharField(allow_blank=True)
    answer = serializers.CharField(allow_null=True)
    steps = serializers.ListField(child=serializers.DictField())
    pending_approvals = ApprovalSerializer(many=True)
    usage = UsageSerializer()
    error = RunErrorSerializer(allow_null=True)
    last_seq = serializers.IntegerField(
        help_text="The conversation's last event seq when this was read: "
        "GET …/events?after_seq= continues from it."
    )
    events_url = serializers.URLField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class ChatsiteExtension(serializers.Serializer):
    """chatsite's own part of a completion or a chunk; ordinary OpenAI clients ignore it."""

    conversation_id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    status = serializers.CharField()
    steps = serializers.ListField(child=serializers.DictField(), required=False)
    event = serializers.DictField(required=False, help_text="A chunk's stored frame.")
    pending_approvals = ApprovalSerializer(many=True, required=False)
    error = RunErrorSerializer(required=False)
    run_url = serializers.URLField()


class CompletionMessageSerializer(serializers.Serializer):
    role = serializers.CharField()
    content = serializers.CharField(allow_blank=True)


class CompletionChoiceSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    message = CompletionMessageSerializer()
    finish_reason = serializers.CharField(
        help_text="stop, or chatsite's: approval_required, budget_reached, cancelled, error."
    )


class ChatCompletionSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(default="chat.completion")
    created = serializers.IntegerField()
    model = serializers.CharField()
    choices = CompletionChoiceSerializer(many=True)
    usage = UsageSerializer()
    conversation_id = serializers.IntegerField()
    chatsite = ChatsiteExtension()


class DecisionSerializer(serializers.Serializer):
    approval = serializers.DictField()
    run = RunSerializer()


def message_text(content: Any) -> str | None:
    """A message's text: a string, or the text parts of OpenAI's list of parts joined; None
    if it has none."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[Any] = [
            part.get("text")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
        if texts and all(isinstance(text, str) for text in texts):
            return "\n".join(texts)
    return None


def unsupported_part() -> str:
    return _("Only text content is understood: a string, or parts of type 'text'.")


# ---- schedules (agents/api/v1_schedules.py) --------------------------------------------


class WallClockDateTimeField(serializers.DateTimeField):
    """A date and time kept naive when sent without an offset: the view reads it on the
    clock of the schedule's own time zone, not the server's."""

    def enforce_timezone(self, value: Any) -> Any:
        if value.tzinfo is None:
            return value
        return super().enforce_timezone(value)


class ScheduleInput(serializers.Serializer):
    """What a schedule is made of; the service (agents/services/schedules.py) judges the
    values, and a refusal names the field it is about."""

    agent = serializers.CharField(max_length=50, help_text="An agent's slug (GET /v1/models).")
    title = serializers.CharField()
    prompt = serializers.CharField(trim_whitespace=False)
    rrule = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=True,
        help_text="An RFC 5545 RRULE, e.g. FREQ=WEEKLY;BYDAY=MO,WE. Empty: once, at starts_at.",
    )
    starts_at = WallClockDateTimeField(
        help_text="The first time (the RRULE's DTSTART). Without an offset: on the clock of "
        "time_zone."
    )
    time_zone = serializers.CharField(
        required=False, default="UTC", help_text="An IANA time zone the rule steps in."
    )
    conversation_mode = serializers.ChoiceField(
        choices=Schedule.ConversationMode.values,
        required=False,
        default=Schedule.ConversationMode.NEW,
        help_text="new: a conversation per firing; append: the same one each time.",
    )
    budget_steps = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="Null: the agent's own."
    )
    approval_expires_after = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Seconds after which a tool call waiting for approval is declined; null: "
        "the site's own expiry.",
    )


class ScheduleChangeInput(ScheduleInput):
    """Any of a schedule's fields (the rest stay), and ``paused``."""

    paused = serializers.BooleanField(
        required=False,
        help_text="true pauses it; false resumes it from now on (what fell due while it was "
        "paused is not fired late).",
    )


class ScheduleSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    object = serializers.CharField(default="schedule")
    agent = serializers.CharField()
    title = serializers.CharField()
    prompt = serializers.CharField(allow_blank=True)
    rrule = serializers.CharField(allow_blank=True)
    starts_at = serializers.DateTimeField(help_text="In the schedule's time zone.")
    time_zone = serializers.CharField()
    description = serializers.CharField(help_text="When it fires, in words.")
    conversation_mode = serializers.CharField()
    conversation_id = serializers.IntegerField(
        allow_null=True, help_text="The conversation it appends to (append mode)."
    )
    budget_steps = serializers.IntegerField(allow_null=True)
    approval_expires_after = serializers.IntegerField(allow_null=True)
    next_fire_at = serializers.DateTimeField(
        allow_null=True, help_text="Null once it will not fire again."
    )
    paused = serializers.BooleanField()
    paused_at = serializers.DateTimeField(allow_null=True)
    paused_reason = serializers.CharField(allow_blank=True)
    failures_in_a_row = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ScheduleListSerializer(serializers.Serializer):
    object = serializers.CharField(default="list")
    data = ScheduleSerializer(many=True)  # type: ignore[assignment]  # as ``fields`` above


class FiringSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    object = serializers.CharField(default="schedule.firing")
    schedule_id = serializers.IntegerField()
    occurrence = serializers.DateTimeField()
    error = serializers.CharField(
        allow_null=True,
        help_text="Why the send was refused (the quota, a run in progress…); then run is null.",
    )
    run = RunSerializer(allow_null=True)
