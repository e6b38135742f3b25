"""daphne's CPU per socket, per forwarded frame and per send, in isolation (no worker).

One daphne is started (production settings, as ``run_concurrency.py`` does); this process
plays the worker and the browsers. Each round uses N fresh users, each with a conversation
holding one stored run's 16 events, and measures daphne's CPU (from /proc) phase by phase:

- connect: N sockets open with ``after_seq=0``, each replaying the 16 stored frames;
- send: every socket sends ``message.send``, until each has its ``message.created`` back
  (the run is queued to the broker; no worker takes it, the queue is emptied afterwards);
- frames: ``--runs-per-socket`` runs' worth of live frames (15 numbered frames in 10 group
  messages per run, grouped as a worker publishes them) go out through
  ``agents.events.publish_on_commit``, the worker's own call, until every socket has all;
- idle: the sockets stay open ``--idle`` seconds with nothing sent;
- close: the sockets close, until daphne has let them go.

``--tree DIR`` (repeatable) runs daphne from another source tree (e.g. ``git archive`` of an
older commit) with this ``.venv`` and database; trees alternate, one block per tree per
repeat, and the medians of each tree are printed side by side.

    .venv/bin/python bench/daphne_cost.py --sockets 50 --repeats 3 --tree /tmp/before --tree .
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import live
import redis
from django.conf import settings

from agents import events
from agents.llm.scripted import ScriptedServer
from agents.models import AgentRun, RunEvent
from agents.protocol import FrameType
from agents.runs.log import events_append
from agents.services.conversations import conversation_create
from tests.processes import DaphneProcess

PHASES = ("connect", "send", "frames", "idle", "close")
THOUGHT = {
    "kind": "thought",
    "text": "I should add.",
    "duration_ms": 3,
    "prompt_tokens": 230,
    "completion_tokens": 17,
}


def run_shape(first_seq: int, n: int) -> list[list[tuple[str, dict]]]:
    """A bench run's stored events after its ``message.created``, in the group messages a
    worker publishes them in: run.started; a thought and its action; the observation (×4);
    the final thought and run.finished."""
    groups: list[list[tuple[str, dict]]] = [
        [
            (
                FrameType.RUN_STARTED,
                {"model": "bench", "attempt": 1, "profile": "bench", "trigger_message_id": n},
            )
        ],
    ]
    for call in range(1, 5):
        call_id = f"call-{call}"
        groups.append(
            [
                (FrameType.STEP, THOUGHT),
                (
                    FrameType.STEP,
                    {
                        "kind": "action",
                        "tool": "calculator",
                        "call_id": call_id,
                        "tool_input": f"{call - 1}+1",
                    },
                ),
            ]
        )
        groups.append(
            [
                (
                    FrameType.STEP,
                    {
                        "kind": "observation",
                        "text": str(call),
                        "tool": "calculator",
                        "call_id": call_id,
                        "is_error": False,
                        "truncated": False,
                        "duration_ms": 0,
                    },
                )
            ]
        )
    usage = {"duration_ms": 58, "prompt_tokens": 1270, "completion_tokens": 84}
    answer = {
        "id": n,
        "html": "<p>done after 4 steps.</p>\n",
        "role": "assistant",
        "run_id": n,
        "content": "done after 4 steps.",
        "client_id": None,
        "parent_id": n,
        "created_at": "2026-11-25T15:46:42.065501+00:00",
    }
    groups.append(
        [
            (FrameType.STEP, {**THOUGHT, "text": "I know it now."}),
            (FrameType.RUN_FINISHED, {"usage": usage, "message": answer, "stop_reason": "answer"}),
        ]
    )
    return groups


def prepare(n: int, profile, daphne_url) -> list[dict]:
    """N users with a conversation each, holding one run's events after a first message."""
    clients = []
    for _ in range(n):
        user = live.make_user("dcost")
        conversation = conversation_create(owner=user, profile=profile)
        items = [
            (
                FrameType.MESSAGE_CREATED,
                {
                    "message": {
                        "id": 1,
                        "role": "user",
                        "content": "go",
                        "client_id": "0",
                        "run_id": None,
                        "parent_id": None,
                        "created_at": "2026-11-25T15:46:42.000145+00:00",
                    }
                },
            )
        ]
        for group in run_shape(2, conversation.pk):
            items.extend(group)
        events_append(conversation=conversation, run=None, items=items)
        clients.append(
            {
                "conversation": conversation,
                "cookie": live.session_cookie(user),
                "path": f"/ws/conversations/{conversation.pk}/",
            }
        )
    return clients


def publish_runs(clients: list[dict], first_seq: int, runs: int) -> int:
    """Publish ``runs`` runs' live frames to every conversation, as a worker does after each
    commit (``publish_on_commit``; outside a transaction it publishes at once). Nothing is
    stored: the frames only need to follow the socket's last seq. Returns the frame count."""
    now = datetime.now(UTC)
    count = 0
    seq = first_seq
    for _ in range(runs):
        for group in run_shape(seq, 1):
            for client in clients:
                conversation = client["conversation"]
                stored = [
                    RunEvent(
                        conversation_id=conversation.pk,
                        run_id=None,
                        seq=seq + offset,
                        type=type,
                        payload=payload,
                        created_at=now,
                    )
                    for offset, (type, payload) in enumerate(group)
                ]
                events.publish_on_commit(stored)
            seq += len(group)
            count += len(group)
    return count


class Sockets:
    """The N browsers: each reads frames and notes the highest seq and the frame count."""

    def __init__(self, clients: list[dict], url: str, origin: str) -> None:
        self.clients = clients
        self.url = url
        self.origin = origin
        self.last_seq = [0] * len(clients)
        self.frames = [0] * len(clients)
        self.sockets: list = []
        self.readers: list[asyncio.Task] = []
        self.bad: list[str] = []

    async def open(self) -> None:
        async def one(index: int, client: dict):
            ws = await live.open_socket(self.url + client["path"], client["cookie"], self.origin)
            return ws

        self.sockets = await asyncio.gather(*(one(i, c) for i, c in enumerate(self.clients)))
        self.readers = [asyncio.create_task(self._read(i, ws)) for i, ws in enumerate(self.sockets)]

    async def _read(self, index: int, ws) -> None:
        async for raw in ws:
            frame = json.loads(raw)
            seq = frame.get("seq")
            if seq is None:
                continue
            if seq != self.last_seq[index] + 1:
                self.bad.append(f"socket {index}: seq {seq} after {self.last_seq[index]}")
            self.last_seq[index] = seq
            self.frames[index] += 1

    async def until(self, seq: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while min(self.last_seq) < seq:
            if time.monotonic() > deadline:
                raise TimeoutError(f"sockets behind: {sorted(self.last_seq)[:5]} < {seq}")
            await asyncio.sleep(0.01)

    async def send_all(self) -> None:
        await asyncio.gather(
            *(
                ws.send(json.dumps({"type": "message.send", "content": "go", "client_id": "1"}))
                for ws in self.sockets
            )
        )

    async def close(self) -> None:
        await asyncio.gather(*(ws.close() for ws in self.sockets))
        for reader in self.readers:
            reader.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)


class Spy:
    """py-spy recording daphne during one phase at a time (``--py-spy PREFIX``)."""

    def __init__(self, prefix: str | None, pid: int) -> None:
        self.prefix = prefix
        self.pid = pid
        self.proc: subprocess.Popen | None = None

    async def start(self, phase: str) -> None:
        if not self.prefix:
            return
        self.proc = subprocess.Popen(
            [
                str(live.ROOT / ".venv" / "bin" / "py-spy"),
                "record",
                "-p",
                str(self.pid),
                "-o",
                f"{self.prefix}.{phase}.txt",
                "--format",
                "raw",
                "-r",
                "250",
                "--threads",
                "--gil",
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await asyncio.sleep(1.0)  # attached before the phase begins

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(2)  # SIGINT: py-spy writes what it has
            self.proc.wait()
            self.proc = None


async def measured_round(
    daphne, clients: list[dict], runs: int, idle: float, spy_prefix: str | None = None
) -> dict:
    pid = daphne.pid
    cpu = {}
    sockets = Sockets(clients, daphne.ws_url(""), daphne.url)
    spy = Spy(spy_prefix, pid)

    await spy.start("connect")
    before = live.cpu_seconds(pid)
    await sockets.open()
    await sockets.until(16)
    cpu["connect"] = live.cpu_seconds(pid) - before
    spy.stop()

    await spy.start("send")
    before = live.cpu_seconds(pid)
    await sockets.send_all()
    await sockets.until(17)
    cpu["send"] = live.cpu_seconds(pid) - before
    spy.stop()

    await spy.start("frames")
    before = live.cpu_seconds(pid)
    frames = await asyncio.to_thread(publish_runs, clients, 18, runs)
    await sockets.until(17 + frames)
    cpu["frames"] = live.cpu_seconds(pid) - before
    spy.stop()

    await spy.start("idle")
    before = live.cpu_seconds(pid)
    await asyncio.sleep(idle)
    cpu["idle"] = live.cpu_seconds(pid) - before
    spy.stop()

    before = live.cpu_seconds(pid)
    await sockets.close()
    await asyncio.sleep(1.5)  # daphne reaps closed connections once a second
    cpu["close"] = live.cpu_seconds(pid) - before
    if sockets.bad:
        raise RuntimeError("frames out of order: " + "; ".join(sockets.bad[:5]))
    n = len(clients)
    messages = runs * 10
    return {
        "connect": cpu["connect"] * 1000 / n,
        "send": cpu["send"] * 1000 / n,
        "frames": cpu["frames"] * 1000 / n,
        "per_frame": cpu["frames"] * 1000 / (n * frames),
        "per_message": cpu["frames"] * 1000 / (n * messages),
        "idle": cpu["idle"] * 1000 / n / idle,
        "close": cpu["close"] * 1000 / n,
    }


class TreeDaphne(DaphneProcess):
    """daphne started from another source tree, with this interpreter."""

    def __init__(self, env: dict[str, str], tree: Path) -> None:
        super().__init__(env)
        self.tree = tree

    def command(self) -> list[str]:
        # The tree's own launcher: where it keeps it, or daphne itself (on asyncio's own loop)
        # in a tree from before there was one.
        launcher = "daphne"
        for module in ("chatsite.server.process.daphne", "chatsite.daphne"):
            if (self.tree / f"{module.replace('.', '/')}.py").exists():
                launcher = module
                break
        inner = [
            sys.executable,
            "-m",
            "tests.network_guard",
            launcher,
            "-b",
            "127.0.0.1",
            "-p",
            "0",
            "chatsite.asgi:application",
        ]
        return ["sh", "-c", f'cd "{self.tree}" && exec "$@"', "sh", *inner]


def forget_runs() -> None:
    """The sends' runs never ran: empty the broker's queue and end them, so that a worker
    started later (another bench on this database) does not take them up."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(settings.CELERY_TASK_DEFAULT_QUEUE)
    AgentRun.objects.filter(
        status=AgentRun.Status.QUEUED, conversation__owner__username__startswith="dcost-"
    ).update(status=AgentRun.Status.CANCELLED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=50)
    parser.add_argument("--runs-per-socket", type=int, default=4)
    parser.add_argument("--idle", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds per block")
    parser.add_argument("--repeats", type=int, default=1, help="blocks per tree")
    parser.add_argument("--tree", action="append", help="source trees (default: this one)")
    parser.add_argument("--pool", default="20", help="DATABASE_POOL_MAX_SIZE (as run_vs_floor)")
    parser.add_argument("--py-spy", help="py-spy daphne per phase, to PREFIX.<phase>.txt")
    args = parser.parse_args()
    trees = [Path(t).resolve() for t in (args.tree or [str(live.ROOT)])]
    live.migrate()
    results: dict[Path, list[dict]] = {tree: [] for tree in trees}
    with ScriptedServer() as model_server:
        model = f"bench-daphne-{int(time.time())}"
        model_server.policy(model, live.stepping_policy(4, 1.0))
        profile = live.make_profile(model_server, model)
        env = live.production_env(model_server, DATABASE_POOL_MAX_SIZE=args.pool)
        for repeat in range(args.repeats):
            order = trees if repeat % 2 == 0 else list(reversed(trees))
            for tree in order:
                daphne = TreeDaphne(env, tree)
                daphne.start()
                try:
                    warm = prepare(min(args.sockets, 10), profile, daphne)
                    live.run_async(measured_round(daphne, warm, 1, 0.5))
                    for _ in range(args.rounds):
                        clients = prepare(args.sockets, profile, daphne)
                        row = live.run_async(
                            measured_round(
                                daphne, clients, args.runs_per_socket, args.idle, args.py_spy
                            )
                        )
                        results[tree].append(row)
                        print(
                            tree.name or str(tree),
                            {k: round(v, 3) for k, v in row.items()},
                            f"load {os.getloadavg()[0]:.1f}",
                            flush=True,
                        )
                finally:
                    daphne.stop()
                    forget_runs()
    keys = list(next(iter(results.values()))[0])
    print(
        f"\nmedians, N = {args.sockets} sockets, {args.runs_per_socket} runs of frames each; "
        "daphne CPU ms (per socket; idle per socket-second)"
    )
    print("| tree | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for tree, rows in results.items():
        cells = [f"{statistics.median(r[k] for r in rows):.3f}" for k in keys]
        print(f"| {tree} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
