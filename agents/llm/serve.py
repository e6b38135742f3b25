"""``python -m agents.llm.serve``: the scripted model server in a process of its own.

Benchmarks program it over its control API (``agents/llm/scripted.py``); ``--demo`` also
serves the offline demo model. It prints its address on the first line.
"""

from __future__ import annotations

import argparse
import sys

from agents.llm.demo import DEMO_MODEL_NAME, demo_policy
from agents.llm.scripted import ScriptedServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible chat server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--demo", action="store_true", help="serve the offline demo model (agents/llm/demo.py)"
    )
    args = parser.parse_args(argv)
    server = ScriptedServer(host=args.host, port=args.port)
    if args.demo:
        server.policy(DEMO_MODEL_NAME, demo_policy)
    sys.stdout.write(f"Scripted OpenAI-compatible server at {server.base_url}\n")
    if args.demo:
        sys.stdout.write(f"Demo model: {DEMO_MODEL_NAME}\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
