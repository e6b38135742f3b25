"""Runs as resources through an API key, on a real daphne and worker: events by server-sent
events from any seq, many streams without a thread each, Stop, a streamed pause, the key's
own rate limit. The model's reply is held on a ``Gate`` where a run must stay in progress."""

from __future__ import annotations

import json
import threading
import uuid

import httpx
import openai
import psutil
import pytest

from agents.llm.scripted import Gate, Reply
from agents.models import AgentRun, ApiKey
from agents.services.api_keys import api_key_create
from tests.counting_server import CountingServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ANSWER = Reply("Thought: I know this.\nFinal Answer: Forty-two.")
STREAMS = 16


def _model_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _http(live_stack, secret: str) -> httpx.Client:
    return httpx.Client(
        base_url=live_stack.daphne.url,
        headers={"Authorization": f"Bearer {secret}"},
        timeout=60,
    )


def _secret(user, **fields) -> str:
    made = api_key_create(owner=user, name="runs", scopes=["read", "chat"])
    if fields:
        ApiKey.objects.filter(pk=made.key.pk).update(**fields)
    return made.secret


def _events(response: httpx.Response) -> list[dict]:
    """The server-sent events of a response: each with its id, event and data (parsed)."""
    found, current = [], {}
    for line in response.iter_lines():
        if not line:
            if current:
                found.append(current)
            current = {}
        elif line.startswith("data: "):
            current["data"] = json.loads(line[len("data: ") :])
        elif line.startswith("id: "):
            current["id"] = int(line[len("id: ") :])
        elif line.startswith("event: "):
            current["event"] = line[len("event: ") :]
    return found


def _start(http: httpx.Client, model: str, question: str = "What is six times seven?") -> dict:
    started = http.post("/v1/runs", json={"model": model, "input": question})
    assert started.status_code == 201, started.text
    return started.json()


def test_many_event_streams_of_a_run_hold_no_thread_each(live_stack, user):
    model = _model_name("v1-streams")
    gate = Gate()
    live_stack.model.script(model, [gate.hold(ANSWER)])
    live_stack.profile(model, tools=())
    secret = _secret(user, requests_per_minute=0)
    daphne = psutil.Process(live_stack.daphne.pid)

    with _http(live_stack, secret) as http:
        run = _start(http, model)
    gate.wait_arrived()  # the run is in progress, its answer held

    opened = [threading.Event() for _ in range(STREAMS)]
    received: list[list[dict]] = [[] for _ in range(STREAMS)]

    def follow(index: int) -> None:
        path = f"/v1/runs/{run['id']}/events"
        with _http(live_stack, secret) as http, http.stream("GET", path) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: "):
                    received[index].append(json.loads(line[len("data: ") :]))
                    opened[index].set()

    first = threading.Thread(target=follow, args=(0,))
    first.start()
    assert opened[0].wait(60)
    threads_with_one_stream = daphne.num_threads()
    others = [threading.Thread(target=follow, args=(i,)) for i in range(1, STREAMS)]
    for thread in others:
        thread.start()
    for event in opened:
        assert event.wait(60)
    # Every stream has replayed the stored frames and now waits for the run, on daphne's
    # loop: the shared pool its reads borrow may have grown, by far less than a thread each.
    grown = daphne.num_threads() - threads_with_one_stream
    assert grown < STREAMS // 2, grown

    gate.open()
    for thread in [first, *others]:
        thread.join(60)
        assert not thread.is_alive()
    for frames in received:
        assert frames[0]["type"] == "message.created"
        assert frames[-1]["type"] == "run.finished"
        assert frames[-1]["message"]["content"] == "Forty-two."


def test_events_from_any_seq_and_from_last_event_id(live_stack, user):
    model = _model_name("v1-seq")
    live_stack.model.script(model, [ANSWER])
    live_stack.profile(model, tools=())
    with _http(live_stack, _secret(user)) as http:
        run = _start(http, model)
        assert live_stack.wait_for_run(run["id"]).status == AgentRun.Status.SUCCEEDED
        with http.stream("GET", f"/v1/runs/{run['id']}/events") as response:
            everything = _events(response)
        started = next(e["id"] for e in everything if e["event"] == "run.started")
        with http.stream("GET", f"/v1/runs/{run['id']}/events?after_seq={started}") as response:
            after = _events(response)
        with http.stream(
            "GET",
            f"/v1/runs/{run['id']}/events",
            headers={"Last-Event-ID": str(started)},
        ) as response:
            resumed = _events(response)
        past_the_end = everything[-1]["id"]
        with http.stream(
            "GET", f"/v1/runs/{run['id']}/events?after_seq={past_the_end}"
        ) as response:
            nothing = _events(response)
        refused = http.get(f"/v1/runs/{run['id']}/events?after_seq=-1")

    assert [e["id"] for e in everything] == sorted(e["id"] for e in everything)
    assert [e["event"] for e in everything][-1] == "run.finished"
    assert all(e["data"]["seq"] == e["id"] for e in everything)
    assert after == [e for e in everything if e["id"] > started]
    assert resumed == after
    assert nothing == []
    assert refused.status_code == 400
    assert refused.json()["code"] == "invalid"


def test_stop_through_the_api_ends_the_run_and_its_stream(live_stack, user):
    model = _model_name("v1-stop")
    gate = Gate()
    live_stack.model.script(model, [gate.hold(ANSWER)])
    live_stack.profile(model, tools=())
    with _http(live_stack, _secret(user)) as http:
        run = _start(http, model)
        gate.wait_arrived()

        stopped = http.post(f"/v1/runs/{run['id']}/cancel")
        assert stopped.status_code == 200
        with http.stream("GET", f"/v1/runs/{run['id']}/events") as response:
            frames = _events(response)
        gate.open()
        final = http.get(f"/v1/runs/{run['id']}").json()

    assert frames[-1]["event"] == "run.cancelled"
    assert final["status"] == "cancelled"
    assert final["answer"] is None


def test_a_streamed_completion_that_pauses_ends_with_approval_required(live_stack, user):
    tickets = CountingServer()
    try:
        tool = f"file_ticket_{uuid.uuid4().hex[:6]}"
        tickets.tool(tool, needs_approval=True)
        model = _model_name("v1-stream-pause")
        live_stack.profile(model, tools=(tool,))
        live_stack.model.script(
            model,
            [Reply(f'Thought: File it.\nAction: {tool}\nAction Input: {{"title": "Printer"}}')],
        )
        sdk = openai.OpenAI(
            base_url=live_stack.daphne.url + "/v1", api_key=_secret(user), max_retries=0
        )

        chunks = list(
            sdk.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "File it."}], stream=True
            )
        )

        last = chunks[-1]
        assert last.choices[0].finish_reason == "approval_required"
        (pending,) = last.model_extra["chatsite"]["pending_approvals"]
        assert pending["tool"] == tool
        assert pending["decide_url"].endswith(f"/v1/approvals/{pending['approval_id']}/decide")
        assert tickets.calls == 0
        assert AgentRun.objects.get().status == AgentRun.Status.AWAITING_APPROVAL
    finally:
        tickets.close()


def test_each_key_has_its_own_rate_limit(live_stack, user):
    limited = _secret(user, requests_per_minute=2)
    other = _secret(user, requests_per_minute=2)
    with _http(live_stack, limited) as http:
        statuses = [http.get("/v1/models").status_code for _ in range(3)]
        refused = http.get("/v1/models")
    with _http(live_stack, other) as http:
        still_open = http.get("/v1/models").status_code

    assert statuses == [200, 200, 429]
    assert refused.json()["code"] == "throttled"
    assert int(refused.headers["Retry-After"]) > 0
    assert still_open == 200
