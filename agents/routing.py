"""Websocket routes; chatsite/asgi.py wraps them in origin and session checks."""

from django.urls import path

from agents.consumers import ConversationConsumer, NotificationConsumer

websocket_urlpatterns = [
    path(
        "ws/conversations/<int:conversation_id>/",
        ConversationConsumer.as_asgi(),
        name="ws-conversation",
    ),
    path("ws/notifications/", NotificationConsumer.as_asgi(), name="ws-notifications"),
]
