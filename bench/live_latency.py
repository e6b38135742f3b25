"""From the model's first thought word to those words on the page: p50 / p99.

Real processes (one worker, one daphne, from ``bench/live.py``) and a real Chromium page; the
scripted model writes at a fixed pace. Each reply is held (``Pause``) right after its
``Thought:`` label; the moment the bench lets it go is when the first thought word leaves the
model. The page notes, with a MutationObserver, when a live thought first shows text. Both
clocks are this machine's wall clock.

    .venv/bin/python bench/live_latency.py --runs 40
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from django.core.management import call_command
from live import make_profile, make_user, migrate, session_cookie, stack, summary_ms

from agents.llm.scripted import Pause, Reply, ScriptedServer
from agents.services.conversations import conversation_create

CHROMIUM = "/usr/bin/chromium"
LABEL = "Thought: "
REPLY = LABEL + "I can answer this one directly, without a tool.\nFinal Answer: ok"

# Notes when each run's live thought first has text (seconds since the epoch).
OBSERVER = """
window.__thoughtShown = {};
new MutationObserver(() => {
  for (const item of document.querySelectorAll('.step.thought.live')) {
    const run = item.closest('[data-run-id]').dataset.runId;
    if (!(run in window.__thoughtShown) && item.textContent.length > 'Thought'.length) {
      window.__thoughtShown[run] = (performance.timeOrigin + performance.now()) / 1000;
    }
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--chunk-size", type=int, default=4)
    parser.add_argument("--chunk-interval", type=float, default=0.05, help="seconds")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the bench's own ORM calls
    # (a new conversation) are plain synchronous code, as in tests/e2e/conftest.py.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

    migrate()
    # daphne serves the page's scripts from STATIC_ROOT (whitenoise), as in production.
    call_command("collectstatic", "--noinput", verbosity=0)
    model = f"live-latency-{int(time.time())}"
    with ScriptedServer() as model_server, stack(model_server, concurrency=4) as (_, daphne):
        profile = make_profile(model_server, model)
        user = make_user("latency")
        conversation = conversation_create(owner=user, profile=profile)
        released: dict[int, float] = {}

        def reply_released_at(number: int):
            pause = Pause(after_chars=len(LABEL))

            def release() -> None:
                pause.reached.wait(120)
                released[number] = time.time()
                pause.open()

            threading.Thread(target=release, daemon=True).start()
            return Reply(
                REPLY,
                pause=pause,
                chunk_size=args.chunk_size,
                chunk_interval=args.chunk_interval,
            )

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            context = browser.new_context(base_url=daphne.url)
            name, value = session_cookie(user).split("=", 1)
            context.add_cookies([{"name": name, "value": value, "url": daphne.url}])
            page = context.new_page()
            page.add_init_script(OBSERVER)
            page.goto(f"/c/{conversation.pk}/")
            latencies = []
            for number in range(args.runs):
                model_server.script(model, [reply_released_at(number)])
                box = page.get_by_label("Message", exact=True)
                box.fill(f"Question {number}")
                box.press("Enter")
                page.locator(".msg.assistant .usage").nth(number).wait_for(timeout=60_000)
                shown = page.evaluate("window.__thoughtShown")
                run_id = page.locator(".msg.assistant").nth(number).get_attribute("data-run-id")
                latencies.append(shown[run_id] - released[number])
            browser.close()

    print(f"runs: {len(latencies)}, model pace: {args.chunk_size} characters every ", end="")
    print(f"{args.chunk_interval * 1000:.0f} ms")
    print(f"first thought word, model → page: {summary_ms(latencies)}")


if __name__ == "__main__":
    main()
