"""Crash-resume time: SIGKILL the worker that holds a run; how long until a worker resumes it.

Two celery workers run with the default timings of ``chatsite/settings.py`` (heartbeat,
staleness, sweep: what production gets, not the shortened ones of the test suite). Each
round sends one message whose run calls the calculator once and then waits in its second
model call (the scripted model answers that call after ``--hold`` seconds). Once the
observation is stored, the bench SIGKILLs the worker that holds the run and measures:

- resume: the kill to the moment the next attempt's ``run.started`` is stored;
- finish: the kill to the run's ``run.finished``.

The killed worker is started again at once, as ``manage.py serve`` or systemd would, so two
workers are up for every round. Every conversation's log must then be sound (the fault
suite's checks: seq 1..N, one terminal event, no tool answered twice), and the calculator
must have run exactly once per round.

    .venv/bin/python bench/crash_resume.py --kills 20
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

import live

from agents.llm.scripted import Reply, ScriptedServer
from agents.models import AgentRun, RunEvent
from agents.services.conversations import conversation_create, message_send
from tests.faults.checks import assert_log_sound
from tests.processes import WorkerProcess


def wait_for(condition, timeout: float, what: str) -> float:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {timeout:.0f} s")
        time.sleep(0.02)
    return time.monotonic()


def holder_pid(run: AgentRun) -> int:
    run.refresh_from_db()
    return int(run.worker_id.rsplit(":", 1)[1])


def one_round(workers: list[WorkerProcess], profile, user, number: int) -> tuple[float, float]:
    conversation = conversation_create(owner=user, title=f"crash {number}", profile=profile)
    result = message_send(conversation=conversation, user=user, content=f"go {number}")
    run = result.run
    wait_for(
        lambda: RunEvent.objects.filter(run=run, type="step", payload__kind="observation").exists(),
        60,
        "the first observation",
    )
    pid = holder_pid(run)
    (holder,) = [w for w in workers if w.pid == pid]
    holder.kill()
    killed = time.monotonic()
    holder.start()  # the supervisor's restart
    resumed = wait_for(
        lambda: RunEvent.objects.filter(run=run, type="run.started").count() >= 2,
        300,
        "the resumed attempt",
    )
    finished = wait_for(
        lambda: AgentRun.objects.filter(pk=run.pk, status__in=["succeeded", "failed"]).exists(),
        300,
        "the run's end",
    )
    run.refresh_from_db()
    assert run.status == "succeeded", (run.status, run.error_code, run.error_message)
    assert_log_sound(conversation)
    observations = RunEvent.objects.filter(run=run, type="step", payload__kind="observation")
    assert observations.count() == 1, "the calculator ran twice"
    return resumed - killed, finished - killed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--hold", type=float, default=60.0, help="seconds the 2nd call waits")
    args = parser.parse_args()

    from django.conf import settings

    live.migrate()
    print(
        "defaults: heartbeat every"
        f" {settings.AGENT_HEARTBEAT_INTERVAL_SECONDS} s, stale after"
        f" {settings.AGENT_HEARTBEAT_STALE_SECONDS} s, sweep every"
        f" {settings.AGENT_SWEEP_INTERVAL_SECONDS} s"
    )
    with ScriptedServer() as model_server:
        env = live.production_env(model_server)
        model = f"crash-{os.getpid()}"
        second_calls: dict[str, int] = {}

        def answer(body: dict) -> Reply:
            text = json.dumps(body.get("messages", []))
            if "I should add." not in text:
                return Reply(live.ACTION.format(n=0), delay=0.05)
            # The second call of the first attempt hangs (the kill lands there); the resumed
            # attempt's repeat of it is answered at once.
            (question,) = re.findall(r"go \d+", text)[-1:]
            second_calls[question] = second_calls.get(question, 0) + 1
            hold = args.hold if second_calls[question] == 1 else 0.05
            return Reply(live.FINAL.format(n=1), delay=hold)

        model_server.policy(model, answer)
        profile = live.make_profile(model_server, model)
        user = live.make_user("crash")
        workers = [WorkerProcess(env, concurrency=8).start() for _ in range(2)]
        resume_times, finish_times = [], []
        try:
            for number in range(1, args.kills + 1):
                resume, finish = one_round(workers, profile, user, number)
                resume_times.append(resume)
                finish_times.append(finish)
                print(f"kill {number:2d}: resumed after {resume:5.1f} s, finished {finish:5.1f} s")
        finally:
            for worker in workers:
                worker.stop()
    print(f"resume after SIGKILL: {live.summary_ms(resume_times)}")
    print(f"finish after SIGKILL: {live.summary_ms(finish_times)}")


if __name__ == "__main__":
    main()
