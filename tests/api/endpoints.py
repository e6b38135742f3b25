"""Every JSON API endpoint, with the ids it needs filled in, for the matrix tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    payload: dict[str, Any] | None = None

    @property
    def changes_state(self) -> bool:
        return self.method in ("POST", "PATCH", "PUT", "DELETE")

    def call(self, client, **extra):
        send = getattr(client, self.method.lower())
        if self.payload is None:
            return send(self.path, **extra)
        if self.method == "GET":
            return send(self.path, self.payload, **extra)
        return send(self.path, self.payload, content_type="application/json", **extra)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def endpoints(*, conversation_id: int, message_id: int, run_id: int) -> list[Endpoint]:
    return [
        Endpoint("GET", "/api/conversations/"),
        Endpoint("POST", "/api/conversations/", {"title": "new"}),
        Endpoint("GET", "/api/profiles/"),
        # Before the conversation's DELETE: the matrix that goes through deletes it last.
        Endpoint("PUT", f"/api/messages/{message_id}/feedback/", {"rating": "up"}),
        Endpoint("DELETE", f"/api/messages/{message_id}/feedback/"),
        *conversation_endpoints(conversation_id=conversation_id),
        Endpoint("POST", f"/api/messages/{message_id}/edit/", {"content": "edited"}),
        Endpoint("POST", f"/api/runs/{run_id}/cancel/"),
    ]


def conversation_endpoints(*, conversation_id: int) -> list[Endpoint]:
    conversation = f"/api/conversations/{conversation_id}/"
    return [
        Endpoint("GET", conversation),
        Endpoint("PATCH", conversation, {"title": "renamed", "archived": True}),
        Endpoint("GET", f"{conversation}share/"),
        Endpoint("POST", f"{conversation}share/"),
        Endpoint("DELETE", f"{conversation}share/"),
        Endpoint("POST", f"{conversation}pin/"),
        Endpoint("DELETE", f"{conversation}pin/"),
        Endpoint("DELETE", conversation),
        Endpoint("POST", f"{conversation}messages/", {"content": "hello", "client_id": "x1"}),
        Endpoint("POST", f"{conversation}regenerate/"),
        Endpoint("POST", f"{conversation}compact/"),
        Endpoint("GET", f"{conversation}export/", {"format": "json"}),
        Endpoint("GET", f"{conversation}export/", {"format": "md"}),
    ]
