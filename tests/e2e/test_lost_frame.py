"""A run's last frames lost between the worker and the socket: the page recovers them itself.

The server fills a gap when a later frame shows one, but nothing follows a run's last frame.
Here ``run.finished`` is stored and never published, as if the channel layer had dropped it;
the page must notice the silence while the run is in progress and ``resume`` from the log.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from agents import events
from agents.react.types import FinalAnswerStep, ThoughtStep
from agents.runs.store import run_claim, run_finish, run_record_step, run_started
from agents.services.conversations import conversation_create, message_send
from tests.e2e.conftest import DESKTOP, WAIT_MS

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SILENCE_SECONDS = 1.5
# The page checks for silence every min(1 s, silence / 2) and the replay is one round trip;
# the rest is slack for a loaded machine. Well under the 12 s default, so a page that did
# not take the setting would fail too.
RECOVERED_WITHIN_MS = round(SILENCE_SECONDS * 1000) + 8000
ANSWER = "Recovered from the stored log."


def test_the_lost_end_of_a_run_is_replayed_after_a_silence(
    browser, collected_static, spawn_daphne, stack, user, model_name, monkeypatch
):
    daphne = spawn_daphne(CHAT_RESUME_AFTER_SILENT_SECONDS=str(SILENCE_SECONDS))
    profile = stack.profile(model_name)
    conversation = conversation_create(owner=user, profile=profile)
    # The session worker would run it against the model; this test plays the worker itself.
    stack.worker.pause()
    run = message_send(conversation=conversation, user=user, content="Are you there?").run
    run = run_claim(run_id=run.pk, worker_id="test-worker")
    run_started(run=run, model=model_name, profile=profile.slug, worker_id="test-worker")

    context = browser.new_context(viewport=DESKTOP, base_url=daphne.url)
    context.set_default_timeout(WAIT_MS)
    try:
        name, value = stack.session_cookie(user).split("=", 1)
        context.add_cookies([{"name": name, "value": value, "url": daphne.url}])
        page = context.new_page()
        resumes: list[dict] = []  # the resume frames the page sent, in order

        def on_frame_sent(payload):
            frame = json.loads(payload)
            if frame.get("type") == "resume":
                resumes.append(frame)

        page.on("websocket", lambda ws: ws.on("framesent", on_frame_sent))
        page.goto(f"/c/{conversation.pk}/")
        state = json.loads(page.locator("#chat-state").text_content())
        assert state["resume_after_silent_ms"] == SILENCE_SECONDS * 1000
        stop = page.locator("#stop-button")
        expect(stop).to_be_visible()  # the page knows the run is in progress

        # A step that is delivered live, then the end of the run that is not.
        run_record_step(run=run, step=ThoughtStep(text="Nearly done."), worker_id="test-worker")
        thread = page.locator("#thread")
        expect(thread).to_contain_text("Nearly done.")
        thought_seq = int(page.locator(".step.thought").get_attribute("data-seq"))
        resumes_before_loss = len(resumes)
        monkeypatch.setattr(events, "publish_on_commit", lambda stored: None)
        run_finish(run=run, step=FinalAnswerStep(text=ANSWER), worker_id="test-worker")

        expect(thread).to_contain_text(ANSWER, timeout=RECOVERED_WITHIN_MS)
        expect(stop).to_be_hidden()
        assert thread.get_by_text("Nearly done.").count() == 1
        # It came back because the page asked, from the last seq it held.
        resumes_at_end = len(resumes)
        assert resumes_at_end > resumes_before_loss
        assert resumes[resumes_before_loss]["after_seq"] == thought_seq

        # With no run in progress, silence is normal: the page asks for nothing more.
        page.wait_for_timeout(SILENCE_SECONDS * 1000 * 3)
        assert len(resumes) == resumes_at_end
    finally:
        context.close()
