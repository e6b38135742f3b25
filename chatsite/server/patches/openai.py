"""What the model client's own HTTP request takes from the openai SDK's internals.

``agents/llm/http.py`` sends a streamed completion on aiohttp, not through the SDK, yet a
refused request must raise the SDK's own exception for its status and body: it asks the
client's private ``_make_status_error_from_response``, and reads the endpoint's headers from
``auth_headers`` and ``default_headers``. The code stays with the model client (it is the
domain's); this module only guards what it relies on (``chatsite.server.E004``).
"""

from __future__ import annotations

from chatsite.server.patches.targets import Target, check_for

TARGETS = (
    Target(
        "openai", "AsyncOpenAI._make_status_error_from_response", parameters=("self", "response")
    ),
    Target("openai", "AsyncOpenAI.auth_headers", kind=property),
    Target("openai", "AsyncOpenAI.default_headers", kind=property),
)

check = check_for(
    check_id="chatsite.server.E004",
    library="openai",
    patch="agents/llm/http.py",
    targets=TARGETS,
)
