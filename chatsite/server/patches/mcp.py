"""What the MCP client takes from the ``mcp`` SDK's private modules.

``agents/tools/mcp_client.py`` builds a server's HTTP client with
``mcp.shared._httpx_utils.create_mcp_http_client``, the SDK's own defaults for it, from a
module the SDK does not export. The code stays with the tools; this module guards what it
relies on (``chatsite.server.E005``). The SDK is imported only when the check runs.
"""

from __future__ import annotations

from chatsite.server.patches.targets import Target, check_for

TARGETS = (
    Target(
        "mcp.shared._httpx_utils",
        "create_mcp_http_client",
        parameters=("headers", "timeout", "auth"),
    ),
)

check = check_for(
    check_id="chatsite.server.E005",
    library="mcp",
    patch="agents/tools/mcp_client.py",
    targets=TARGETS,
)
