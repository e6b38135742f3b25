"""Websocket routes; chatsite/asgi.py wraps them in origin and session checks."""

from django.urls import path

from agents.consumers import ConversationConsumer, EvaluationConsumer, NotificationConsumer

websocket_urlpatterns = [
    path(
        "ws/conversations/<int:conversation_id>/",
        ConversationConsumer.as_asgi(),
        name="ws-conversation",
    ),
    path("ws/notifications/", NotificationConsumer.as_asgi(), name="ws-notifications"),
    path(
        "ws/evaluations/<int:eval_run_id>/",
        EvaluationConsumer.as_asgi(),
        name="ws-evaluation",
    ),
]
