"""The rows a fresh install needs to answer a first message: a model, two tools, a profile.

``ensure_defaults`` runs after every ``migrate`` (``agents/apps.py``) and from ``serve``.
It only creates what is missing, so an operator's edits in the admin are never overwritten.
``default_profile`` is the one way to find the profile used when none is chosen.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from agents.models import AgentProfile, ModelConfig, ToolConfig
from agents.seeded_texts import DEFAULT_PROFILE_DESCRIPTION, DEFAULT_SUGGESTED_PROMPTS
from agents.services.prompt_versions import prompt_version_ensure

DEFAULT_MODEL_CONFIG_NAME = "default"
DEFAULT_PROFILE_SLUG = "assistant"


DEFAULT_TOOLS: dict[str, str] = {
    "calculator": (
        "Evaluates an arithmetic expression such as (3 + 4) * 2 / 7 and returns the number. "
        "Use it for any calculation instead of working it out yourself."
    ),
    "current_time": (
        "Returns the current date and time. Input: an optional IANA time zone name such as "
        "Europe/Paris; empty for UTC."
    ),
}


@transaction.atomic
def ensure_defaults() -> AgentProfile:
    """Create the default model config, tools and profile if missing; return the default
    profile (the existing one if an operator chose another)."""
    model_config, _ = ModelConfig.objects.get_or_create(
        name=DEFAULT_MODEL_CONFIG_NAME,
        # An empty base_url means OPENAI_* from the settings, or the offline demo model.
        defaults={"base_url": "", "model": settings.OPENAI_MODEL or "demo"},
    )
    tools = [
        ToolConfig.objects.get_or_create(
            name=name, defaults={"kind": name, "description": description}
        )[0]
        for name, description in DEFAULT_TOOLS.items()
    ]
    profile = AgentProfile.objects.filter(slug=DEFAULT_PROFILE_SLUG).first()
    if profile is None:
        has_default = AgentProfile.objects.filter(is_default=True).exists()
        profile = AgentProfile.objects.create(
            name="Assistant",
            slug=DEFAULT_PROFILE_SLUG,
            description=DEFAULT_PROFILE_DESCRIPTION,
            suggested_prompts="\n".join(DEFAULT_SUGGESTED_PROMPTS),
            mode=AgentProfile.Mode.REACT,
            model_config=model_config,
            is_default=not has_default,
        )
        profile.tools.set(tools)
        prompt_version_ensure(profile=profile)
    return AgentProfile.objects.filter(is_default=True).first() or profile


def default_profile() -> AgentProfile:
    """The profile used when none is chosen: the default one, created on a fresh install.

    The one answer for a run, a preview, the summariser, ``manage.py ask`` and ``serve``.
    """
    # With its model endpoint: a send reads it next.
    default = AgentProfile.objects.select_related("model_config").filter(is_default=True).first()
    return default or ensure_defaults()
