"""200 websocket clients on loopback for 60 s, every client's events checked.

``--conversations`` conversations, each open in ``--tabs`` sockets (so 100 x 2 = 200 clients
by default) on one daphne; one celery worker. For ``--seconds``, every conversation sends a
message as soon as its previous run ended plus ``--pause`` seconds; the scripted model
answers each call after ``--delay`` s (one calculator action, then the answer). When the time
is up the last runs finish, and each client's stored frames must be exactly seq 1..last_seq
of its conversation (read from the database): no gap, no repeat, in order.

    .venv/bin/python bench/socket_soak.py --conversations 100 --tabs 2 --seconds 60 --pool 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

import live

from agents.llm.scripted import ScriptedServer
from agents.models import AgentRun, Conversation
from agents.services.conversations import conversation_create

TERMINAL = ("run.finished", "run.failed", "run.cancelled")


async def reader(ws, seqs: list[int], ended: asyncio.Queue | None) -> None:
    async for raw in ws:
        frame = json.loads(raw)
        if "seq" in frame:
            seqs.append(frame["seq"])
            if ended is not None and frame["type"] in TERMINAL:
                ended.put_nowait(frame["type"])


async def conversation_load(
    url: str, cookie: str, origin: str, tabs: int, until: float, pause: float
) -> dict:
    sockets = [await live.open_socket(url, cookie, origin) for _ in range(tabs)]
    seqs: list[list[int]] = [[] for _ in sockets]
    ended: asyncio.Queue = asyncio.Queue()
    readers = [
        asyncio.create_task(reader(ws, seqs[i], ended if i == 0 else None))
        for i, ws in enumerate(sockets)
    ]
    runs = 0
    while time.monotonic() < until:
        frame = {"type": "message.send", "content": "go", "client_id": uuid.uuid4().hex}
        await sockets[0].send(json.dumps(frame))
        await asyncio.wait_for(ended.get(), timeout=120)
        runs += 1
        await asyncio.sleep(pause)
    await asyncio.sleep(3)  # the other tabs' last frames
    for task in readers:
        task.cancel()
    for ws in sockets:
        await ws.close()
    return {"seqs": seqs, "runs": runs}


async def soak(clients, origin: str, tabs: int, seconds: float, pause: float) -> list[dict]:
    until = time.monotonic() + seconds
    return await asyncio.gather(
        *(conversation_load(url, cookie, origin, tabs, until, pause) for url, cookie in clients)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--tabs", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--pause", type=float, default=1.0)
    parser.add_argument("--pool", default="20", help="DATABASE_POOL_MAX_SIZE (0: no pool)")
    args = parser.parse_args()
    live.migrate()

    with ScriptedServer() as model_server:
        model = f"bench-soak-{int(time.time())}"
        model_server.policy(model, live.stepping_policy(1, args.delay))
        profile = live.make_profile(model_server, model)
        with live.stack(
            model_server, concurrency=args.conversations + 10, DATABASE_POOL_MAX_SIZE=args.pool
        ) as (worker, daphne):
            clients, ids = [], []
            for _ in range(args.conversations):
                user = live.make_user("soak")
                conversation = conversation_create(owner=user, profile=profile)
                ids.append(conversation.pk)
                url = daphne.ws_url(f"/ws/conversations/{conversation.pk}/")
                clients.append((url, live.session_cookie(user)))
            started = time.monotonic()
            with live.PeakRss(worker=worker.pid, daphne=daphne.pid) as rss:
                outcomes = live.run_async(
                    soak(clients, daphne.url, args.tabs, args.seconds, args.pause)
                )
            elapsed = time.monotonic() - started

    last_seqs = dict(Conversation.objects.filter(pk__in=ids).values_list("pk", "last_seq"))
    clean = frames = 0
    problems = []
    for pk, outcome in zip(ids, outcomes, strict=True):
        expected = list(range(1, last_seqs[pk] + 1))
        for tab, seqs in enumerate(outcome["seqs"]):
            frames += len(seqs)
            if seqs == expected:
                clean += 1
            else:
                missing = sorted(set(expected) - set(seqs))
                repeated = len(seqs) - len(set(seqs))
                problems.append(f"conversation {pk} tab {tab}: missing {missing[:5]}, "
                                f"{repeated} repeated")  # fmt: skip
    runs = AgentRun.objects.filter(conversation_id__in=ids)
    succeeded = runs.filter(status=AgentRun.Status.SUCCEEDED).count()
    print(f"clients: {len(ids) * args.tabs} sockets on {len(ids)} conversations, "
          f"{elapsed:.0f} s connected")  # fmt: skip
    print(f"runs: {runs.count()} ({succeeded} succeeded), stored frames received: {frames}")
    print(f"clients with exactly seq 1..last_seq: {clean}/{len(ids) * args.tabs}")
    print(f"handshakes retried after daphne dropped them: {live.handshake_retries}")
    print(f"peak RSS: worker {rss.peak['worker'] / 2**20:.0f} MB, "
          f"daphne {rss.peak['daphne'] / 2**20:.0f} MB")  # fmt: skip
    for line in problems[:20]:
        print("  ", line)


if __name__ == "__main__":
    main()
