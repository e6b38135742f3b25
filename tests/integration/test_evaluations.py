"""Evaluation sets: a set made from two thumbs-down answers, run against two prompt versions
as replays by a real worker (the model is the scripted server, answering by a policy per
version so the two cases' replays may run in any order), each case's report, and the gate
that refuses to publish the worse version."""

from __future__ import annotations

import time
import uuid

import pytest
from django.core.management import call_command
from django.test import override_settings

from agents.llm.scripted import Reply
from agents.models import Conversation, EvalRun, EvalSet, PromptVersion
from agents.services.evaluations import (
    EvalGateRefused,
    EvalRefused,
    eval_cases_from_thumbs_down,
    eval_run_start,
)
from agents.services.feedback import feedback_set
from agents.services.prompt_versions import prompt_version_ensure, prompt_version_publish
from tests.answers import finished_answer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _sent(request) -> str:
    return "\n".join(str(message.get("content") or "") for message in request["messages"])


def _calculates(request) -> Reply:
    """The good version: asks the calculator, then answers with what it said."""
    # The recorded observation (a case made from a run), or the note on an unrecorded call.
    sent = _sent(request)
    if "Observation: 42" not in sent and "not recorded" not in sent:
        return Reply("Thought: Let me count.\nAction: calculator\nAction Input: 6 * 7")
    return Reply("Thought: The calculator said 42.\nFinal Answer: It is 42.")


def _guesses(request) -> Reply:
    """The worse version: answers at once, without the calculator."""
    return Reply("Thought: I know this.\nFinal Answer: 42, I think.")


def _evaluated(live_stack, eval_run: EvalRun, timeout: float = 90.0) -> EvalRun:
    """The evaluation run once its last case was checked (the worker writes it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        eval_run.refresh_from_db()
        if eval_run.status == EvalRun.Status.DONE:
            return eval_run
        time.sleep(0.1)
    raise TimeoutError(
        f"evaluation {eval_run.pk} did not end:\n{live_stack.worker.log_text()[-5000:]}"
    )


def _report(eval_run: EvalRun) -> list[tuple[str, bool, list[tuple[str, bool]]]]:
    return [
        (
            result.case.name,
            result.passed,
            [(check["expectation"], check["passed"]) for check in result.checks],
        )
        for result in eval_run.results.select_related("case").order_by("case_id")
    ]


@pytest.fixture
def two_versions(live_stack):
    good_model = f"eval-good-{uuid.uuid4().hex[:8]}"
    worse_model = f"eval-worse-{uuid.uuid4().hex[:8]}"
    live_stack.model.policy(good_model, _calculates)
    live_stack.model.policy(worse_model, _guesses)
    profile = live_stack.profile(good_model)
    current = prompt_version_ensure(profile=profile)
    # A draft: another profile nobody chats with, its version the candidate.
    draft = prompt_version_ensure(profile=live_stack.profile(worse_model))
    return profile, current, draft


def test_a_set_from_two_thumbs_down_answers_run_against_two_versions_and_gated(
    live_stack, user, make_user, two_versions
):
    profile, current, draft = two_versions
    staff = make_user("evaluating-staff", is_staff=True)
    for question in ("What is 6 * 7?", "And 6 * 7 once more?"):
        conversation = Conversation.objects.create(owner=user, profile=profile)
        answer = finished_answer(
            conversation=conversation, question=question, profile_version=current
        )
        feedback_set(message=answer, user=user, rating="down", comment="Show the working")
    liked = finished_answer(
        conversation=Conversation.objects.create(owner=user, profile=profile),
        question="What is 2 + 2?",
        profile_version=current,
    )
    feedback_set(message=liked, user=user, rating="up")

    eval_set = EvalSet.objects.create(profile=profile, name="Arithmetic")
    cases = eval_cases_from_thumbs_down(eval_set=eval_set)
    assert [case.question for case in cases] == ["What is 6 * 7?", "And 6 * 7 once more?"]
    assert eval_cases_from_thumbs_down(eval_set=eval_set) == []  # each run once
    first, second = cases
    first.must_call = [{"tool": "calculator", "arguments": r"6 \* 7"}]
    first.answer_contains = "42"
    first.save()
    second.must_not_call = [{"tool": "web_search"}]
    second.answer_matches = r"\b42\b"
    second.max_steps = 2
    second.save()

    good = _evaluated(live_stack, eval_run_start(eval_set=eval_set, version=current, user=staff))
    worse = _evaluated(live_stack, eval_run_start(eval_set=eval_set, version=draft, user=staff))

    assert (good.passed, good.cases) == (2, 2)
    assert _report(good) == [
        (
            "What is 6 * 7?",
            True,
            [
                ("The run ends with an answer", True),
                ("Calls calculator /6 \\* 7/", True),
                ("The answer contains “42”", True),
            ],
        ),
        (
            "And 6 * 7 once more?",
            True,
            [
                ("The run ends with an answer", True),
                ("Does not call web_search", True),
                ("The answer matches /\\b42\\b/", True),
                ("At most 2 steps", True),
            ],
        ),
    ]
    assert (worse.passed, worse.cases) == (1, 2)
    assert [(name, passed) for name, passed, _ in _report(worse)] == [
        ("What is 6 * 7?", False),
        ("And 6 * 7 once more?", True),
    ]
    assert ("Calls calculator /6 \\* 7/", False) in _report(worse)[0][2]
    # The calculator's observation came from the recorded run, and each result has its cost.
    for result in good.results.select_related("run"):
        assert result.run.replay_of_id == result.case.source_run_id
        assert result.tokens == result.run.prompt_tokens + result.run.completion_tokens > 0
    assert all(result.steps == 2 for result in good.results.all())

    # The gate: the worse version may not replace the current one, and nothing changes.
    versions = PromptVersion.objects.filter(profile=profile).count()
    with override_settings(CHAT_EVAL_GATE_PUBLISH=True), pytest.raises(EvalGateRefused) as refused:
        prompt_version_publish(version=draft, profile=profile, user=staff)
    assert str(refused.value) == (
        f"{draft} passes 1 of 2 cases of the set “Arithmetic”; the current version "
        f"{current} passes 2 of 2. It cannot be published."
    )
    assert PromptVersion.objects.filter(profile=profile).count() == versions
    # Gate off, it is published as the profile's next version.
    published = prompt_version_publish(version=draft, profile=profile, user=staff).version
    assert published.profile_id == profile.pk
    assert published.number == current.number + 1


def test_an_empty_set_is_refused_and_evaluate_reports_a_run(
    live_stack, user, make_user, two_versions, capsys
):
    profile, current, _ = two_versions
    staff = make_user("evaluating-staff", is_staff=True, is_superuser=True)
    eval_set = EvalSet.objects.create(profile=profile, name="Empty for now")
    with pytest.raises(EvalRefused, match=r"The set has no cases yet\."):
        eval_run_start(eval_set=eval_set, version=current, user=staff)
    assert not EvalRun.objects.exists()

    eval_set.cases.create(name="By hand", question="What is 6 * 7?", answer_contains="42")
    call_command(
        "evaluate", str(eval_set.pk), "--version", str(current.number), "--user", staff.username
    )
    out = capsys.readouterr().out
    assert "PASS  By hand" in out
    assert "1 of 1 passed" in out
