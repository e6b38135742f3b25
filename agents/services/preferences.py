"""A user's own settings: language and theme (``UserPreference``; agents/preferences.py)."""

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
