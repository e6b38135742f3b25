"""A user's own settings: language, theme and custom instructions (``UserPreference``;
agents/preferences.py)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from agents.models import UserPreference
from agents.preferences import THEMES, supported_language


def preference_update(
    *, user: User, language: str | None = None, theme: str | None = None
) -> UserPreference:
    """Store what was given (None leaves a setting as it is); ``language=""`` goes back to
    the browser's language. Anything unknown is refused before anything is written."""
    if language:
        supported = supported_language(language)
        if supported is None:
            raise ValidationError(_("That language is not available."), code="language")
        language = supported
    if theme is not None and theme not in THEMES:
        raise ValidationError(_("That theme is not available."), code="theme")
    preference, _created = UserPreference.objects.get_or_create(user=user)
    changed = []
    if language is not None:
        preference.language = language
        changed.append("language")
    if theme is not None:
        preference.theme = theme
        changed.append("theme")
    if changed:
        preference.save(update_fields=[*changed, "updated_at"])
    return preference


# Long enough for a few paragraphs about oneself and how to answer; every run's prompt
# carries it, so it is kept well below what a model's context holds.
CUSTOM_INSTRUCTIONS_MAX_CHARS = 3000


def preference_set_instructions(*, user: User, text: object) -> UserPreference:
    """Store the instructions added to every prompt of the user's runs (``""`` removes
    them). Text that is not a string, or longer than ``CUSTOM_INSTRUCTIONS_MAX_CHARS``, is
    refused before anything is written, so what was stored stays."""
    if not isinstance(text, str):
        raise ValidationError(_("The instructions must be text."), code="invalid")
    text = text.replace("\r\n", "\n").strip()
    if len(text) > CUSTOM_INSTRUCTIONS_MAX_CHARS:
        raise ValidationError(
            _(
                "The instructions are %(length)s characters long; at most %(limit)s fit. "
                "Shorten them and save again."
            )
            % {"length": len(text), "limit": CUSTOM_INSTRUCTIONS_MAX_CHARS},
            code="too_long",
        )
    preference, _created = UserPreference.objects.get_or_create(user=user)
    if preference.custom_instructions != text:
        preference.custom_instructions = text
        preference.save(update_fields=["custom_instructions", "updated_at"])
    return preference
