"""A conversation as a downloadable document: JSON (complete) or Markdown (for reading)."""

from __future__ import annotations

import json
from typing import Any

from django.utils import timezone

from agents import selectors
from agents.models import Conversation
from agents.protocol import FrameType

EXPORT_FORMATS = ("md", "json")


def export_data(conversation: Conversation, *, all_branches: bool = False) -> dict[str, Any]:
    """The active branch's messages in order (``all_branches``: every message of the tree,
    in the order written, each naming its parent), each answer with the steps and usage of
    the run that wrote it."""
    steps_by_run: dict[int, list[dict[str, Any]]] = {}
    usage_by_run: dict[int, dict[str, Any]] = {}
    for event in selectors.events_after(conversation=conversation, after_seq=0):
        if event.run_id is None:
            continue
        if event.type == FrameType.STEP:
            steps_by_run.setdefault(event.run_id, []).append(event.payload)
        elif event.type == FrameType.RUN_FINISHED:
            usage_by_run[event.run_id] = event.payload.get("usage", {})
    messages = []
    for message in selectors.message_list(conversation=conversation, all_branches=all_branches):
        entry: dict[str, Any] = {
            "id": message.pk,
            "parent_id": message.parent_id,
            "on_active_branch": message.on_active_branch,
            "role": message.role,
            "content": message.content,
            "created_at": message.created_at.isoformat(),
        }
        if message.run_id is not None:
            entry["steps"] = steps_by_run.get(message.run_id, [])
            entry["usage"] = usage_by_run.get(message.run_id, {})
        messages.append(entry)
    return {
        "id": conversation.pk,
        "title": str(conversation),
        "profile": conversation.profile.slug if conversation.profile else None,
        "created_at": conversation.created_at.isoformat(),
        "exported_at": timezone.now().isoformat(),
        "last_seq": conversation.last_seq,
        "active_leaf_id": conversation.active_leaf_id,
        "branches": "all" if all_branches else "active",
        "messages": messages,
    }


def export_json(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)


def export_markdown(data: dict[str, Any]) -> str:
    lines = [f"# {data['title']}", "", f"_Exported {data['exported_at']}_", ""]
    every_branch = data.get("branches") == "all"
    for message in data["messages"]:
        heading = "## " + ("You" if message["role"] == "user" else "Assistant")
        if every_branch:
            # Every version, in the order written: each says which message it follows.
            follows = message["parent_id"]
            heading += f" (message {message['id']}"
            heading += f", after message {follows}" if follows is not None else ", first"
            heading += ")" if message["on_active_branch"] else ", another branch)"
        lines += [heading, ""]
        for step in message.get("steps", []):
            text = _step_markdown(step)
            if text:
                lines += ["> " + text.replace("\n", "\n> "), ""]
        lines += [message["content"], ""]
    return "\n".join(lines)


def _step_markdown(step: dict[str, Any]) -> str:
    kind = step.get("kind")
    if kind == "thought":
        return f"**Thought:** {step.get('text', '')}"
    if kind == "action":
        tool_input = step.get("tool_input", "")
        if not isinstance(tool_input, str):
            tool_input = json.dumps(tool_input, ensure_ascii=False)
        return f"**Action:** `{step.get('tool', '')}` — {tool_input}"
    if kind == "observation":
        label = "Observation (error)" if step.get("is_error") else "Observation"
        return f"**{label}:** {step.get('text', '')}"
    if kind == "error":
        return f"**Error ({step.get('code', '')}):** {step.get('message', '')}"
    if kind == "mode_switch":
        return (
            f"**Mode:** {step.get('from_mode', '')} → {step.get('to_mode', '')} "
            f"(after {step.get('parse_errors', 0)} parse errors)"
        )
    return ""
