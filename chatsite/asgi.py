import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
# Django must be set up before anything imports models, so routing comes after this line.
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.sessions import CookieMiddleware  # noqa: E402
from django.conf import settings  # noqa: E402

from agents.routing import websocket_urlpatterns  # noqa: E402
from chatsite.server.sockets.drain import SocketDrainMiddleware  # noqa: E402
from chatsite.server.sockets.origin import SameOriginValidator  # noqa: E402
from chatsite.server.sockets.session import SocketSessionMiddleware  # noqa: E402
from chatsite.server.streaming import StreamingHandler, by_path_prefix  # noqa: E402

# The key API streams runs for as long as they take: its requests get a handler that keeps
# no thread per request (chatsite/server/streaming.py), with the middleware it needs.
key_api_app = StreamingHandler(settings.KEY_API_MIDDLEWARE)

application = ProtocolTypeRouter(
    {
        "http": by_path_prefix("/v1/", key_api_app, django_asgi_app),
        # Scheme, host and port of the page must be this site's (chatsite/server/sockets/origin.py).
        # The consumer finds the session's user itself, in the read that opens the socket
        # (agents/session_check.py, socket_opening), so no AuthMiddleware reads it first.
        "websocket": SocketDrainMiddleware(
            SameOriginValidator(
                CookieMiddleware(SocketSessionMiddleware(URLRouter(websocket_urlpatterns)))
            )
        ),
    }
)

# Last: whatever is loaded by now lives as long as the process (chatsite/server/process/heap.py).
from chatsite.server.process.heap import freeze_startup_objects  # noqa: E402

freeze_startup_objects()
