"""Which chat model answers a run: a configured endpoint, the settings' endpoint, or the demo.

Resolution, first match wins:
1. a ``ModelConfig`` with a ``base_url``: that endpoint, its decrypted key, its timeout and
   retries;
2. ``OPENAI_BASE_URL`` or ``OPENAI_API_KEY`` in the settings (``OPENAI_MODEL`` names the model);
3. the offline demo model served in-process (``agents/llm/demo.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings

from agents.llm.client import OpenAIChatModel
from agents.llm.demo import DEMO_MODEL_NAME, ensure_demo_server
from agents.react.errors import ModelError

if TYPE_CHECKING:
    from agents.models import ModelConfig
    from agents.react.types import ChatMessage, ChatModel, Completion

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
MISCONFIGURED = "model_misconfigured"


class UnusableModel:
    """Stands in for a model that cannot be built: its first call raises the reason.

    A misconfigured endpoint then fails the run like any model failure, with a clear
    ``model_misconfigured`` error, instead of failing whoever builds the executor.
    """

    def __init__(self, error: ModelError, *, model_name: str = "") -> None:
        self.error = error
        self.model_name = model_name

    def complete(self, messages: list[ChatMessage], **options: Any) -> Completion:
        raise self.error


def misconfigured(message: str, *, model_name: str = "") -> UnusableModel:
    return UnusableModel(ModelError(message, code=MISCONFIGURED), model_name=model_name)


def chat_model_for(model_config: ModelConfig | None) -> ChatModel:
    if model_config is not None and model_config.base_url:
        if not model_config.model:
            return misconfigured(f"The model endpoint {model_config.name!r} names no model.")
        return OpenAIChatModel(
            base_url=model_config.base_url,
            api_key=model_config.get_api_key(),
            model=model_config.model,
            deadline_seconds=model_config.request_timeout_seconds,
            max_retries=model_config.max_retries,
            default_temperature=model_config.default_temperature,
        )
    if _settings_endpoint_configured():
        if not settings.OPENAI_MODEL:
            return misconfigured(
                "OPENAI_BASE_URL or OPENAI_API_KEY is set but OPENAI_MODEL is empty; "
                "set it to the model name the endpoint expects."
            )
        return OpenAIChatModel(
            base_url=settings.OPENAI_BASE_URL or OPENAI_DEFAULT_BASE_URL,
            api_key=settings.OPENAI_API_KEY,
            model=settings.OPENAI_MODEL,
            deadline_seconds=settings.LLM_REQUEST_DEADLINE_SECONDS,
            max_retries=settings.LLM_MAX_RETRIES,
        )
    return demo_chat_model()


def demo_chat_model() -> OpenAIChatModel:
    return OpenAIChatModel(
        base_url=ensure_demo_server(),
        api_key="demo",
        model=DEMO_MODEL_NAME,
        deadline_seconds=settings.LLM_REQUEST_DEADLINE_SECONDS,
        max_retries=0,  # in-process: a failure is a bug, not a hiccup worth retrying
    )


def model_name_for(model_config: ModelConfig | None) -> str:
    """The model name a run with this config will call, without building anything."""
    if model_config is not None and model_config.base_url:
        return model_config.model
    if _settings_endpoint_configured():
        return settings.OPENAI_MODEL
    return DEMO_MODEL_NAME


def is_demo_model(model_config: ModelConfig | None) -> bool:
    """Whether runs with this config are answered by the offline demo model (UI banner)."""
    if model_config is not None and model_config.base_url:
        return False
    return not _settings_endpoint_configured()


def _settings_endpoint_configured() -> bool:
    return bool(settings.OPENAI_BASE_URL or settings.OPENAI_API_KEY)
