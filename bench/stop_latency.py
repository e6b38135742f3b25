"""From Stop to ``run.cancelled``: how long a stop takes, through the real stack.

One celery worker and one daphne (``live.stack``, production timings). For each case a user's
socket sends a message, the bench waits until the run is in the state the case names, then
sends ``run.cancel`` and times the ``run.cancelled`` frame's arrival on the same socket:

- ``hang``: the model accepted the request and sends nothing (before its first byte);
- ``trickle``: the model sent its first chunk and sends the next an hour later;
- ``tool``: an ``http_request`` tool waits on an endpoint that never answers; for this case
  the bench also times the endpoint seeing its client hang up (the tool's request closed).

Every stop must end the run as cancelled (a timeout or a failure is reported as an error).

    .venv/bin/python bench/stop_latency.py --trials 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

import live

from agents.llm.scripted import Hang, Reply, ScriptedServer
from agents.services.conversations import conversation_create
from tests.silent_server import SilentServer

HOURS = 3600.0


def profile_for(model_server: ScriptedServer, model: str, tools: list[str]):
    from agents.models import ToolConfig

    profile = live.make_profile(model_server, model)
    profile.max_execution_time = HOURS
    profile.save()
    profile.model_config.request_timeout_seconds = HOURS
    profile.model_config.save()
    profile.tools.set(ToolConfig.objects.filter(name__in=tools))
    return profile


async def one_stop(url: str, cookie: str, origin: str, in_progress) -> tuple[float, float]:
    """(when Stop was sent, seconds from it to ``run.cancelled``)."""
    async with await live.open_socket(url, cookie, origin) as ws:
        await ws.send(json.dumps({"type": "message.send", "content": "go", "client_id": "1"}))
        run_id = None
        while run_id is None:
            frame = json.loads(await ws.recv())
            if frame.get("type") == "run.started":
                run_id = frame["run_id"]
        while not in_progress():
            await asyncio.sleep(0.01)
        stopped = time.monotonic()
        await ws.send(json.dumps({"type": "run.cancel", "run_id": run_id}))
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
            if frame.get("type") in ("run.cancelled", "run.failed", "run.finished"):
                if frame["type"] != "run.cancelled":
                    raise SystemExit(f"run {run_id} ended {frame['type']}: {frame}")
                return stopped, time.monotonic() - stopped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    live.migrate()
    silent = SilentServer()
    tool = f"silent_api_{uuid.uuid4().hex[:6]}"
    silent.tool(tool, timeout_seconds=HOURS / 20)
    trickle = "Thought: I am thinking very slowly about this.\nFinal Answer: never"
    action = f'Thought: I will ask the API.\nAction: {tool}\nAction Input: {{"q": "x"}}'
    cases = {
        "hang": ([Hang(HOURS)], [], lambda server, model: len(server.requests(model)) >= 1),
        "trickle": (
            [Reply(trickle, chunk_size=4, chunk_interval=HOURS)],
            [],
            lambda server, model: len(server.requests(model)) >= 1,
        ),
        "tool": ([Reply(action), Reply("Final Answer: never")], [tool], None),
    }
    results: dict[str, list[float]] = {name: [] for name in cases}
    hang_ups: list[float] = []
    with ScriptedServer() as model_server, live.stack(model_server, concurrency=20) as (_, daphne):
        for trial in range(args.trials):
            for name, (replies, tools, started) in cases.items():
                model = f"bench-stop-{name}-{uuid.uuid4().hex[:8]}"
                model_server.script(model, replies)
                profile = profile_for(model_server, model, tools)
                user = live.make_user("stop")
                conversation = conversation_create(owner=user, profile=profile)
                calls_before = silent.calls
                hang_ups_before = len(silent.hung_up_at)

                def in_progress(name=name, started=started, model=model, before=calls_before):
                    if started is None:
                        return silent.calls > before
                    return started(model_server, model)

                stopped, seconds = live.run_async(
                    one_stop(
                        daphne.ws_url(f"/ws/conversations/{conversation.pk}/"),
                        live.session_cookie(user),
                        daphne.url,
                        in_progress,
                    )
                )
                results[name].append(seconds)
                if name == "tool":
                    waited_until = time.monotonic() + 30
                    while len(silent.hung_up_at) == hang_ups_before:
                        if time.monotonic() > waited_until:
                            raise SystemExit("the tool's request outlived the stop by 30 s")
                        time.sleep(0.005)
                    hang_ups.append(silent.hung_up_at[-1] - stopped)
            print(f"trial {trial + 1}/{args.trials} done", flush=True)
    print(f"\n{args.trials} stops per case, Stop sent → run.cancelled received\n")
    print("| case | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|")
    for name, values in results.items():
        p50, p99 = (live.percentile(values, q) * 1000 for q in (50, 99))
        print(f"| {name} | {p50:.0f} | {p99:.0f} | {max(values) * 1000:.0f} |")
    p50, p99 = (live.percentile(hang_ups, q) * 1000 for q in (50, 99))
    print(f"| tool: Stop sent → endpoint sees the client hang up | {p50:.0f} | {p99:.0f} ", end="")
    print(f"| {max(hang_ups) * 1000:.0f} |")


if __name__ == "__main__":
    main()
