"""Django admin for chatsite, one module per entity: model endpoints (``model_configs``),
profiles and their versions (``profiles``, with "Try it" in ``profile_try``), tools
(``tools``, with the OpenAPI import in ``openapi``), MCP servers and their Discover page
(``mcp``), the run inspector and usage page (``runs``), monthly budgets (``budgets``),
feedback on answers by prompt version (``feedback``), every user's API keys (``api_keys``),
conversations and the knowledge base, evaluation sets and their runs (``evaluations``), every
user's schedules with their notifications and webhook deliveries (``schedules``), and which
identity provider account each user signs in as (``accounts``). Shared pieces are in
``pages``, the forms in ``forms`` (the MCP and OpenAPI pages keep theirs beside them).

Staff only (Django admin refuses everyone else), every change lands in the admin log. The
admin calls services for anything beyond a plain form save: checking an endpoint
(``agents/llm/check.py``), running a tool once (``services/tools.py``), previewing a prompt
(``services/profiles.py``). API keys and tool secrets are write-only (``forms``), and the
admin's POST data is marked sensitive so a crash report cannot carry them either.
"""

# Importing each module registers its admins with the site.
from agents.admin.accounts import ProviderIdentityAdmin
from agents.admin.api_keys import ApiKeyAdmin
from agents.admin.budgets import UsageBudgetAdmin
from agents.admin.conversations import ConversationAdmin
from agents.admin.evaluations import EvalRunAdmin, EvalSetAdmin
from agents.admin.feedback import AnswerFeedbackAdmin
from agents.admin.knowledge import KnowledgeDocumentAdmin
from agents.admin.mcp import McpServerAdmin
from agents.admin.model_configs import ModelConfigAdmin
from agents.admin.profiles import AgentProfileAdmin, PromptVersionAdmin
from agents.admin.runs import AgentRunAdmin
from agents.admin.schedules import NotificationAdmin, ScheduleAdmin, WebhookDeliveryAdmin
from agents.admin.tools import ToolConfigAdmin

__all__ = [
    "AgentProfileAdmin",
    "AgentRunAdmin",
    "AnswerFeedbackAdmin",
    "ApiKeyAdmin",
    "ConversationAdmin",
    "EvalRunAdmin",
    "EvalSetAdmin",
    "KnowledgeDocumentAdmin",
    "McpServerAdmin",
    "ModelConfigAdmin",
    "NotificationAdmin",
    "PromptVersionAdmin",
    "ProviderIdentityAdmin",
    "ScheduleAdmin",
    "ToolConfigAdmin",
    "UsageBudgetAdmin",
    "WebhookDeliveryAdmin",
]
