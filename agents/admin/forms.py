"""The admin's forms: write-only secrets, template and tool-config validation, and the tryout forms.

Write-only means a value goes in and never comes back out: the widgets below render empty
even when the form is redisplayed with errors, and the stored value is only ever described
("set" / "not set", or the names of the secrets).
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

from django import forms
from django.contrib.auth.models import User
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.crypto import SecretUnreadable
from agents.models import (
    AgentProfile,
    AgentRun,
    Conversation,
    KnowledgeDocument,
    ModelConfig,
    PromptVersion,
    ToolConfig,
    tool_name_validator,
)
from agents.permissions import can_read_conversation
from agents.react.prompt import validate_template
from agents.services.knowledge import KnowledgeIngestError, extract_text
from agents.services.tools import tool_config_secrets_update
from agents.tools.base import SECRET_NAME_PATTERN
from agents.tools.builtin.mcp_tool import runs_program
from agents.tools.registry import tool_kinds, validate_tool_config
from agents.usage_reports import UsageBy
from chatsite.server.json_limits import JsonTooDeep, loads_bounded

_SECRET_NAME = re.compile(rf"^{SECRET_NAME_PATTERN}$")


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value back, not even after a failed submit."""

    def format_value(self, value: Any) -> None:
        return None


class WriteOnlyPasswordInput(forms.PasswordInput):
    def __init__(self, attrs: dict | None = None) -> None:
        super().__init__(attrs={"autocomplete": "new-password", **(attrs or {})})

    def format_value(self, value: Any) -> None:
        return None


# --------------------------------------------------------------------------------------
# Model endpoints
# --------------------------------------------------------------------------------------


class ModelConfigForm(forms.ModelForm):
    base_url = forms.URLField(
        label=_("Base URL"),
        required=False,
        assume_scheme="https",
        widget=forms.URLInput(attrs={"class": "vURLField"}),
        help_text=_(
            "e.g. https://api.openai.com/v1 or http://localhost:11434/v1. "
            "Empty: the settings' OPENAI_* endpoint, or the offline demo model."
        ),
    )
    api_key = forms.CharField(
        label=_("API key"),
        required=False,
        strip=True,
        widget=WriteOnlyPasswordInput(),
        help_text=_("Leave empty to keep the current key."),
    )
    clear_api_key = forms.BooleanField(
        label=_("Clear the stored API key"), required=False, help_text=_("Remove the key entirely.")
    )

    class Meta:
        model = ModelConfig
        fields = [
            "name",
            "base_url",
            "model",
            "api_key",
            "clear_api_key",
            "default_temperature",
            "context_window",
            "request_timeout_seconds",
            "max_retries",
            "supports_tool_calling",
            "for_embeddings",
            "prompt_price_per_million",
            "completion_price_per_million",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["api_key"].help_text = (
            gettext("Currently set. Leave empty to keep it as it is.")
            if self.instance.has_api_key
            else gettext("Currently not set. Leave empty to keep it as it is.")
        )

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if cleaned.get("clear_api_key") and cleaned.get("api_key"):
            self.add_error(
                "clear_api_key", gettext("Either enter a new key or clear it, not both.")
            )
        return cleaned

    def save(self, commit: bool = True) -> ModelConfig:
        instance: ModelConfig = super().save(commit=False)
        if self.cleaned_data.get("clear_api_key"):
            instance.set_api_key("")
        elif self.cleaned_data.get("api_key"):
            instance.set_api_key(self.cleaned_data["api_key"])
        if commit:
            instance.save()
            self.save_m2m()
        return instance


# --------------------------------------------------------------------------------------
# Agent profiles
# --------------------------------------------------------------------------------------


class AgentProfileForm(forms.ModelForm):
    # Not the model field: making a profile the default moves the flag from the old default
    # (services.profiles.profile_save) instead of failing the one-default constraint.
    make_default = forms.BooleanField(
        label=_("Default profile"),
        required=False,
        help_text=_("New conversations use this profile. Ticking it unticks the old default."),
    )

    class Meta:
        model = AgentProfile
        fields = [
            "name",
            "slug",
            "description",
            "suggested_prompts",
            "mode",
            "model_config",
            "temperature",
            "system_prompt",
            "label_set",
            "few_shot_examples",
            "tools",
            "max_iterations",
            "max_execution_time",
            "budget_steps",
            "budget_tokens",
            "budget_tool_calls",
            "memory_strategy",
            "memory_window_turns",
            "memory_token_budget",
            "allowed_groups",
        ]
        # "Step" means one thing wherever it is shown (the chat's header, Continue, here): one
        # reply of the model that calls tools, or that could not be used.
        help_texts = {
            "max_iterations": _(
                "Steps per run at most; the run then ends with its best answer. A step is one "
                "reply of the model that calls tools (all its calls together), or that could "
                "not be used; the reply with the answer is not counted."
            ),
            "budget_steps": _(
                "Steps (as above) per run before it stops and offers Continue; each Continue "
                "allows this many more. Empty: no step budget. Max iterations stays the ceiling."
            ),
        }
        widgets = {
            "system_prompt": forms.Textarea(attrs={"rows": 18, "class": "vLargeTextField"}),
            "few_shot_examples": forms.Textarea(attrs={"rows": 8, "class": "vLargeTextField"}),
            "suggested_prompts": forms.Textarea(attrs={"rows": 4, "class": "vLargeTextField"}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["make_default"].initial = self.instance.is_default

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        template = cleaned.get("system_prompt", "")
        mode = cleaned.get("mode")
        if template and template.strip() and mode:
            problems = validate_template(
                template,
                mode,
                label_set_code=cleaned.get("label_set") or "",
                few_shot_examples=cleaned.get("few_shot_examples") or "",
            )
            for problem in problems:
                self.add_error("system_prompt", problem)
        return cleaned


class VersionRestoreForm(forms.Form):
    """Only a CSRF-protected POST: restoring changes the live profile."""


# --------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------


def describe_stored_secrets(tool_config: ToolConfig) -> str:
    """The names of a tool's stored secrets (never their values), for pages."""
    if not tool_config.secrets_encrypted:
        return gettext("none")
    try:
        return ", ".join(tool_config.secret_names) or gettext("none")
    except SecretUnreadable:
        return gettext("unreadable (SECRET_KEY changed since they were saved): enter them again")


# Admin JSON (a tool's config, a server's args, a sample input) nests a few levels; a
# schema or a table inside may need more than a client's message does.
ADMIN_JSON_DEPTH = 64


class BoundedJSONField(forms.JSONField):
    """A JSON field that refuses a document nested deeper than ``ADMIN_JSON_DEPTH`` with a
    form error, where ``json.loads`` would raise ``RecursionError`` (a 500)."""

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and not self.disabled:
            _refuse_deep_json(value)
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        if isinstance(data, str) and not self.disabled:
            try:
                _refuse_deep_json(data)
            except forms.ValidationError:
                return forms.fields.InvalidJSONInput(data)
        return super().bound_data(data, initial)


def _refuse_deep_json(text: str) -> None:
    try:
        loads_bounded(text, max_depth=ADMIN_JSON_DEPTH)
    except JsonTooDeep:
        raise forms.ValidationError(
            gettext("The JSON is nested deeper than %(limit)d levels.")
            % {"limit": ADMIN_JSON_DEPTH},
            code="json_too_deep",
        ) from None
    except ValueError:
        pass  # not JSON: the field says so in its own words


class IndentedJSONField(BoundedJSONField):
    """JSON shown indented, so a table or a header list is editable by eye."""

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, ensure_ascii=False, indent=2, cls=self.encoder)


def _kind_choices() -> list[tuple[str, str]]:
    return [
        (name, f"{name} — {kind.summary}" if kind.summary else name)
        for name, kind in sorted(tool_kinds().items())
    ]


def may_run_programs(user: Any) -> bool:
    """A stdio MCP server runs a program on the worker's machine: superusers only set one
    up, change it, or set up, change or test a tool that calls it."""
    return bool(getattr(user, "is_superuser", False))


class ToolConfigForm(forms.ModelForm):
    kind = forms.ChoiceField(choices=_kind_choices)
    config = IndentedJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 12, "class": "vLargeTextField"}),
        help_text=_("JSON, checked against the kind's schema (listed at the bottom of the page)."),
    )
    secrets = forms.CharField(
        label=_("Secrets"),
        required=False,
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
        help_text=_(
            "One NAME=value per line; refer to them in the config as {secret:NAME}. "
            "Leave empty to keep the stored secrets; NAME= with nothing after it removes one."
        ),
    )
    clear_secrets = forms.BooleanField(label=_("Remove all stored secrets"), required=False)

    class Meta:
        model = ToolConfig
        fields = [
            "name",
            "kind",
            "description",
            "config",
            "secrets",
            "clear_secrets",
            "enabled",
            "timeout_seconds",
            "return_direct",
            "needs_approval",
            "read_only",
        ]

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        current = self.instance.kind
        if current and current not in tool_kinds():
            # Keep a row whose kind was removed from the code editable (and visibly broken).
            kind_field = self.fields["kind"]
            assert isinstance(kind_field, forms.ChoiceField)
            kind_field.choices = [
                *_kind_choices(),
                (current, gettext("%(kind)s (no longer registered)") % {"kind": current}),
            ]
        self.fields["secrets"].help_text = (
            gettext("Stored secrets: %(names)s.")
            % {"names": describe_stored_secrets(self.instance)}
            + " "
            + str(self.fields["secrets"].help_text)
        )

    def clean_config(self) -> Any:
        config = self.cleaned_data.get("config")
        return {} if config is None else config

    def clean_secrets(self) -> dict[str, str]:
        """``{name: value}``; an empty value means "remove this one"."""
        entered: dict[str, str] = {}
        for number, line in enumerate(self.cleaned_data.get("secrets", "").splitlines(), 1):
            if not line.strip():
                continue
            name, sep, value = line.partition("=")
            name = name.strip()
            # Messages name the line, never echo it: it may hold the secret.
            if not sep:
                raise forms.ValidationError(
                    gettext("Line %(number)d is not NAME=value.") % {"number": number}
                )
            if not _SECRET_NAME.match(name):
                raise forms.ValidationError(
                    gettext(
                        "Line %(number)d: secret names use capital letters, digits and "
                        "underscores and start with a letter."
                    )
                    % {"number": number}
                )
            entered[name] = value.strip()
        return entered

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        kind = cleaned.get("kind")
        if kind and "config" in cleaned:
            for field, message in validate_tool_config(kind, cleaned["config"]).items():
                target = "kind" if field == "kind" else "config"
                self.add_error(
                    target, message if field in ("kind", "config") else f"{field}: {message}"
                )
        registered = tool_kinds().get(kind or "")
        if self.instance.pk is None and registered and registered.needs_approval_by_default:
            # A new tool of a kind that runs code (python) starts marked; staff may switch
            # it off on the saved tool.
            cleaned["needs_approval"] = True
        if (
            kind == "mcp"
            and runs_program(cleaned.get("config") or {})
            and not may_run_programs(self.user)
        ):
            raise forms.ValidationError(
                _(
                    "Only a superuser may create or change a tool of a stdio MCP server: "
                    "calling it runs a program on the worker's machine."
                )
            )
        return cleaned

    def save(self, commit: bool = True) -> ToolConfig:
        instance: ToolConfig = super().save(commit=False)
        tool_config_secrets_update(
            tool_config=instance,
            entered=self.cleaned_data.get("secrets") or {},
            clear_all=bool(self.cleaned_data.get("clear_secrets")),
        )
        if commit:
            instance.save()
            self.save_m2m()
        return instance


class KnowledgeDocumentForm(forms.ModelForm):
    class Meta:
        model = KnowledgeDocument
        fields = ["title", "collection", "source_file", "text"]

    def clean_source_file(self):
        uploaded = self.cleaned_data.get("source_file")
        if uploaded and hasattr(uploaded, "content_type"):  # a new upload, not the stored file
            data = uploaded.read()
            uploaded.seek(0)
            try:
                extract_text(name=uploaded.name, data=data)
            except KnowledgeIngestError as exc:
                raise forms.ValidationError(str(exc)) from None
        return uploaded

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if not cleaned.get("source_file") and not (cleaned.get("text") or "").strip():
            raise forms.ValidationError(_("Upload a file (.txt, .md or .pdf) or paste the text."))
        return cleaned


class TestToolForm(forms.Form):
    sample_input = forms.CharField(
        label=_("Sample input"),
        widget=forms.Textarea(attrs={"rows": 4, "class": "vLargeTextField"}),
        help_text=_("What the model would send as the Action Input: text, or a JSON object."),
    )

    def clean_sample_input(self) -> str | dict[str, Any]:
        text = self.cleaned_data["sample_input"].strip()
        if text.startswith("{"):
            _refuse_deep_json(text)
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as exc:
                raise forms.ValidationError(
                    gettext("This looks like JSON but is not valid: %(error)s") % {"error": exc}
                ) from None
            if isinstance(parsed, dict):
                return parsed
        return text


# --------------------------------------------------------------------------------------
# Trying a profile out
# --------------------------------------------------------------------------------------


class PreviewForm(forms.Form):
    question = forms.CharField(
        initial=_("What can you help me with?"),
        widget=forms.Textarea(attrs={"rows": 2, "class": "vLargeTextField"}),
    )
    conversation = forms.IntegerField(
        label=_("Memory from conversation"),
        required=False,
        min_value=1,
        help_text=_(
            "A conversation id (your own, or any if you may view conversations): its "
            "memory, chosen by this profile's memory settings, replaces the two fields below."
        ),
    )
    memory_summary = forms.CharField(
        label=_("Memory summary"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "class": "vLargeTextField"}),
        help_text=_("A summary of earlier turns, as the memory would supply it."),
    )
    history = forms.CharField(
        label=_("Earlier turns"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "class": "vLargeTextField"}),
        help_text=_('One turn per line, starting "user:" or "assistant:".'),
    )

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_conversation(self) -> Conversation | None:
        conversation_id = self.cleaned_data.get("conversation")
        if conversation_id is None:
            return None
        conversation = Conversation.objects.filter(pk=conversation_id).first()
        # One the user may not read looks like one that does not exist.
        if conversation is None or not can_read_conversation(self.user, conversation):
            raise forms.ValidationError(
                gettext("There is no conversation %(id)s.") % {"id": conversation_id}
            )
        return conversation

    def clean_history(self) -> list[dict[str, str]]:
        turns: list[dict[str, str]] = []
        for number, line in enumerate(self.cleaned_data.get("history", "").splitlines(), 1):
            if not line.strip():
                continue
            role, sep, content = line.partition(":")
            role = role.strip().lower()
            if not sep or role not in ("user", "assistant"):
                raise forms.ValidationError(
                    gettext('Line %(number)d must start with "user:" or "assistant:".')
                    % {"number": number}
                )
            turns.append({"role": role, "content": content.strip()})
        return turns


class TryItForm(forms.Form):
    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "class": "vLargeTextField"}))


class UsageRangeForm(forms.Form):
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("Inclusive."),
    )

    def date_range(self) -> tuple[datetime.datetime, datetime.datetime]:
        """``[since, until + 1 day)`` in the current time zone; the last 30 days by default."""
        today = timezone.localdate()
        data = self.cleaned_data if self.is_valid() else {}
        until = data.get("until") or today
        since = data.get("since") or until - datetime.timedelta(days=29)
        tz = timezone.get_current_timezone()
        start = datetime.datetime.combine(since, datetime.time.min, tzinfo=tz)
        end = datetime.datetime.combine(
            until + datetime.timedelta(days=1), datetime.time.min, tzinfo=tz
        )
        return start, end


class StaffUsageForm(UsageRangeForm):
    """The admin's usage page: a date range and what its rows are (per user and day, as
    before, or one grouping of ``agents/usage_reports.py``)."""

    BY_USER_AND_DAY = "user_day"
    by = forms.ChoiceField(
        label=_("Rows"),
        required=False,
        choices=[
            (BY_USER_AND_DAY, _("per user and day")),
            (UsageBy.USER.value, _("per user")),
            (UsageBy.GROUP.value, _("per group")),
            (UsageBy.AGENT.value, _("per agent")),
            (UsageBy.MODEL.value, _("per model endpoint")),
        ],
    )

    def grouping(self) -> UsageBy | None:
        """The grouping asked for; None for per user and day (also the default)."""
        chosen = self.cleaned_data.get("by") if self.is_valid() else None
        if not chosen or chosen == self.BY_USER_AND_DAY:
            return None
        return UsageBy(chosen)


# --------------------------------------------------------------------------------------
# Tools made in bulk (MCP discovery, OpenAPI import)
# --------------------------------------------------------------------------------------

_NOT_A_TOOL_NAME = re.compile(r"[^A-Za-z0-9_]+")


def suggested_tool_name(wanted: str, taken: set[str]) -> str:
    """``wanted`` as a valid tool name, numbered when it clashes with one in ``taken``."""
    base = _NOT_A_TOOL_NAME.sub("_", wanted).strip("_") or "tool"
    if not base[0].isalpha():
        base = f"tool_{base}"
    base = base[:60]
    candidate, number = base, 2
    while candidate in taken:
        candidate, number = f"{base}_{number}", number + 1
    return candidate


def new_tool_name_error(name: str, *, chosen: set[str]) -> str | None:
    """Why ``name`` cannot name a new tool (invalid, taken, or chosen twice), or None."""
    try:
        tool_name_validator(name)
    except forms.ValidationError as exc:
        return " ".join(exc.messages)
    if name in chosen or ToolConfig.objects.filter(name=name).exists():
        return gettext("A tool named %(name)s exists: choose another.") % {"name": name}
    return None


class VersionChoiceField(forms.ModelChoiceField):
    """A prompt version, a draft named as one."""

    def label_from_instance(self, obj: PromptVersion) -> str:
        if obj.is_draft:
            return gettext("%(version)s (draft)") % {"version": obj}
        return str(obj)


class ReplayForm(forms.Form):
    """What a replay of a stored run runs with (agents/services/replays.py)."""

    version = VersionChoiceField(
        label=_("Prompt version"),
        queryset=PromptVersion.objects.select_related("profile").order_by(
            "profile__name", "-number"
        ),
        help_text=_("Any version of any profile, the latest saved one included."),
    )
    model_config = forms.ModelChoiceField(
        label=_("Model endpoint"),
        queryset=ModelConfig.objects.order_by("name"),
        required=False,
        empty_label=_("The version's own endpoint"),
    )
    unrecorded = forms.ChoiceField(
        label=_("Tool calls the original run did not make"),
        choices=AgentRun.Unrecorded.choices,
        initial=AgentRun.Unrecorded.ANSWER,
        widget=forms.RadioSelect,
        help_text=_(
            "A call the original recorded always gets the recorded observation; a tool that "
            "needs approval is never run."
        ),
    )
