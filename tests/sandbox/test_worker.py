"""The python tool through a real celery worker and daphne: the scripted model calls it, the
run waits for its owner, who approves; the observation and the figure come back, and the
figure is the owner's only."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from agents.llm.scripted import Reply
from agents.models import ToolConfig
from agents.services.conversations import conversation_create
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CODE = (
    "import pandas as pd, matplotlib.pyplot as plt\n"
    "frame = pd.DataFrame({'month': ['Jan', 'Feb', 'Mar'], 'sales': [3, 5, 4]})\n"
    "frame.plot(x='month', y='sales')\n"
    "plt.savefig('sales.png')\n"
    "print('total', frame.sales.sum())"
)
CALL = "Thought: I will chart it.\nAction: python\nAction Input: " + json.dumps({"code": CODE})
FINAL = "Thought: Drawn.\nFinal Answer: The chart is above."


def test_the_owner_approves_a_python_call_and_sees_its_output_and_figure(
    sandbox_ready, live_stack, user, other_user
):
    ToolConfig.objects.create(
        name="python",
        kind="python",
        description="Runs Python.",
        needs_approval=True,
        timeout_seconds=120,
    )
    model = f"python-{uuid.uuid4().hex[:8]}"
    live_stack.model.script(model, [Reply(CALL), Reply(FINAL)])
    conversation = conversation_create(
        owner=user, profile=live_stack.profile(model, tools=("python",))
    )
    socket = live_stack.connect(conversation, user)
    socket.send({"type": "message.send", "content": "Chart my sales", "client_id": "c1"})
    requested = socket.receive_until(lambda f: f["type"] == "approval.requested")[-1]
    assert requested["tool"] == "python"
    assert json.loads(requested["tool_input"]) == {"code": CODE}

    socket.send(
        {"type": "approval.decide", "approval_id": requested["approval_id"], "approve": True}
    )
    frames = socket.receive_until(run_ended, timeout=120)
    assert frames[-1]["type"] == "run.finished", live_stack.worker.log_text()[-3000:]
    [observation] = [f for f in frames if f["type"] == "step" and f.get("kind") == "observation"]
    assert not observation["is_error"]
    assert observation["text"].startswith("Files saved (the user sees them under this step):")
    assert observation["text"].endswith("\n\nOutput:\ntotal 12")
    [(name, url)] = re.findall(r"^- (\S+) \(image/png, [^)]*\): (\S+)$", observation["text"], re.M)
    assert name == "sales.png"
    # The model read the same observation.
    request = live_stack.model.requests(model)[1]
    assert url in request["messages"][-1]["content"]

    assert live_stack.http("GET", url, user)[0] == 200
    assert live_stack.http("GET", url, other_user)[0] == 404
