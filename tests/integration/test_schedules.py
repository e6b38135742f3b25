"""Schedules fired by a real celery beat into a real worker: the run, the notification over
the real socket, the signed webhook delivery on loopback; and a beat killed across a firing
time fires it once when it is back.

The clock is the schedule's: its first occurrence is a few seconds ahead, and beat ticks every
second (``SCHEDULE_TICK_SECONDS``); the tests wait on rows and frames, never on a sleep.
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agents.llm.scripted import Reply
from agents.models import AgentRun, Schedule, ScheduleFiring, WebhookDelivery
from agents.services.schedules import ScheduleFields, schedule_create
from agents.services.webhooks import webhook_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FINAL = "Thought: It is morning.\nFinal Answer: Good morning, here is your digest."
BEAT_ENV = {"SCHEDULE_TICK_SECONDS": "1"}


class _Receiver:
    """A webhook receiver on loopback that records every request it gets."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.arrived = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers), body))
                receiver.arrived.set()
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    server = _Receiver()
    yield server
    server.close()


def _wait_for(find, *, what: str, timeout: float = 60.0, logs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = find()
        if found:
            return found
        time.sleep(0.1)
    detail = "\n".join(process.log_text()[-4000:] for process in logs)
    raise TimeoutError(f"{what} did not happen:\n{detail}")


def _schedule(user, profile, *, seconds_ahead: float, rule: str = "FREQ=DAILY") -> Schedule:
    return schedule_create(
        owner=user,
        fields=ScheduleFields(
            profile=profile,
            title="Morning digest",
            prompt="Give me my morning digest.",
            rule=rule,
            # Whole seconds: the occurrence as stored is the one compared below.
            starts_at=(timezone.now() + timedelta(seconds=seconds_ahead)).replace(microsecond=0),
            time_zone="Asia/Shanghai",
        ),
    )


def test_a_schedule_fires_at_its_time_and_its_owner_is_told(live_stack, spawn_beat, receiver, user):
    model = f"sched-{uuid.uuid4().hex[:8]}"
    live_stack.model.script(model, [Reply(FINAL)])
    profile = live_stack.profile(model)
    hook = webhook_create(owner=user, url=receiver.url)
    notifications = live_stack.connect_notifications(user)
    assert notifications.receive() == {"type": "notifications.unread", "unread": 0}
    # Nobody signed in: accepted, then closed as signed out, with nothing sent first.
    with (
        connect(
            live_stack.daphne.ws_url("/ws/notifications/"), origin=live_stack.daphne.url
        ) as anonymous,
        pytest.raises(ConnectionClosed) as closed,
    ):
        anonymous.recv(timeout=10)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4401

    schedule = _schedule(user, profile, seconds_ahead=3)
    first = schedule.next_fire_at
    beat = spawn_beat(**BEAT_ENV)

    firing = _wait_for(
        lambda: ScheduleFiring.objects.filter(schedule=schedule).first(),
        what="the firing",
        logs=(beat, live_stack.worker),
    )
    assert firing.occurrence == first
    assert firing.run is not None, firing.error
    run = live_stack.wait_for_run(firing.run_id)
    assert run.status == AgentRun.Status.SUCCEEDED
    assert run.trigger_message.content == "Give me my morning digest."
    assert run.conversation.owner == user
    schedule.refresh_from_db()
    assert schedule.next_fire_at == first + timedelta(days=1)

    frame = notifications.receive_until(lambda f: f["type"] == "notification")[-1]
    assert frame["unread"] == 1
    assert frame["notification"]["kind"] == "finished"
    assert frame["notification"]["run_id"] == run.pk
    assert frame["notification"]["conversation_id"] == run.conversation_id
    assert frame["notification"]["schedule_id"] == schedule.pk

    delivery = _wait_for(
        lambda: WebhookDelivery.objects.filter(
            webhook=hook.webhook, status=WebhookDelivery.Status.DELIVERED
        ).first(),
        what="the webhook delivery",
        logs=(live_stack.worker,),
    )
    assert delivery.attempts == 1
    assert delivery.response_status == 204
    assert len(receiver.received) == 1
    headers, body = receiver.received[0]
    timestamp = headers["X-Chatsite-Timestamp"]
    expected = hmac.new(hook.secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    assert hmac.compare_digest(headers["X-Chatsite-Signature"], "sha256=" + expected.hexdigest())
    assert json.loads(body)["notification"]["run_id"] == run.pk
    # One firing for the occurrence, one run, one message: beat kept ticking meanwhile.
    assert ScheduleFiring.objects.filter(schedule=schedule).count() == 1
    assert AgentRun.objects.filter(conversation__owner=user).count() == 1


def test_a_firing_missed_while_beat_was_down_runs_once_when_it_is_back(
    live_stack, spawn_beat, user
):
    model = f"sched-down-{uuid.uuid4().hex[:8]}"
    live_stack.model.script(model, [Reply(FINAL), Reply(FINAL)])
    profile = live_stack.profile(model)
    beat = spawn_beat(**BEAT_ENV)
    worker = live_stack.worker
    ticks_before = worker.log_text().count("agents.schedules_fire_due")
    # Beat is up and ticking before the schedule exists.
    _wait_for(
        lambda: worker.log_text().count("agents.schedules_fire_due") > ticks_before,
        what="a first tick",
        logs=(beat, worker),
    )
    schedule = _schedule(user, profile, seconds_ahead=4)
    occurrence = schedule.next_fire_at
    beat.kill()
    # Across the firing time, with nothing to fire it.
    _wait_for(lambda: timezone.now() > occurrence + timedelta(seconds=2), what="the firing time")
    assert not ScheduleFiring.objects.filter(schedule=schedule).exists()

    beat.start()
    firing = _wait_for(
        lambda: ScheduleFiring.objects.filter(schedule=schedule).first(),
        what="the late firing",
        logs=(beat, worker),
    )
    assert firing.occurrence == occurrence
    run = live_stack.wait_for_run(firing.run_id)
    assert run.status == AgentRun.Status.SUCCEEDED
    # Several more ticks reach the worker and find nothing due: still exactly one firing.
    seen = worker.log_text().count("agents.schedules_fire_due")
    _wait_for(
        lambda: worker.log_text().count("agents.schedules_fire_due") >= seen + 6,
        what="three more ticks",
        logs=(beat, worker),
    )
    assert ScheduleFiring.objects.filter(schedule=schedule).count() == 1
    assert AgentRun.objects.filter(conversation__owner=user).count() == 1
    schedule.refresh_from_db()
    assert schedule.next_fire_at == occurrence + timedelta(days=1)
