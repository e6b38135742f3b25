"""chatsite's data.

Models hold data and invariants (constraints, ``clean``); workflows live in ``services/``.
Sections: model and tool configuration, agent profiles and their versions, conversations
and messages, runs and their event log, memory, and the knowledge base.
"""

from __future__ import annotations

import secrets
import uuid
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.files.storage import Storage, storages
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.crypto import decrypt_json, decrypt_text, encrypt_json, encrypt_text
from agents.seeded_texts import in_reader_language

# --------------------------------------------------------------------------------------
# Model endpoints and tools
# --------------------------------------------------------------------------------------


class ModelConfig(models.Model):
    """An OpenAI-compatible endpoint. An empty ``base_url`` means the offline demo model."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    base_url = models.URLField(
        _("base url"),
        blank=True,
        help_text=_("e.g. https://api.openai.com/v1 or http://localhost:11434/v1"),
    )
    model = models.CharField(
        _("model"), max_length=200, help_text=_("The model name the endpoint expects.")
    )
    api_key_encrypted = models.TextField(_("api key encrypted"), blank=True, editable=False)
    default_temperature = models.FloatField(_("default temperature"), default=0.0)
    context_window = models.PositiveIntegerField(_("context window"), default=8192)
    request_timeout_seconds = models.FloatField(
        _("request timeout seconds"), default=120.0, validators=[MinValueValidator(1)]
    )
    max_retries = models.PositiveSmallIntegerField(_("max retries"), default=3)
    supports_tool_calling = models.BooleanField(
        _("supports tool calling"),
        default=False,
        help_text=_(
            "The endpoint accepts OpenAI tool calls: a ReAct run that breaks the format "
            "three times goes on in native tool-calling mode."
        ),
    )
    # Prices are per million tokens, in the currency of CHAT_CURRENCY. A run's ledger entry
    # copies them when it opens, so a later change prices only later runs.
    prompt_price_per_million = models.DecimalField(
        _("prompt price per million"),
        max_digits=10,
        decimal_places=4,
        default=0,
        validators=[MinValueValidator(0)],
        help_text=_("Input tokens: the price of one million, in the site's currency."),
    )
    completion_price_per_million = models.DecimalField(
        _("completion price per million"),
        max_digits=10,
        decimal_places=4,
        default=0,
        validators=[MinValueValidator(0)],
        help_text=_("Output tokens: the price of one million, in the site's currency."),
    )
    for_embeddings = models.BooleanField(
        _("for embeddings"),
        default=False,
        help_text=_(
            "Search by meaning embeds passages with this endpoint's /v1/embeddings instead "
            "of the built-in model. Mark one model config at most."
        ),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("model config")
        verbose_name_plural = _("model configs")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    def set_api_key(self, plain: str) -> None:
        self.api_key_encrypted = encrypt_text(plain)

    def get_api_key(self) -> str:
        return decrypt_text(self.api_key_encrypted)


tool_name_validator = RegexValidator(
    r"^[A-Za-z][A-Za-z0-9_]{0,63}$",
    _("Tool names start with a letter and use only letters, digits and underscores."),
)


class ToolConfig(models.Model):
    """A configured instance of a registered tool kind (see ``agents/tools/registry.py``)."""

    name = models.CharField(
        _("name"),
        max_length=64,
        unique=True,
        validators=[tool_name_validator],
        help_text=_("The name the model sees and calls."),
    )
    kind = models.CharField(_("kind"), max_length=64)
    description = models.TextField(
        _("description"), help_text=_("What the model reads to decide when to call it.")
    )
    config = models.JSONField(_("config"), default=dict, blank=True)
    secrets_encrypted = models.TextField(_("secrets encrypted"), blank=True, editable=False)
    enabled = models.BooleanField(_("enabled"), default=True)
    timeout_seconds = models.FloatField(
        _("timeout seconds"), default=30.0, validators=[MinValueValidator(0.1)]
    )
    return_direct = models.BooleanField(
        _("return direct"),
        default=False,
        help_text=_("Return the tool's output as the final answer."),
    )
    needs_approval = models.BooleanField(
        _("needs approval"),
        default=False,
        help_text=_(
            "The run pauses before each call until the conversation's owner approves or "
            "denies it in the chat. For tools that change something (send, file, write)."
        ),
    )
    # A replay of a stored run may run a call the run did not record only if the tool only
    # reads (and needs no approval): see agents/react/replay.py.
    read_only = models.BooleanField(
        _("read only"),
        default=False,
        db_default=False,
        help_text=_(
            "Calls only read and change nothing, so a replay may run a call the original "
            "run did not make. Some kinds (calculator, current time, searches) always are."
        ),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("tool config")
        verbose_name_plural = _("tool configs")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def set_secrets(self, values: dict[str, str]) -> None:
        self.secrets_encrypted = encrypt_json(values)

    def get_secrets(self) -> dict[str, str]:
        return decrypt_json(self.secrets_encrypted)

    @property
    def secret_names(self) -> list[str]:
        return sorted(self.get_secrets())


class McpServer(models.Model):
    """A Model Context Protocol server whose tools staff may enable as ``mcp`` tools.

    Header values (HTTP) and environment variables (stdio) are write-only secrets, like tool
    secrets. A stdio server runs ``command`` on the worker's machine, so only superusers may
    create or change one (the admin checks); its secrets go in the environment, not in
    ``args``, which anyone who may view the server reads.
    """

    class Transport(models.TextChoices):
        HTTP = "http", _("Streamable HTTP")
        STDIO = "stdio", _("stdio (a program on the worker's machine)")

    class State(models.TextChoices):
        UNKNOWN = "unknown", _("Not contacted yet")
        UP = "up", _("Up")
        DOWN = "down", _("Down")

    name = models.CharField(_("name"), max_length=100, unique=True)
    transport = models.CharField(
        _("transport"), max_length=10, choices=Transport.choices, default=Transport.HTTP
    )
    url = models.URLField(
        _("url"), blank=True, help_text=_("Streamable HTTP: the endpoint, e.g. …/mcp")
    )
    headers_encrypted = models.TextField(_("headers encrypted"), blank=True, editable=False)
    command = models.CharField(
        _("command"), max_length=500, blank=True, help_text=_("stdio: the program to run.")
    )
    args = models.JSONField(
        _("args"), default=list, blank=True, help_text=_("stdio: its arguments, a list.")
    )
    environment_encrypted = models.TextField(_("environment encrypted"), blank=True, editable=False)
    timeout_seconds = models.FloatField(
        _("timeout seconds"),
        default=15.0,
        validators=[MinValueValidator(0.5)],
        help_text=_("For connecting and discovering; a call uses its tool's timeout."),
    )
    state = models.CharField(
        _("state"), max_length=10, choices=State.choices, default=State.UNKNOWN
    )
    last_error = models.TextField(_("last error"), blank=True)
    last_contact_at = models.DateTimeField(_("last contact at"), null=True, blank=True)
    # What the last "Discover" listed: [{name, description, input_schema, annotations}].
    discovered_tools = models.JSONField(
        _("discovered tools"), default=list, blank=True, editable=False
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("MCP server")
        verbose_name_plural = _("MCP servers")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        if self.transport == self.Transport.HTTP and not self.url:
            raise ValidationError({"url": _("A streamable HTTP server needs its URL.")})
        if self.transport == self.Transport.STDIO and not self.command:
            raise ValidationError({"command": _("A stdio server needs the command to run.")})
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            raise ValidationError({"args": _("The arguments are a JSON list of strings.")})

    def set_headers(self, values: dict[str, str]) -> None:
        self.headers_encrypted = encrypt_json(values)

    def get_headers(self) -> dict[str, str]:
        return decrypt_json(self.headers_encrypted)

    def set_environment(self, values: dict[str, str]) -> None:
        self.environment_encrypted = encrypt_json(values)

    def get_environment(self) -> dict[str, str]:
        return decrypt_json(self.environment_encrypted)

    def secret_values(self) -> list[str]:
        """What this server's tools must never show: its header and environment values.

        Raises SecretUnreadable when they were stored under another SECRET_KEY.
        """
        return [*self.get_headers().values(), *self.get_environment().values()]


# --------------------------------------------------------------------------------------
# Agent profiles (prompts) and their immutable versions
# --------------------------------------------------------------------------------------


SUGGESTED_PROMPTS_MAX = 6
SUGGESTED_PROMPT_MAX_CHARS = 300


def suggested_prompt_lines(text: str) -> list[str]:
    """The suggestions a profile's text holds: one per non-empty line, trimmed."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def validate_suggested_prompts(text: str) -> None:
    lines = suggested_prompt_lines(text)
    if len(lines) > SUGGESTED_PROMPTS_MAX:
        raise ValidationError(
            _("At most %(count)d suggestions, one per line."),
            params={"count": SUGGESTED_PROMPTS_MAX},
        )
    too_long = [line for line in lines if len(line) > SUGGESTED_PROMPT_MAX_CHARS]
    if too_long:
        raise ValidationError(
            _("Each suggestion has at most %(count)d characters; this one is longer: %(start)s…"),
            params={"count": SUGGESTED_PROMPT_MAX_CHARS, "start": too_long[0][:60]},
        )


def validate_tool_call_budget(value: object) -> None:
    if not isinstance(value, dict) or not all(
        isinstance(name, str)
        and isinstance(limit, int)
        and not isinstance(limit, bool)
        and limit >= 1
        for name, limit in value.items()
    ):
        raise ValidationError(
            _(
                "Give a JSON object of tool names and whole numbers of at least 1, "
                'e.g. {"send_mail": 2}.'
            )
        )


class AgentProfile(models.Model):
    class Mode(models.TextChoices):
        REACT = "react", _("ReAct text")
        TOOLS = "tools", _("Native tool calling")

    class LabelSet(models.TextChoices):
        ENGLISH = "en", _("English")
        CHINESE = "zh", _("Chinese")

    class MemoryStrategy(models.TextChoices):
        BUFFER = "buffer", _("Whole history")
        WINDOW = "window", _("Last k turns")
        SUMMARY_BUFFER = "summary_buffer", _("Summary + recent turns")

    name = models.CharField(_("name"), max_length=100)
    slug = models.SlugField(_("slug"), unique=True)
    description = models.TextField(
        _("description"), blank=True, help_text=_("Shown in the chat's agent picker.")
    )
    suggested_prompts = models.TextField(
        _("suggested prompts"),
        blank=True,
        validators=[validate_suggested_prompts],
        help_text=format_lazy(
            _(
                "Starting points shown on an empty chat, one per line (at most {count}); "
                "a click sends one. Saved with the profile's version."
            ),
            count=SUGGESTED_PROMPTS_MAX,
        ),
    )
    mode = models.CharField(_("mode"), max_length=10, choices=Mode.choices, default=Mode.REACT)
    model_config = models.ForeignKey(
        ModelConfig,
        verbose_name=_("model config"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="profiles",
    )
    temperature = models.FloatField(
        _("temperature"), null=True, blank=True, help_text=_("Empty: the model's default.")
    )
    system_prompt = models.TextField(
        _("system prompt"),
        blank=True,
        help_text=_("Empty: the default template for the mode and label set."),
    )
    label_set = models.CharField(
        _("label set"), max_length=4, choices=LabelSet.choices, default=LabelSet.ENGLISH
    )
    few_shot_examples = models.TextField(_("few shot examples"), blank=True)
    tools = models.ManyToManyField(
        ToolConfig, verbose_name=_("tools"), blank=True, related_name="profiles"
    )
    max_iterations = models.PositiveSmallIntegerField(
        _("max iterations"), default=15, validators=[MinValueValidator(1)]
    )
    max_execution_time = models.FloatField(
        _("max execution time"),
        default=300.0,
        validators=[MinValueValidator(1)],
        help_text=_("Seconds."),
    )
    memory_strategy = models.CharField(
        _("memory strategy"),
        max_length=20,
        choices=MemoryStrategy.choices,
        default=MemoryStrategy.SUMMARY_BUFFER,
    )
    memory_window_turns = models.PositiveSmallIntegerField(_("memory window turns"), default=6)
    memory_token_budget = models.PositiveIntegerField(_("memory token budget"), default=2000)
    # Per-run budgets: reaching one stops the run (out_of_budget) and the chat offers
    # Continue, which resumes the same run with each budget raised by its own size again.
    budget_steps = models.PositiveSmallIntegerField(
        _("budget steps"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_(
            "Steps per run before it stops and offers Continue (each Continue allows this many "
            "more). Empty: no step budget. Max iterations stays the ceiling."
        ),
    )
    budget_tokens = models.PositiveIntegerField(
        _("budget tokens"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("Tokens per run before it stops and offers Continue. Empty: no token budget."),
    )
    budget_tool_calls = models.JSONField(
        _("budget tool calls"),
        default=dict,
        blank=True,
        validators=[validate_tool_call_budget],
        help_text=_(
            'Calls per run for each named tool, e.g. {"send_mail": 2}; the run stops before '
            "one more and offers Continue. Empty: no limit."
        ),
    )
    allowed_groups = models.ManyToManyField(
        Group,
        verbose_name=_("allowed groups"),
        blank=True,
        help_text=_("Empty: every signed-in user may use this profile."),
    )
    is_default = models.BooleanField(_("is default"), default=False)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("agent profile")
        verbose_name_plural = _("agent profiles")
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"], condition=Q(is_default=True), name="one_default_profile"
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def suggestions(self) -> list[str]:
        return suggested_prompt_lines(self.suggested_prompts)

    # What the chat page shows: the seeded texts in the reader's language while unedited.
    @property
    def shown_description(self) -> str:
        return in_reader_language(self.description)

    @property
    def shown_suggestions(self) -> list[str]:
        return [in_reader_language(prompt) for prompt in self.suggestions]


class PromptVersion(models.Model):
    """An immutable snapshot of a profile, written on every save. Runs point at one.

    A draft (``is_draft``) is a version nobody chats with yet: what a save wrote while the
    publishing gate holds the profile (``CHAT_EVAL_GATE_PUBLISH``,
    agents/services/prompt_versions.py). The profile's live version is its highest-numbered
    version that is not a draft; publishing the draft makes it live."""

    profile = models.ForeignKey(
        AgentProfile, verbose_name=_("profile"), on_delete=models.CASCADE, related_name="versions"
    )
    number = models.PositiveIntegerField(_("number"))
    snapshot = models.JSONField(
        _("snapshot"), help_text=_("Everything the engine needs from the profile.")
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("created by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    is_draft = models.BooleanField(
        _("draft"),
        default=False,
        help_text=_("Saved but not live: runs use it only once it is published."),
    )

    class Meta:
        verbose_name = _("prompt version")
        verbose_name_plural = _("prompt versions")
        ordering = ["profile", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "number"], name="unique_prompt_version")
        ]

    def __str__(self) -> str:
        return f"{self.profile.slug} v{self.number}"


# --------------------------------------------------------------------------------------
# Conversations and messages
# --------------------------------------------------------------------------------------


class ConversationFolder(models.Model):
    """A user's own group of conversations in the sidebar. Deleting it keeps them: their
    ``folder`` goes back to NULL and they return to the date buckets."""

    NAME_MAX_CHARS = 80

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="conversation_folders",
    )
    name = models.CharField(_("name"), max_length=NAME_MAX_CHARS)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("conversation folder")
        verbose_name_plural = _("conversation folders")
        ordering = ["name", "pk"]
        constraints = [
            # Two folders of one name would be told apart by nothing in the sidebar.
            models.UniqueConstraint(fields=["owner", "name"], name="one_folder_name_per_owner")
        ]

    def __str__(self) -> str:
        return self.name


class Conversation(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="conversations",
    )
    title = models.CharField(_("title"), max_length=200, blank=True)
    profile = models.ForeignKey(
        AgentProfile,
        verbose_name=_("profile"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    archived = models.BooleanField(_("archived"), default=False)
    # The owner's folder it is filed in (agents/services/folders.py); NULL: the date buckets.
    folder = models.ForeignKey(
        ConversationFolder,
        verbose_name=_("folder"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="conversations",
    )
    # Pinned conversations head the sidebar, most recently pinned first; NULL when not pinned.
    pinned_at = models.DateTimeField(_("pinned at"), null=True, blank=True)
    # The last seq handed out in this conversation's event log; bumped under a row lock.
    last_seq = models.PositiveBigIntegerField(_("last seq"), default=0)
    # The end of the branch the owner is looking at: the next message continues it, memory,
    # search, export and the API read it (agents/services/branches.py). NULL when empty.
    active_leaf = models.ForeignKey(
        "Message",
        verbose_name=_("active leaf"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True, db_index=True)
    # A copy of another conversation's branch that a replay runs in (agents/services/
    # replays.py): owned by the staff member who started it and listed nowhere in the chat.
    for_replay = models.BooleanField(_("for replay"), default=False, db_default=False)

    class Meta:
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "archived", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or gettext("Conversation %(number)s") % {"number": self.pk}


class Message(models.Model):
    """One node of the conversation's tree.

    A user message's parent is the message it follows on its branch (an answer, or a user
    message whose run gave none); an answer's parent is the user message it answers. An edit
    is a sibling of the message it edits and a regenerated answer a sibling of the answer,
    so earlier versions stay. A child is always written after its parent: ids increase along
    every branch.
    """

    class Role(models.TextChoices):
        USER = "user", _("User")
        ASSISTANT = "assistant", _("Assistant")

    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="messages",
    )
    parent = models.ForeignKey(
        "self",
        verbose_name=_("parent"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="children",
    )
    # Whether the message is on the conversation's active branch (root to ``active_leaf``),
    # kept by the services, so search and the list read the branch without walking the tree.
    on_active_branch = models.BooleanField(_("on active branch"), default=True, db_default=True)
    role = models.CharField(_("role"), max_length=10, choices=Role.choices)
    content = models.TextField(_("content"))
    # Set by the browser so a resend after a dropped socket does not create a second message.
    # NULL rather than "" so the conditional unique constraint ignores messages without one.
    client_id = models.CharField(_("client id"), max_length=64, null=True, blank=True)  # noqa: DJ001
    # The run that produced an assistant message.
    run = models.OneToOneField(
        "AgentRun",
        verbose_name=_("run"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="answer",
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "client_id"],
                condition=Q(client_id__isnull=False),
                name="unique_client_id_per_conversation",
            )
        ]
        indexes = [models.Index(fields=["conversation", "id"])]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:50]}"


# --------------------------------------------------------------------------------------
# A user's own settings: the page's language and theme, the same on every device
# --------------------------------------------------------------------------------------


class UserPreference(models.Model):
    """Kept in the database, not only in a cookie, so a choice follows its user to another
    browser; copied into the session at sign-in (``agents/preferences.py``)."""

    class Theme(models.TextChoices):
        SYSTEM = "system", _("System")
        LIGHT = "light", _("Light")
        DARK = "dark", _("Dark")

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="preference",
    )
    # Empty: the browser's Accept-Language decides.
    language = models.CharField(
        _("language"), max_length=16, blank=True, choices=settings.LANGUAGES
    )
    theme = models.CharField(_("theme"), max_length=8, choices=Theme.choices, default=Theme.SYSTEM)
    # Added to the prompt of every run of the user (agents/services/preferences.py bounds it).
    custom_instructions = models.TextField(
        _("custom instructions"), blank=True, default="", db_default=""
    )
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("user preference")
        verbose_name_plural = _("user preferences")

    def __str__(self) -> str:
        return f"Preferences of user {self.user_id}"


# --------------------------------------------------------------------------------------
# What readers do with answers: feedback on one, a read-only link to a conversation
# --------------------------------------------------------------------------------------


class AnswerFeedback(models.Model):
    """One user's thumbs up or down on one answer, with an optional comment.

    The answer's prompt version is copied here when the feedback is given, so the admin can
    compare versions with one grouped query (``agents/selectors.py``, feedback stats).
    """

    class Rating(models.TextChoices):
        UP = "up", _("Thumbs up")
        DOWN = "down", _("Thumbs down")

    COMMENT_MAX_CHARS = 2000

    message = models.ForeignKey(
        Message, verbose_name=_("message"), on_delete=models.CASCADE, related_name="feedback"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="answer_feedback",
    )
    rating = models.CharField(_("rating"), max_length=4, choices=Rating.choices)
    comment = models.TextField(_("comment"), blank=True, max_length=COMMENT_MAX_CHARS)
    profile = models.ForeignKey(
        AgentProfile,
        verbose_name=_("profile"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="feedback",
    )
    prompt_version = models.ForeignKey(
        PromptVersion,
        verbose_name=_("prompt version"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="feedback",
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True, db_index=True)

    class Meta:
        verbose_name = _("answer feedback")
        verbose_name_plural = _("answer feedback")
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(fields=["message", "user"], name="one_feedback_per_answer"),
            models.CheckConstraint(condition=Q(rating__in=["up", "down"]), name="feedback_rating"),
        ]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} on message {self.message_id}"


def new_share_token() -> str:
    """256 random bits: a link nobody can guess or enumerate."""
    return secrets.token_urlsafe(32)


class ConversationShare(models.Model):
    """A read-only link to one conversation. Revoking keeps the row and closes the link."""

    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="shares",
    )
    token = models.CharField(
        _("token"), max_length=64, unique=True, default=new_share_token, editable=False
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)

    class Meta:
        verbose_name = _("conversation share")
        verbose_name_plural = _("conversation shares")
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(revoked_at__isnull=True),
                name="one_open_share_per_conversation",
            )
        ]

    def __str__(self) -> str:
        state = "revoked" if self.revoked_at else "open"
        return f"Share of conversation {self.conversation_id} ({state})"


# --------------------------------------------------------------------------------------
# Runs, their event log, and the raw model calls
# --------------------------------------------------------------------------------------


class AgentRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")
        # Paused, holding no worker: waiting for the owner to approve or deny a tool call,
        # or stopped at a budget until the owner continues it (docs/architecture.md).
        AWAITING_APPROVAL = "awaiting_approval", _("Awaiting approval")
        OUT_OF_BUDGET = "out_of_budget", _("Out of budget")
        # Paused, holding no worker, until its sub-agents (child runs) have ended: the end
        # of the last one queues it again (docs/architecture.md, "Sub-agents").
        AWAITING_SUBAGENT = "awaiting_subagent", _("Waiting for its sub-agent")

    TERMINAL_STATUSES = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)
    # Held by a worker or waiting for one: the only runs that write live text.
    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)
    # Paused for the owner: only their decision, Continue or Stop moves the run on.
    OWNER_PAUSED_STATUSES = (Status.AWAITING_APPROVAL, Status.OUT_OF_BUDGET)
    # Every pause: no holder, no heartbeat, not claimed, not rescued, not ended.
    PAUSED_STATUSES = (*OWNER_PAUSED_STATUSES, Status.AWAITING_SUBAGENT)

    conversation = models.ForeignKey(
        Conversation, verbose_name=_("conversation"), on_delete=models.CASCADE, related_name="runs"
    )
    trigger_message = models.ForeignKey(
        Message,
        verbose_name=_("trigger message"),
        on_delete=models.CASCADE,
        related_name="triggered_runs",
    )
    profile_version = models.ForeignKey(
        PromptVersion,
        verbose_name=_("profile version"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="runs",
    )
    model_config = models.ForeignKey(
        ModelConfig,
        verbose_name=_("model config"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="runs",
    )
    model_name = models.CharField(_("model name"), max_length=200, blank=True)
    mode = models.CharField(_("mode"), max_length=10, default="react")
    status = models.CharField(
        _("status"), max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    # Attempts that followed a pause the owner ended (an approval decided, a Continue):
    # they are not interruptions, so AGENT_MAX_ATTEMPTS does not count them.
    resumes = models.PositiveSmallIntegerField(_("resumes"), default=0)
    # How many times the owner pressed Continue: each adds the profile's budgets once more.
    budget_grants = models.PositiveSmallIntegerField(_("budget grants"), default=0)
    worker_id = models.CharField(_("worker id"), max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(_("heartbeat at"), null=True, blank=True)
    cancel_requested_at = models.DateTimeField(_("cancel requested at"), null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.PositiveIntegerField(_("completion tokens"), default=0)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    error_code = models.CharField(_("error code"), max_length=64, blank=True)
    # What the user is shown (a plain reason and a reference) and, for staff only, the
    # technical detail without secrets (agents/llm/errors.py).
    error_message = models.TextField(_("error message"), blank=True)
    error_detail = models.TextField(_("error detail"), blank=True)

    # -- replays (agents/services/replays.py) --
    class Unrecorded(models.TextChoices):
        """What a replay does with a tool call the original run did not record."""

        ANSWER = "answer", _("Answer that it was not recorded")
        RUN_READ_ONLY = "run_read_only", _("Run it if the tool is read-only")

    # The run this one replays (its conversation is a copy, ``Conversation.for_replay``).
    replay_of = models.ForeignKey(
        "self",
        verbose_name=_("replay of"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="replays",
        db_index=False,  # a partial index (Meta)
    )
    replay_unrecorded = models.CharField(
        _("unrecorded calls"),
        max_length=16,
        choices=Unrecorded.choices,
        blank=True,
        default="",
        db_default="",
    )

    # -- sub-agents (agents/services/subagents.py) --
    # The run whose ``delegate`` tool call started this one, and that call's id: one child
    # per call, so a parent resumed after a crash finds its child instead of starting another.
    parent_run = models.ForeignKey(
        "self",
        verbose_name=_("parent run"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="child_runs",
        db_index=False,  # one_child_run_per_call starts with it
    )
    parent_call_id = models.CharField(
        _("parent call id"), max_length=64, blank=True, default="", db_default=""
    )
    # What the parent asked: a child's question (its trigger message is the parent's).
    task = models.TextField(_("task"), blank=True, default="", db_default="")
    # How many delegations deep (0: a run the owner started) and the most steps it may take:
    # what was left of its parent's when it started.
    depth = models.PositiveSmallIntegerField(_("depth"), default=0, db_default=0)
    max_steps = models.PositiveSmallIntegerField(_("max steps"), null=True, blank=True)
    # -- forks ("Retry from here", ``run_fork`` in agents/services/conversations.py) --
    # The run whose steps before ``fork_before_seq`` (the seq of the first step not reused)
    # this one starts with, as its own first steps; the model is called from there.
    forked_from = models.ForeignKey(
        "self",
        verbose_name=_("forked from"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="forks",
        db_index=False,  # a partial index (Meta)
    )
    fork_before_seq = models.PositiveIntegerField(_("forked before step"), null=True, blank=True)
    # -- "Continue" after Stop (``answer_continue`` in agents/services/conversations.py) --
    # The stopped answer this run goes on with: the model is shown it and writes the rest,
    # and this run's answer is that text followed by the rest (a sibling of the stopped one).
    continues_answer = models.ForeignKey(
        "Message",
        verbose_name=_("continues answer"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="continuations",
        db_index=False,  # a partial index (Meta)
    )
    # The owner's custom instructions as they were added to this run's prompt (copied when
    # the run first starts, so a resumed attempt and the run inspector see the same text).
    user_instructions = models.TextField(
        _("custom instructions"), blank=True, default="", db_default=""
    )

    class Meta:
        verbose_name = _("agent run")
        verbose_name_plural = _("agent runs")
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["parent_run", "parent_call_id"],
                condition=Q(parent_run__isnull=False),
                name="one_child_run_per_call",
            )
        ]
        # No index holds heartbeat_at or the token counts: every stored reply updates them,
        # and an update that changes no indexed column stays on its page (a HOT update)
        # instead of adding an entry to every index of the table. The rescue's scan finds
        # the few unfinished runs through the status index (migration 0013).
        # The links only some runs have are indexed where set: a run's insert and each
        # change of its status (not HOT: status is indexed) skip them (migration 0031).
        indexes = [
            models.Index(fields=[name], condition=Q(**{f"{name}__isnull": False}), name=index)
            for name, index in (
                ("replay_of", "agentrun_replay_of"),
                ("forked_from", "agentrun_forked_from"),
                ("continues_answer", "agentrun_continues_answer"),
            )
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.status})"

    @property
    def is_replay(self) -> bool:
        """Set for good when the replay is made: its original may be deleted later, and a
        replay must never run its tools as an ordinary run would."""
        return bool(self.replay_unrecorded)

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL_STATUSES

    @property
    def is_child(self) -> bool:
        """Started by another run's ``delegate`` call: it writes no message of its own."""
        return self.parent_run_id is not None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class ToolApproval(models.Model):
    """One tool call a run paused for, and the one decision on it.

    The decision is taken by a conditional UPDATE (``decision`` still empty), so of two
    tabs deciding at once exactly one wins (agents/services/approvals.py).
    """

    class Decision(models.TextChoices):
        PENDING = "", _("Pending")
        APPROVED = "approved", _("Approved")
        DECLINED = "declined", _("Declined")
        EXPIRED = "expired", _("Expired (declined)")
        # The run was stopped while it waited: the call never ran and nobody decided it.
        CANCELLED = "cancelled", _("Run stopped before a decision")

    run = models.ForeignKey(
        AgentRun, verbose_name=_("run"), on_delete=models.CASCADE, related_name="approvals"
    )
    call_id = models.CharField(_("call id"), max_length=200)
    tool = models.CharField(_("tool"), max_length=64)
    tool_input = models.JSONField(_("tool input"), default=dict, blank=True)
    requested_at = models.DateTimeField(_("requested at"), default=timezone.now, db_index=True)
    decision = models.CharField(
        _("decision"), max_length=10, choices=Decision.choices, default=Decision.PENDING, blank=True
    )
    reason = models.TextField(_("reason"), blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("decided by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    decided_at = models.DateTimeField(_("decided at"), null=True, blank=True)

    class Meta:
        verbose_name = _("tool approval")
        verbose_name_plural = _("tool approvals")
        ordering = ["requested_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["run", "call_id"], name="one_approval_per_call")
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.get_decision_display()})"


class RunEvent(models.Model):
    """The durable log a browser replays from. ``seq`` strictly increases per conversation."""

    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="events",
        # unique_seq_per_conv's index starts with it: a second index on it alone was one
        # more entry written for every event, and read by nothing the first cannot serve.
        db_index=False,
    )
    run = models.ForeignKey(
        AgentRun,
        verbose_name=_("run"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="events",
    )
    seq = models.PositiveBigIntegerField(_("seq"))
    type = models.CharField(_("type"), max_length=32)
    payload = models.JSONField(_("payload"), default=dict)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("run event")
        verbose_name_plural = _("run events")
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="unique_seq_per_conv")
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"


class ModelCall(models.Model):
    """One request to the model and what came back, for the run inspector."""

    run = models.ForeignKey(
        AgentRun,
        verbose_name=_("run"),
        on_delete=models.CASCADE,
        related_name="model_calls",
        # unique_model_call_index starts with it (as for RunEvent.conversation).
        db_index=False,
    )
    index = models.PositiveIntegerField(_("index"))
    request_messages = models.JSONField(_("request messages"))
    request_options = models.JSONField(_("request options"), default=dict)
    response_text = models.TextField(_("response text"), blank=True)
    response_tool_calls = models.JSONField(_("response tool calls"), default=list, blank=True)
    prompt_tokens = models.PositiveIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.PositiveIntegerField(_("completion tokens"), default=0)
    duration_ms = models.PositiveIntegerField(_("duration ms"), default=0)
    error = models.TextField(_("error"), blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("model call")
        verbose_name_plural = _("model calls")
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="unique_model_call_index")
        ]

    def __str__(self) -> str:
        return f"Run {self.run_id} call {self.index}"


class UsageEntry(models.Model):
    """The tokens one run or one summary used: the ledger behind the daily quota and the
    admin's usage page (agents/services/usage.py).

    It names its run and conversation by plain id, with no foreign key: deleting a
    conversation deletes its runs, and must not give their tokens back.
    """

    class Kind(models.TextChoices):
        RUN = "run", _("Run")
        SUMMARY = "summary", _("Summary")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"), on_delete=models.CASCADE, related_name="+"
    )
    kind = models.CharField(_("kind"), max_length=10, choices=Kind.choices)
    run_id = models.PositiveBigIntegerField(_("run id"), null=True, blank=True, unique=True)
    conversation_id = models.PositiveBigIntegerField(_("conversation id"), null=True, blank=True)
    model_config = models.ForeignKey(
        ModelConfig,
        verbose_name=_("model config"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    # The agent the run answered as (by its version, when the entry opened); empty for a
    # summary. Kept for the usage pages when the conversation and its runs are gone.
    profile = models.ForeignKey(
        "AgentProfile",
        verbose_name=_("agent profile"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    # The endpoint's prices when the entry opened: cost is these times the tokens, so a
    # price changed later does not rewrite what was spent (docs/architecture.md).
    prompt_price_per_million = models.DecimalField(
        _("prompt price per million"), max_digits=10, decimal_places=4, default=0
    )
    completion_price_per_million = models.DecimalField(
        _("completion price per million"), max_digits=10, decimal_places=4, default=0
    )
    # Held against the quota while the run or summary is going, less what it has used so far.
    reserved_tokens = models.PositiveIntegerField(_("reserved tokens"), default=0)
    prompt_tokens = models.PositiveIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.PositiveIntegerField(_("completion tokens"), default=0)
    # The tokens count towards the day the run or summary started.
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    # A summary's reservation ends here; a run's ends when the run does.
    settled_at = models.DateTimeField(_("settled at"), null=True, blank=True)

    class Meta:
        verbose_name = _("usage entry")
        verbose_name_plural = _("usage entries")
        ordering = ["-id"]
        indexes = [models.Index(fields=["user", "created_at"]), models.Index(fields=["created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} of user {self.user_id}: {self.total_tokens} tokens"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @staticmethod
    def cost_millionths() -> models.Expression:
        """An entry's cost times a million, in SQL: its tokens at the prices it opened with
        (divided by a million once summed, so no sum rounds)."""
        return models.ExpressionWrapper(
            F("prompt_tokens") * F("prompt_price_per_million")
            + F("completion_tokens") * F("completion_price_per_million"),
            output_field=models.DecimalField(max_digits=30, decimal_places=4),
        )


# --------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------


class MemorySummary(models.Model):
    """A running summary of a conversation up to and including ``covers_through``.

    It covers one path of the tree: the branch from the first message to ``covers_through``,
    so it serves exactly the branches that pass through that message. On a branch, the row
    with the newest cut on it is the one in use; older rows stay as history. Each row folds
    the lines after the previous row's cut into the previous text
    (``agents/memory/services.py``), so along a branch the rows'
    ``covers_from``..``covers_through`` ranges tile its history without gaps.
    """

    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="summaries",
    )
    text = models.TextField(_("text"))
    covers_from = models.ForeignKey(
        Message,
        verbose_name=_("covers from"),
        on_delete=models.CASCADE,
        related_name="+",
        null=True,
        blank=True,
        help_text=_("The first message this summary added to the previous one."),
    )
    covers_through = models.ForeignKey(
        Message,
        verbose_name=_("covers through"),
        on_delete=models.CASCADE,
        related_name="+",
        help_text=_("The last message summarised: the end of a turn."),
    )
    token_count = models.PositiveIntegerField(_("token count"), default=0)
    model_name = models.CharField(_("model name"), max_length=200, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("memory summary")
        verbose_name_plural = _("memory summaries")
        ordering = ["conversation", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "covers_through"], name="one_summary_per_cut"
            ),
            models.CheckConstraint(
                condition=Q(covers_from__lte=F("covers_through")), name="summary_range_in_order"
            ),
        ]

    def __str__(self) -> str:
        return f"Summary of conversation {self.conversation_id} through {self.covers_through_id}"


# --------------------------------------------------------------------------------------
# Knowledge base (for the knowledge_search tool)
# --------------------------------------------------------------------------------------


class KnowledgeDocument(models.Model):
    title = models.CharField(_("title"), max_length=200)
    source_file = models.FileField(_("source file"), upload_to="knowledge/", blank=True)
    text = models.TextField(
        _("text"), blank=True, help_text=_("Extracted text; filled from the file.")
    )
    collection = models.SlugField(
        _("collection"),
        default="default",
        help_text=_("A knowledge_search tool searches one collection."),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("knowledge document")
        verbose_name_plural = _("knowledge documents")
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title


class KnowledgeChunk(models.Model):
    document = models.ForeignKey(
        KnowledgeDocument,
        verbose_name=_("document"),
        on_delete=models.CASCADE,
        related_name="chunks",
    )
    position = models.PositiveIntegerField(_("position"))
    text = models.TextField(_("text"))
    # Search by meaning (agents/embeddings.py): the passage's vector as float32 bytes, and
    # the embedder that made it; a vector of another embedder is not compared.
    embedding = models.BinaryField(_("embedding"), null=True, blank=True, editable=False)
    embedding_model = models.CharField(_("embedding model"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("knowledge chunk")
        verbose_name_plural = _("knowledge chunks")
        ordering = ["document", "position"]
        constraints = [
            models.UniqueConstraint(fields=["document", "position"], name="unique_chunk_position")
        ]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.position}"


# --------------------------------------------------------------------------------------
# Monthly budgets
# --------------------------------------------------------------------------------------


class UsageBudget(models.Model):
    """A monthly allowance, in tokens, in money or both, for one user or for one group's
    members together; beside the daily token quota (agents/services/usage.py).

    A send is refused once what the ledger holds for the calendar month (the site's time
    zone) reaches either limit; the chat warns from ``WARN_AT`` of it.
    """

    WARN_AT = 0.8

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
    )
    group = models.OneToOneField(
        Group,
        verbose_name=_("group"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
    )
    monthly_tokens = models.PositiveBigIntegerField(
        _("tokens a month"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("Prompt and completion tokens together. Empty: no token limit."),
    )
    monthly_amount = models.DecimalField(
        _("amount a month"),
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0.01"))],
        help_text=_("In the site's currency, priced as each run was. Empty: no money limit."),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("monthly budget")
        verbose_name_plural = _("monthly budgets")
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True)
                | Q(user__isnull=True, group__isnull=False),
                name="budget_for_a_user_or_a_group",
            ),
            models.CheckConstraint(
                condition=Q(monthly_tokens__isnull=False) | Q(monthly_amount__isnull=False),
                name="budget_has_a_limit",
            ),
        ]

    def __str__(self) -> str:
        if self.user_id is not None:
            return gettext("Budget of user %(name)s") % {"name": self.user}
        return gettext("Budget of group %(name)s") % {"name": self.group}

    def clean(self) -> None:
        if (self.user_id is None) == (self.group_id is None):
            raise ValidationError(_("Choose either a user or a group, not both."))
        if self.monthly_tokens is None and self.monthly_amount is None:
            raise ValidationError(_("Give a limit in tokens, in money, or both."))


def _sandbox_files_storage() -> Storage:
    return storages["sandbox_files"]


def _sandbox_file_path(instance: SandboxFile, filename: str) -> str:
    # A folder per file: two calls may leave files of the same name, and the stored name is
    # the one the code gave, which the download offers back.
    return f"{instance.conversation_id}/{instance.pk}/{filename}"


class SandboxFile(models.Model):
    """A file the ``python`` tool's code left in its scratch folder (a figure, a table),
    kept for the conversation's owner to see or download; never run, never served inline
    unless it is a PNG image."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="sandbox_files",
    )
    name = models.CharField(_("name"), max_length=200)
    content_type = models.CharField(_("content type"), max_length=100)
    size = models.PositiveBigIntegerField(_("size"))
    file = models.FileField(
        _("file"), storage=_sandbox_files_storage, upload_to=_sandbox_file_path, max_length=300
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("sandbox file")
        verbose_name_plural = _("sandbox files")
        ordering = ["created_at"]

    def __str__(self) -> str:
        return self.name


# --------------------------------------------------------------------------------------
# Files attached in the chat (agents/services/attachments.py)
# --------------------------------------------------------------------------------------


def attachment_storage() -> Storage:
    """The storage named ``attachments`` in ``STORAGES`` (a file system folder under var/ by
    default, any django-storages backend by setting); a callable so tests can swap it."""
    return storages["attachments"]


def attachment_upload_path(instance: Attachment, filename: str) -> str:
    # The user's file name is kept in ``name`` only: the stored name is random and carries
    # no extension a web server could map to something it executes.
    return f"attachments/{instance.owner_id}/{secrets.token_hex(16)}"


class Attachment(models.Model):
    """A file a user attached to one of their conversations, and what was read from it."""

    class Kind(models.TextChoices):
        PDF = "pdf", "PDF"
        DOCX = "docx", "Word"
        XLSX = "xlsx", "Excel"
        PPTX = "pptx", "PowerPoint"
        CSV = "csv", "CSV"
        MARKDOWN = "markdown", "Markdown"
        TEXT = "text", _("plain text")
        HTML = "html", "HTML"
        PNG = "png", "PNG"
        JPEG = "jpeg", "JPEG"

    class State(models.TextChoices):
        READING = "reading", _("reading")
        READY = "ready", _("ready")
        FAILED = "failed", _("failed")

    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="attachments",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="+",
    )
    name = models.CharField(_("name"), max_length=255)
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    size = models.PositiveBigIntegerField(_("size in bytes"))
    file = models.FileField(
        _("file"), storage=attachment_storage, upload_to=attachment_upload_path, max_length=255
    )
    state = models.CharField(
        _("state"), max_length=16, choices=State.choices, default=State.READING
    )
    # Why reading failed, in English (stored like a run's error); the page shows it.
    error = models.TextField(_("error"), blank=True)
    # Pages of a PDF, slides of a deck, rows of a table; NULL for running text.
    parts = models.PositiveIntegerField(_("pages or rows"), null=True, blank=True)
    # The whole extracted text's tokens: a file that fits the prompt's share goes in whole.
    text_tokens = models.PositiveIntegerField(_("tokens"), default=0)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("attachment")
        verbose_name_plural = _("attachments")
        ordering = ["conversation", "id"]
        indexes = [models.Index(fields=["conversation", "created_at"])]

    def __str__(self) -> str:
        return self.name


class AttachmentChunk(models.Model):
    """A passage of an attachment with where it is: a page, a slide or a run of rows."""

    attachment = models.ForeignKey(
        Attachment,
        verbose_name=_("attachment"),
        on_delete=models.CASCADE,
        related_name="chunks",
    )
    position = models.PositiveIntegerField(_("position"))
    # As cited: "p.3", "slide 2", "rows 2-40", "Sheet1 rows 2-40"; empty for running text.
    label = models.CharField(_("location"), max_length=120, blank=True)
    page = models.PositiveIntegerField(_("page"), null=True, blank=True)
    row = models.PositiveIntegerField(_("first row"), null=True, blank=True)
    text = models.TextField(_("text"))
    # Search by meaning (agents/embeddings.py): the passage's vector as float32 bytes, and
    # the embedder that made it; a vector of another embedder is not compared.
    embedding = models.BinaryField(_("embedding"), null=True, blank=True, editable=False)
    embedding_model = models.CharField(_("embedding model"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("attachment passage")
        verbose_name_plural = _("attachment passages")
        ordering = ["attachment", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["attachment", "position"], name="unique_attachment_chunk_position"
            )
        ]

    def __str__(self) -> str:
        return f"{self.attachment_id}#{self.position}"


# --------------------------------------------------------------------------------------
# Work nobody watches: scheduled runs, notifications, webhooks (docs/architecture.md,
# "Schedules" and "Notifications")
# --------------------------------------------------------------------------------------


class Schedule(models.Model):
    """A prompt its owner has an agent answer at set times: once, or by an RFC 5545 RRULE.

    ``starts_at`` is the first occurrence (the RRULE's DTSTART); the RRULE is stepped in
    ``time_zone`` so "daily at 08:00" stays at 08:00 across daylight-saving changes.
    ``next_fire_at`` is the next occurrence not yet fired, None once there is none (a
    one-off that fired, an RRULE that ended); celery beat's one entry fires what is due.
    """

    class ConversationMode(models.TextChoices):
        NEW = "new", _("A new conversation each time")
        APPEND = "append", _("The same conversation each time")

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="schedules",
    )
    profile = models.ForeignKey(
        AgentProfile, verbose_name=_("agent"), on_delete=models.CASCADE, related_name="schedules"
    )
    title = models.CharField(_("title"), max_length=200)
    prompt = models.TextField(_("prompt"))
    # Empty: once, at starts_at.
    rrule = models.CharField(_("recurrence rule"), max_length=500, blank=True)
    starts_at = models.DateTimeField(_("starts at"))
    time_zone = models.CharField(_("time zone"), max_length=64, default="UTC")
    conversation_mode = models.CharField(
        _("conversation"),
        max_length=8,
        choices=ConversationMode.choices,
        default=ConversationMode.NEW,
    )
    # The conversation the firings append to (append mode), made by the first firing.
    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    budget_steps = models.PositiveSmallIntegerField(
        _("step budget"), null=True, blank=True, validators=[MinValueValidator(1)]
    )
    # A tool call a firing's run waits on is declined this long after it was asked.
    approval_expires_after = models.PositiveIntegerField(
        _("approval expires after (seconds)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(60)],
    )
    # Who made it: its owner, or staff who scheduled it for them (the admin); null once that
    # account is deleted.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("created by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    next_fire_at = models.DateTimeField(_("next firing"), null=True, blank=True, db_index=True)
    paused_at = models.DateTimeField(_("paused at"), null=True, blank=True)
    paused_reason = models.CharField(_("why it is paused"), max_length=500, blank=True)
    failures_in_a_row = models.PositiveSmallIntegerField(_("failures in a row"), default=0)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("schedule")
        verbose_name_plural = _("schedules")
        ordering = ["next_fire_at", "pk"]

    def __str__(self) -> str:
        return self.title

    @property
    def is_paused(self) -> bool:
        return self.paused_at is not None


class ScheduleFiring(models.Model):
    """One occurrence of a schedule that was fired: the unique (schedule, occurrence) pair
    is what makes a firing happen once, whichever beat tick or "Run now" gets there."""

    schedule = models.ForeignKey(
        Schedule, verbose_name=_("schedule"), on_delete=models.CASCADE, related_name="firings"
    )
    # The occurrence fired; for "Run now", the moment it was pressed.
    occurrence = models.DateTimeField(_("occurrence"))
    run = models.OneToOneField(
        AgentRun,
        verbose_name=_("run"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="firing",
    )
    # The schedule's step budget when it fired: the run's budget, whatever the schedule
    # says later.
    budget_steps = models.PositiveSmallIntegerField(_("step budget"), null=True, blank=True)
    # Why no run started (the send was refused: quota, rate limit, a run in progress...).
    error = models.TextField(_("error"), blank=True)
    fired_at = models.DateTimeField(_("fired at"), auto_now_add=True)

    class Meta:
        verbose_name = _("schedule firing")
        verbose_name_plural = _("schedule firings")
        ordering = ["-occurrence"]
        constraints = [
            models.UniqueConstraint(
                fields=["schedule", "occurrence"], name="one_firing_per_occurrence"
            )
        ]

    def __str__(self) -> str:
        return f"{self.schedule_id} @ {self.occurrence:%Y-%m-%d %H:%M}"


class Notification(models.Model):
    """Something a user should know about a run: it finished, failed, or waits for them."""

    class Kind(models.TextChoices):
        FINISHED = "finished", _("Finished")
        FAILED = "failed", _("Failed")
        AWAITING_APPROVAL = "awaiting_approval", _("Waiting for approval")
        BUDGET_REACHED = "budget_reached", _("Budget reached")
        SCHEDULE_PAUSED = "schedule_paused", _("Schedule paused")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="notifications",
    )
    kind = models.CharField(_("kind"), max_length=20, choices=Kind.choices)
    run = models.ForeignKey(
        AgentRun,
        verbose_name=_("run"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="notifications",
    )
    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
    )
    schedule = models.ForeignKey(
        Schedule,
        verbose_name=_("schedule"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="notifications",
        db_index=False,  # a partial index (Meta): only a schedule's notifications have one
    )
    # What happened, for this notification only (e.g. why a run failed); the page words
    # the rest from the kind.
    detail = models.CharField(_("detail"), max_length=500, blank=True)
    # Makes the write idempotent: one notification per run, kind and attempt.
    key = models.CharField(_("key"), max_length=100, unique=True)
    read_at = models.DateTimeField(_("read at"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("notification")
        verbose_name_plural = _("notifications")
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(
                fields=["user", "created_at"],
                name="unread_notifications",
                condition=Q(read_at__isnull=True),
            ),
            models.Index(
                fields=["schedule"],
                name="notification_schedule",
                condition=Q(schedule__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.user_id})"


class NotificationPreference(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="notification_preference",
    )
    email = models.BooleanField(_("also by e-mail"), default=False)

    class Meta:
        verbose_name = _("notification preference")
        verbose_name_plural = _("notification preferences")

    def __str__(self) -> str:
        return f"Notification preference of user {self.user_id}"


class Webhook(models.Model):
    """An HTTPS URL of the user's that receives their notifications (all of them, or one
    schedule's), signed with a secret only the user and the site know."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="webhooks",
    )
    # Empty: every notification of the owner; otherwise only this schedule's.
    schedule = models.ForeignKey(
        Schedule,
        verbose_name=_("schedule"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="webhooks",
    )
    url = models.URLField(_("URL"), max_length=2000)
    secret_encrypted = models.TextField(_("secret encrypted"), editable=False)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("webhook")
        verbose_name_plural = _("webhooks")
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.url

    def set_secret(self, plain: str) -> None:
        self.secret_encrypted = encrypt_text(plain)

    def get_secret(self) -> str:
        return decrypt_text(self.secret_encrypted)


class WebhookDelivery(models.Model):
    """One notification sent to one webhook: its attempts and how the last one went."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        DELIVERED = "delivered", _("Delivered")
        FAILED = "failed", _("Failed")

    webhook = models.ForeignKey(
        Webhook, verbose_name=_("webhook"), on_delete=models.CASCADE, related_name="deliveries"
    )
    notification = models.ForeignKey(
        Notification,
        verbose_name=_("notification"),
        on_delete=models.CASCADE,
        related_name="deliveries",
    )
    status = models.CharField(
        _("status"), max_length=10, choices=Status.choices, default=Status.PENDING
    )
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    response_status = models.PositiveSmallIntegerField(_("response status"), null=True, blank=True)
    error = models.CharField(_("error"), max_length=500, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    last_attempt_at = models.DateTimeField(_("last attempt at"), null=True, blank=True)

    class Meta:
        verbose_name = _("webhook delivery")
        verbose_name_plural = _("webhook deliveries")
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["webhook", "notification"], name="one_delivery_per_webhook"
            )
        ]

    def __str__(self) -> str:
        return f"{self.notification_id} → {self.webhook_id} ({self.status})"


class ProviderIdentity(models.Model):
    """The identity provider's account a user signs in as (agents/sso.py): the token's
    issuer and subject, which never change, where a username or email can be reused."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="provider_identity",
    )
    issuer = models.CharField(_("issuer"), max_length=255)
    subject = models.CharField(_("subject"), max_length=255)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("identity provider account")
        verbose_name_plural = _("identity provider accounts")
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="unique_provider_identity")
        ]

    def __str__(self) -> str:
        return f"{self.issuer} {self.subject}"


class ApiKey(models.Model):
    """A key a user's other programs call the API with (``Authorization: Bearer cs-…``).

    Only a hash of the secret is stored: it is shown once, when the key is made
    (agents/services/api_keys.py). The secret is random, so one SHA-256 is enough to make a
    stolen table useless, and lets a request find its key by one indexed lookup.
    """

    class Scope(models.TextChoices):
        READ = "read", _("Read: list agents, read runs and their events")
        CHAT = "chat", _("Chat: start runs, stop them, approve or deny their calls")

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="api_keys",
    )
    name = models.CharField(_("name"), max_length=100)
    # The secret's start, shown in lists so a person can tell keys apart; not enough to use.
    prefix = models.CharField(_("prefix"), max_length=16)
    secret_hash = models.CharField(_("secret hash"), max_length=64, unique=True)
    scopes = models.JSONField(_("scopes"), default=list)
    # Requests a minute with this key, in its own window; null: CHAT_API_KEY_REQUESTS_PER_MINUTE.
    requests_per_minute = models.PositiveIntegerField(
        _("requests per minute"), null=True, blank=True
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used at"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("revoked by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        verbose_name = _("API key")
        verbose_name_plural = _("API keys")
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


# --------------------------------------------------------------------------------------
# Evaluation sets (agents/services/evaluations.py)
# --------------------------------------------------------------------------------------


class EvalSet(models.Model):
    """Cases a profile's versions are checked against before one goes live."""

    profile = models.ForeignKey(
        AgentProfile,
        verbose_name=_("profile"),
        on_delete=models.CASCADE,
        related_name="eval_sets",
    )
    name = models.CharField(_("name"), max_length=200)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("evaluation set")
        verbose_name_plural = _("evaluation sets")
        ordering = ["profile", "name"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "name"], name="unique_eval_set_name")
        ]

    def __str__(self) -> str:
        return self.name


class EvalCase(models.Model):
    """A conversation up to a question, and what a good run answering it does.

    ``history`` is the messages before the question (``[{"role", "content"}]``, oldest
    first). A case made from a stored run keeps it in ``source_run``: its recorded tool
    observations answer the replay's calls (``RecordedCalls``). ``must_call`` and
    ``must_not_call`` are ``[{"tool", "arguments"}]``, ``arguments`` a regular expression
    searched in the call's arguments as canonical JSON (empty: any)."""

    eval_set = models.ForeignKey(
        EvalSet, verbose_name=_("evaluation set"), on_delete=models.CASCADE, related_name="cases"
    )
    name = models.CharField(_("name"), max_length=200)
    history = models.JSONField(_("messages before the question"), default=list, blank=True)
    question = models.TextField(_("question"))
    source_run = models.ForeignKey(
        "AgentRun",
        verbose_name=_("made from run"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="eval_cases",
    )
    must_call = models.JSONField(_("tools that must be called"), default=list, blank=True)
    must_not_call = models.JSONField(_("tools that must not be called"), default=list, blank=True)
    answer_contains = models.TextField(_("the answer contains"), blank=True)
    answer_matches = models.CharField(
        _("the answer matches (regular expression)"), max_length=500, blank=True
    )
    max_steps = models.PositiveIntegerField(_("at most this many steps"), null=True, blank=True)
    max_tokens = models.PositiveIntegerField(_("at most this many tokens"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("evaluation case")
        verbose_name_plural = _("evaluation cases")
        ordering = ["eval_set", "pk"]

    def __str__(self) -> str:
        return self.name


class EvalRun(models.Model):
    """One evaluation set run against one prompt version: a replay per case."""

    class Status(models.TextChoices):
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")

    eval_set = models.ForeignKey(
        EvalSet, verbose_name=_("evaluation set"), on_delete=models.CASCADE, related_name="runs"
    )
    version = models.ForeignKey(
        PromptVersion,
        verbose_name=_("prompt version"),
        on_delete=models.CASCADE,
        related_name="eval_runs",
    )
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("started by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
    )
    status = models.CharField(
        _("status"), max_length=10, choices=Status.choices, default=Status.RUNNING
    )
    cases = models.PositiveIntegerField(_("cases"), default=0)
    passed = models.PositiveIntegerField(_("passed"), default=0)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)

    class Meta:
        verbose_name = _("evaluation run")
        verbose_name_plural = _("evaluation runs")
        ordering = ["-pk"]

    def __str__(self) -> str:
        return f"{self.eval_set} · {self.version}"


class EvalResult(models.Model):
    """One case of an evaluation run: its replay and, once that ended, each check."""

    eval_run = models.ForeignKey(
        EvalRun, verbose_name=_("evaluation run"), on_delete=models.CASCADE, related_name="results"
    )
    case = models.ForeignKey(
        EvalCase, verbose_name=_("case"), on_delete=models.CASCADE, related_name="results"
    )
    run = models.OneToOneField(
        "AgentRun",
        verbose_name=_("run"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="eval_result",
    )
    # None until the run ended and was checked.
    passed = models.BooleanField(_("passed"), null=True, blank=True)
    # [{"expectation", "passed", "detail"}], in the case's order.
    checks = models.JSONField(_("checks"), default=list, blank=True)
    tokens = models.PositiveIntegerField(_("tokens"), default=0)
    steps = models.PositiveIntegerField(_("steps"), default=0)

    class Meta:
        verbose_name = _("evaluation result")
        verbose_name_plural = _("evaluation results")
        ordering = ["eval_run", "case"]
        constraints = [
            models.UniqueConstraint(fields=["eval_run", "case"], name="one_result_per_case")
        ]

    def __str__(self) -> str:
        return f"{self.case} ({self.eval_run_id})"
