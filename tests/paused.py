"""A run paused before a tool call that needs approval, as a worker leaves it (no worker
needed): for the transport tests of deciding."""

from __future__ import annotations

from agents.models import AgentRun, Message, ToolApproval
from agents.react.types import ApprovalRequestStep
from agents.runs.store import run_claim
from agents.services.approvals import run_pause_for_approval


def paused_run(conversation) -> tuple[AgentRun, ToolApproval]:
    """A run of ``conversation`` paused before a ``send_mail`` call."""
    message = Message.objects.create(conversation=conversation, role="user", content="Mail Bob")
    agent_run = AgentRun.objects.create(conversation=conversation, trigger_message=message)
    held = run_claim(run_id=agent_run.pk, worker_id="worker:1")
    request = ApprovalRequestStep(
        tool="send_mail", call_id="call-1", tool_input={"to": "bob@example.com"}
    )
    [approval] = run_pause_for_approval(run=held, requests=[request], worker_id="worker:1")
    conversation.refresh_from_db()
    return agent_run, approval
