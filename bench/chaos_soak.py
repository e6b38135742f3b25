"""Chaos soak: many users' runs while workers are SIGKILLed and Redis and PostgreSQL restart.

Run before each release; what it checks: docs/performance.md#recovery-timings.

What runs: two celery workers and two daphne processes (each restarted 1 s after it dies, as
``manage.py serve`` or systemd would), on a PostgreSQL cluster and a Redis server of the
bench's own (created in a temporary folder on free ports, so restarting them disturbs
nothing else on the machine). ``--users`` users each send ``--runs-per-user`` messages over
about ``--minutes`` minutes, each through a socket to a random daphne; a socket that drops is
reopened with the last ``seq`` it saw, as the browser does. The scripted model answers each
call after ``--delay`` s: ``--tool-calls`` calculator actions, then the answer.

The chaos: a random worker is SIGKILLed every 20–40 s; Redis is restarted (losing every
queued task and channel-layer group) at 40 % of the time, PostgreSQL (``pg_ctl restart -m
fast``: every connection cut) at 60 %.

What must hold, checked at the end:
- every run ended ``succeeded`` or ``failed`` with a reason (none left queued or running);
- every socket saw each of its conversation's stored events exactly once in seq order,
  through live frames and replays, from 1 to the conversation's last seq;
- every conversation's log is sound (tests/faults/checks.py): one terminal event per run,
  and no action answered by two observations (no tool with a stored observation ran twice).

    .venv/bin/python bench/chaos_soak.py                      # 100 users, 500 runs, 10 min
    .venv/bin/python bench/chaos_soak.py --users 10 --runs-per-user 2 --minutes 2  # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.faults' Redis server, before bench/live.py sets it up too
PG_BIN = Path("/usr/lib/postgresql") / sorted(os.listdir("/usr/lib/postgresql"))[-1] / "bin"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OwnPostgres:
    """A throwaway PostgreSQL cluster on a free loopback port, run as the postgres user."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="chatsite-soak-pg-"))
        shutil.chown(self.dir, "postgres", "postgres")
        self.data = self.dir / "data"

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/chatsite_soak"

    def _as_postgres(self, *command: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *command],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def start(self) -> OwnPostgres:
        self._as_postgres(
            str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"
        )
        self._pg_ctl("start")
        self._as_postgres(
            str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "chatsite_soak"
        )
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c max_connections=300"
        options += f" -k {self.dir}"
        self._as_postgres(
            str(PG_BIN / "pg_ctl"), action, "-D", str(self.data), "-w", "-o", options,
            "-l", str(self.dir / "log"), *extra,
        )  # fmt: skip

    def restart(self) -> None:
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--runs-per-user", type=int, default=5)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--tool-calls", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    random.seed(args.seed)

    postgres = OwnPostgres().start()
    from tests.faults.conftest import RedisServer

    redis = RedisServer().start()
    # bench/live.py points Django at these when it is imported.
    os.environ["DATABASE_URL"] = postgres.url
    os.environ["REDIS_URL"] = redis.url
    try:
        Soak(args, postgres, redis).run()
    finally:
        redis.kill()
        postgres.stop()


class Soak:
    def __init__(self, args: argparse.Namespace, postgres: OwnPostgres, redis) -> None:
        self.args = args
        self.postgres = postgres
        self.redis = redis
        self.counts: collections.Counter[str] = collections.Counter()
        self.stop_chaos = threading.Event()

    def run(self) -> None:
        import live

        from agents.llm.scripted import ScriptedServer
        from agents.services.conversations import conversation_create
        from tests.processes import DaphneProcess, WorkerProcess

        live.migrate()
        self.live = live
        with ScriptedServer() as model_server:
            model = f"soak-{os.getpid()}"
            model_server.policy(model, live.stepping_policy(self.args.tool_calls, self.args.delay))
            env = live.production_env(model_server)
            profile = live.make_profile(model_server, model)
            self.workers = [WorkerProcess(env, concurrency=50) for _ in range(2)]
            self.daphnes = [DaphneProcess(env) for _ in range(2)]
            for process in self.workers + self.daphnes:
                process.start()
            clients = []
            for number in range(self.args.users):
                user = live.make_user("soak")
                conversation = conversation_create(
                    owner=user, title=f"soak {number}", profile=profile
                )
                clients.append((conversation, live.session_cookie(user)))
            supervisor = threading.Thread(target=self._supervise, daemon=True)
            chaos = threading.Thread(target=self._chaos, daemon=True)
            supervisor.start()
            chaos.start()
            started = time.monotonic()
            try:
                seen = live.run_async(self._users(clients))
            finally:
                self.stop_chaos.set()
                chaos.join(timeout=120)
                supervisor.join(timeout=30)
                for process in self.workers + self.daphnes:
                    process.stop()
            self._report(clients, seen, time.monotonic() - started)

    # --- the users ---------------------------------------------------------------------------

    async def _users(self, clients) -> list[list[int]]:
        duration = self.args.minutes * 60
        results = await asyncio.gather(
            *(self._user(conversation, cookie, duration) for conversation, cookie in clients)
        )
        return list(results)

    async def _user(self, conversation, cookie: str, duration: float) -> list[int]:
        runs = self.args.runs_per_user
        gap = duration / runs
        seen: list[int] = []
        await asyncio.sleep(random.uniform(0, gap))
        for number in range(runs):
            await self._one_run(conversation, cookie, seen, f"{number}")
            if number < runs - 1:
                await asyncio.sleep(random.uniform(0.5 * gap, 1.5 * gap))
        return seen

    async def _one_run(self, conversation, cookie: str, seen: list[int], client_id: str) -> None:
        sent = False
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            daphne = random.choice(self.daphnes)
            if not daphne.alive or daphne.port is None:
                await asyncio.sleep(0.5)
                continue
            after = max(seen, default=0)
            url = daphne.ws_url(f"/ws/conversations/{conversation.pk}/?after_seq={after}")
            try:
                ws = await self.live.open_socket(url, cookie, daphne.url)
            except Exception:  # any failed handshake: try again, as the page does
                self.counts["failed handshakes"] += 1
                await asyncio.sleep(1)
                continue
            try:
                async with ws:
                    if not sent:
                        frame = {"type": "message.send", "content": "go", "client_id": client_id}
                        await ws.send(json.dumps(frame))
                        sent = True  # a repeat of the client_id is a no-op on the server
                    if await self._read_until_end(ws, seen):
                        return
            except Exception:  # a dropped socket: reconnect after the last seq
                self.counts["socket drops"] += 1
            if sent:
                self.counts["reconnects"] += 1
            await asyncio.sleep(0.5)
        self.counts["runs the bench gave up on"] += 1

    async def _read_until_end(self, ws, seen: list[int]) -> bool:
        while True:
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=15)
            except TimeoutError:
                # A run in progress silent this long: ask for what was missed, as the page does.
                await ws.send(json.dumps({"type": "resume", "after_seq": max(seen, default=0)}))
                self.counts["resumes after silence"] += 1
                continue
            frame = json.loads(raw)
            if "seq" not in frame:
                continue
            if frame["seq"] in seen:
                self.counts["repeated frames dropped"] += 1
                continue
            seen.append(frame["seq"])
            if frame["type"] in ("run.finished", "run.failed", "run.cancelled"):
                self.counts[frame["type"]] += 1
                return True

    # --- the chaos ---------------------------------------------------------------------------

    def _supervise(self) -> None:
        while not self.stop_chaos.wait(1.0):
            for process in self.workers + self.daphnes:
                if not process.alive:
                    with contextlib.suppress(RuntimeError):
                        process.start()
                        self.counts[f"{process.name} restarts"] += 1

    def _chaos(self) -> None:
        duration = self.args.minutes * 60
        started = time.monotonic()
        pending = {"redis": 0.4 * duration, "postgres": 0.6 * duration}
        next_kill = random.uniform(20, 40)
        while not self.stop_chaos.wait(0.5):
            elapsed = time.monotonic() - started
            if elapsed >= next_kill:
                victim = random.choice(self.workers)
                victim.kill()
                self.counts["worker SIGKILLs"] += 1
                next_kill = elapsed + random.uniform(20, 40)
            for name, at in list(pending.items()):
                if elapsed >= at:
                    print(f"[{elapsed:5.0f} s] restarting {name}", flush=True)
                    (self.redis if name == "redis" else self.postgres).restart()
                    self.counts[f"{name} restarts"] += 1
                    del pending[name]

    # --- the verdict -------------------------------------------------------------------------

    def _report(self, clients, seen: list[list[int]], wall: float) -> None:
        from django.db import close_old_connections

        from agents.models import AgentRun
        from tests.faults.checks import assert_log_sound

        close_old_connections()
        runs = AgentRun.objects.filter(conversation__in=[c for c, _ in clients])
        statuses = collections.Counter(runs.values_list("status", flat=True))
        reasons = collections.Counter(
            runs.filter(status="failed").values_list("error_code", flat=True)
        )
        attempts = collections.Counter(runs.values_list("attempts", flat=True))
        problems = []
        for (conversation, _), frames in zip(clients, seen, strict=True):
            conversation.refresh_from_db()
            if sorted(frames) != list(range(1, conversation.last_seq + 1)):
                problems.append(f"conversation {conversation.pk}: socket saw {len(frames)} of "
                                f"{conversation.last_seq} events")  # fmt: skip
            elif frames != sorted(frames):
                problems.append(f"conversation {conversation.pk}: events out of order")
            try:
                assert_log_sound(conversation)
            except AssertionError as error:
                problems.append(f"conversation {conversation.pk}: log unsound: {error}")
        print(f"\nwall {wall:.0f} s; runs by status {dict(statuses)}; failures {dict(reasons)}")
        print(f"attempts per run {dict(sorted(attempts.items()))}")
        print("events: " + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())))
        if problems:
            print(f"{len(problems)} PROBLEMS:\n" + "\n".join(problems[:50]))
            sys.exit(1)
        print("every run ended; every socket saw each stored event once, in order; logs sound")


if __name__ == "__main__":
    main()
