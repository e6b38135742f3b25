"""The rows a fresh install needs to answer a first message: a model, two tools, a profile.

``ensure_defaults`` runs after every ``migrate`` (``agents/apps.py``) and from ``serve``.
It only creates what is missing, so an operator's edits in the admin are never overwritten.
``default_profile`` is the one way to find the profile used when none is chosen.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from agents.models import AgentProfile, ModelConfig, ToolConfig
from agents.services.prompt_versions import prompt_version_ensure

DEFAULT_MODEL_CONFIG_NAME = "default"
DEFAULT_PROFILE_SLUG = "assistant"

# What the offline demo model can do (agents/llm/demo.py): arithmetic with the calculator,
# the time and date with current_time. They are fine starters for a real model too.
DEFAULT_SUGGESTED_PROMPTS = (
    "What is (28 + 10) * 3?",
    "What is 1234 divided by 8?",
    "What time is it now?",
    "What is today's date?",
)

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
            description="A helpful assistant that can calculate and tell the time.",
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
