"""Evaluation sets: a profile's cases, run against a prompt version as replays, checked.

- **Cases.** A conversation up to a question and what a good run answering it does
  (``EvalCase``). Made from a stored run (the run inspector, or every thumbs-down of the
  profile from the feedback page): its branch down to the question is copied into the case
  and the run is kept as the case's source, so its recorded tool observations answer the
  replay's calls. Or written by hand in the admin.
- **Running a set** against a version (``eval_run_start``: the admin, ``manage.py
  evaluate``) writes an ``EvalRun`` with one ``EvalResult`` per case and queues the Celery
  task ``agents.eval_run_queue``, which starts one replay per case
  (``agents/services/replays.py``: the same copy, ledger and ``RecordedCalls`` as a replay
  of one run; a hand-written case has no record, so its calls are unrecorded). Each replay
  is an ordinary run on the one run path; when it ends, ``eval_run_ended`` (called where
  every run's end is told, ``agents/services/execution.py``) checks it
  (``agents/evaluation.py``) and, with the last case, closes the evaluation run.
- **The gate.** With ``CHAT_EVAL_GATE_PUBLISH`` on, publishing a version onto a profile
  that has sets (``prompt_version_publish``) needs, on every set, a finished evaluation of
  that version passing at least as many cases as the latest one of the profile's current
  version (``eval_gate_check``). Saving a gated profile writes a draft version instead of
  changing what runs use (``agents/services/prompt_versions.py``).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext

from agents import events
from agents.evaluation import RunOutcome, run_checks
from agents.models import (
    AgentProfile,
    AgentRun,
    AnswerFeedback,
    EvalCase,
    EvalResult,
    EvalRun,
    EvalSet,
    Message,
    PromptVersion,
)
from agents.protocol import evaluation_progress_frame
from agents.runs.reads import run_log_steps
from agents.selectors import branch_ids, eval_run_progress
from agents.services.replays import ReplayRefused, replay_start
from agents.services.usage import QuotaExceeded, usage_check_quota, usage_refusal

QUEUE_TASK = "agents.eval_run_queue"


class EvalRefused(Exception):
    """What staff asked of an evaluation cannot be done; the message says why."""


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------


def eval_case_from_run(*, run: AgentRun, eval_set: EvalSet) -> EvalCase:
    """A case of ``eval_set`` asking ``run``'s question after the same messages; the run
    stays its source (its recorded observations answer the replays' tool calls). A run
    already in the set gives the case it made."""
    if run.is_replay:
        raise EvalRefused(gettext("A replay cannot be a case; use its original."))
    if not run.is_terminal:
        raise EvalRefused(gettext("Only a run that has ended can be a case."))
    existing = eval_set.cases.filter(source_run=run).first()
    if existing is not None:
        return existing
    ids = branch_ids(conversation=run.conversation, leaf_id=run.trigger_message_id)
    messages = Message.objects.in_bulk(ids)
    *before, question = [messages[message_id] for message_id in ids]
    return EvalCase.objects.create(
        eval_set=eval_set,
        name=_case_name(question.content, run),
        history=[{"role": message.role, "content": message.content} for message in before],
        question=question.content,
        source_run=run,
    )


def eval_cases_from_thumbs_down(*, eval_set: EvalSet) -> list[EvalCase]:
    """A case for every run of the set's profile whose answer got a thumbs down and that is
    not a case of the set yet; returns the new cases."""
    runs = (
        AgentRun.objects.filter(
            answer__feedback__rating=AnswerFeedback.Rating.DOWN,
            profile_version__profile_id=eval_set.profile_id,
            replay_unrecorded="",
        )
        .exclude(eval_cases__eval_set=eval_set)
        .distinct()
        .order_by("pk")
    )
    return [eval_case_from_run(run=run, eval_set=eval_set) for run in runs]


def _case_name(question: str, run: AgentRun) -> str:
    line = question.strip().splitlines()[0] if question.strip() else ""
    return (line[:80] or gettext("Run %(number)s") % {"number": run.pk})[:200]


# --------------------------------------------------------------------------------------
# Running a set
# --------------------------------------------------------------------------------------


@transaction.atomic
def eval_run_start(*, eval_set: EvalSet, version: PromptVersion, user: User) -> EvalRun:
    """Run every case of ``eval_set`` against ``version`` as replays started by ``user``
    (their tokens). The replays are started by a Celery task after commit."""
    cases = list(eval_set.cases.order_by("pk"))
    if not cases:
        raise EvalRefused(gettext("The set has no cases yet."))
    try:
        usage_check_quota(user_id=user.pk)
    except QuotaExceeded as exceeded:
        raise EvalRefused(str(usage_refusal(exceeded))) from None
    eval_run = EvalRun.objects.create(
        eval_set=eval_set, version=version, started_by=user, cases=len(cases)
    )
    EvalResult.objects.bulk_create(EvalResult(eval_run=eval_run, case=case) for case in cases)
    transaction.on_commit(lambda: eval_run_enqueue(eval_run_id=eval_run.pk))
    return eval_run


def eval_run_enqueue(*, eval_run_id: int) -> None:
    from celery import current_app

    if current_app.conf.task_always_eager:
        current_app.loader.import_default_modules()
        current_app.tasks[QUEUE_TASK].apply(args=[eval_run_id])
        return
    current_app.send_task(QUEUE_TASK, args=[eval_run_id])


def eval_run_queue(*, eval_run_id: int) -> int:
    """Start the replay of every case of the evaluation run that has none yet (the task's
    body: run twice, it starts nothing twice). Returns how many it started."""
    started = 0
    result_ids = EvalResult.objects.filter(
        eval_run_id=eval_run_id, run__isnull=True, passed__isnull=True
    ).values_list("pk", flat=True)
    for result_id in list(result_ids):
        started += _start_case(result_id)
    return started


def _start_case(result_id: int) -> int:
    with transaction.atomic():
        result = (
            EvalResult.objects.select_for_update(of=("self",))
            .select_related("case__source_run", "eval_run__version", "eval_run__started_by")
            .filter(pk=result_id, run__isnull=True, passed__isnull=True)
            .first()
        )
        if result is None:
            return 0
        case, eval_run = result.case, result.eval_run
        source = case.source_run if case.source_run and not case.source_run.is_replay else None
        messages = [(item["role"], item["content"]) for item in case.history]
        messages.append((Message.Role.USER, case.question))
        starter = eval_run.started_by
        try:
            if starter is None:
                raise ReplayRefused(gettext("The staff member who started it is gone."))
            usage_check_quota(user_id=starter.pk)
            with transaction.atomic():
                result.run = replay_start(
                    messages=messages,
                    user=starter,
                    version=eval_run.version,
                    replay_of=source,
                    title=gettext("Evaluation case %(name)s") % {"name": case.name},
                )
        except (ReplayRefused, QuotaExceeded) as refused:
            reason = (
                str(usage_refusal(refused)) if isinstance(refused, QuotaExceeded) else str(refused)
            )
            result.passed = False
            result.checks = [
                {"expectation": gettext("The case could be run"), "passed": False, "detail": reason}
            ]
            result.save(update_fields=["passed", "checks"])
            _close_if_done(eval_run.pk)
            _publish_progress(eval_run.pk, result.pk)
            return 0
        result.save(update_fields=["run"])
        _publish_progress(eval_run.pk, result.pk)
    return 1


def eval_run_ended(*, run: AgentRun) -> None:
    """Check an ended run that is a case's replay, and close its evaluation run with the
    last case. Any other run: one indexed read."""
    with transaction.atomic():
        result = (
            EvalResult.objects.select_for_update(of=("self",))
            .select_related("case")
            .filter(run_id=run.pk, passed__isnull=True)
            .first()
        )
        if result is None:
            return
        run = AgentRun.objects.get(pk=run.pk)
        if not run.is_terminal and run.status not in AgentRun.OWNER_PAUSED_STATUSES:
            return
        # A replay stopped at a budget waits for a Continue nobody gives: for the case, it
        # ended without its answer (a replay never waits for an approval).
        case = result.case
        outcome = RunOutcome(
            ended_with_answer=run.status == AgentRun.Status.SUCCEEDED,
            steps=run_log_steps(run=run),
            model_calls=run.model_calls.count(),
            tokens=run.prompt_tokens + run.completion_tokens,
        )
        checks = run_checks(
            outcome,
            must_call=case.must_call,
            must_not_call=case.must_not_call,
            answer_contains=case.answer_contains,
            answer_matches=case.answer_matches,
            max_steps=case.max_steps,
            max_tokens=case.max_tokens,
        )
        result.checks = [check.as_json() for check in checks]
        result.passed = all(check.passed for check in checks)
        result.tokens = outcome.tokens
        result.steps = outcome.model_calls
        result.save(update_fields=["checks", "passed", "tokens", "steps"])
        _close_if_done(result.eval_run_id)
        _publish_progress(result.eval_run_id, result.pk)


def _close_if_done(eval_run_id: int) -> None:
    eval_run = EvalRun.objects.select_for_update().get(pk=eval_run_id)
    results = eval_run.results.all()
    if eval_run.status == EvalRun.Status.DONE or results.filter(passed__isnull=True).exists():
        return
    eval_run.passed = results.filter(passed=True).count()
    eval_run.status = EvalRun.Status.DONE
    eval_run.finished_at = timezone.now()
    eval_run.save(update_fields=["passed", "status", "finished_at"])


def _publish_progress(eval_run_id: int, result_id: int) -> None:
    """Tell the staff watching the evaluation (its page's socket) how far it is and how the
    case changed, once the transaction commits (docs/protocol.md, "Evaluation progress")."""
    progress = eval_run_progress(eval_run_id=eval_run_id, result_ids=[result_id])
    if progress is None:
        return
    frame = evaluation_progress_frame(
        progress.eval_run, progress.results, checked=progress.checked, passed=progress.passed
    )
    events.publish_evaluation_on_commit(eval_run_id, frame)


# --------------------------------------------------------------------------------------
# The gate
# --------------------------------------------------------------------------------------


class EvalGateRefused(Exception):
    """A version may not go live: it passes less than the current one (the message)."""


def eval_gate_applies(*, profile: AgentProfile) -> bool:
    """Whether the gate holds ``profile``: ``CHAT_EVAL_GATE_PUBLISH`` is on and the profile
    has evaluation sets to pass."""
    return bool(settings.CHAT_EVAL_GATE_PUBLISH) and profile.eval_sets.exists()


def eval_gate_check(
    *, profile: AgentProfile, candidate: PromptVersion, current: PromptVersion | None
) -> None:
    """With ``CHAT_EVAL_GATE_PUBLISH`` on: refuse ``candidate`` for ``profile`` unless, on
    each of the profile's sets, its latest finished evaluation passes at least as many
    cases as the latest finished one of ``current`` (the profile's live version)."""
    if not settings.CHAT_EVAL_GATE_PUBLISH:
        return
    for eval_set in profile.eval_sets.order_by("name"):
        mine = _latest_done(eval_set, candidate)
        if mine is None:
            raise EvalGateRefused(
                gettext(
                    "%(version)s has not been evaluated on the set “%(set)s” yet; run the set "
                    "against it first."
                )
                % {"version": candidate, "set": eval_set.name}
            )
        theirs = _latest_done(eval_set, current) if current is not None else None
        if theirs is not None and current != candidate and mine.passed < theirs.passed:
            raise EvalGateRefused(
                gettext(
                    "%(version)s passes %(passed)s of %(cases)s cases of the set “%(set)s”; "
                    "the current version %(current)s passes %(current_passed)s of "
                    "%(current_cases)s. It cannot be published."
                )
                % {
                    "version": candidate,
                    "passed": mine.passed,
                    "cases": mine.cases,
                    "set": eval_set.name,
                    "current": current,
                    "current_passed": theirs.passed,
                    "current_cases": theirs.cases,
                }
            )


def _latest_done(eval_set: EvalSet, version: PromptVersion) -> EvalRun | None:
    return (
        eval_set.runs.filter(Q(version=version), status=EvalRun.Status.DONE).order_by("-pk").first()
    )
