"""Continue on a stopped answer: a new run answering the same question, shown the stopped
text, whose answer is that text and the rest; a sibling of the stopped answer, like a
regenerate's. Refused, with nothing written, for anything but an answer its owner stopped."""

from __future__ import annotations

import uuid

import pytest

from agents.llm.scripted import Reply
from agents.models import AgentProfile, AgentRun, Message, ModelConfig
from agents.protocol import RefusalCode, RequestRefused
from agents.react.prompt import ContinuedAnswer, join_continuation
from agents.runs.store import run_mark_cancelled
from agents.services.conversations import answer_continue, conversation_create, message_send
from tests.driving import run_execute

pytestmark = pytest.mark.django_db(transaction=True)

PARTIAL = "The three primary colours are red,"


@pytest.fixture
def scripted_profile(scripted_model):
    def make(*replies) -> tuple[AgentProfile, str]:
        name = f"cont-{uuid.uuid4().hex[:8]}"
        scripted_model.script(name, list(replies))
        config = ModelConfig.objects.create(
            name=name, base_url=scripted_model.base_url, model=name, max_retries=0
        )
        return AgentProfile.objects.create(name=name, slug=name, model_config=config), name

    return make


def _stopped_answer(user, profile, partial: str = PARTIAL) -> Message:
    """A question whose run was stopped while it wrote ``partial``."""
    conversation = conversation_create(owner=user, profile=profile)
    sent = message_send(conversation=conversation, user=user, content="Name the primary colours.")
    assert run_mark_cancelled(run=sent.run, partial_answer=partial)
    return Message.objects.get(run=sent.run)


def test_continue_queues_a_run_on_the_same_question_and_moves_the_branch_to_it(
    user, scripted_profile
):
    profile, _ = scripted_profile()
    stopped = _stopped_answer(user, profile)

    run = answer_continue(message=stopped, user=user)

    assert run.status == AgentRun.Status.QUEUED
    assert run.trigger_message_id == stopped.parent_id
    assert run.continues_answer_id == stopped.pk
    conversation = stopped.conversation
    conversation.refresh_from_db()
    # As for a regenerate: the branch ends at the question until the new answer comes.
    assert conversation.active_leaf_id == stopped.parent_id


def test_the_continued_answer_is_the_stopped_text_and_the_rest_as_one_sibling(
    user, scripted_profile, scripted_model
):
    profile, model = scripted_profile(
        Reply("Thought: I go on from where I stopped.\nFinal Answer: are red, yellow and blue.")
    )
    stopped = _stopped_answer(user, profile)
    run = answer_continue(message=stopped, user=user)

    run_execute(run.pk)

    run.refresh_from_db()
    assert run.status == AgentRun.Status.SUCCEEDED
    answer = Message.objects.get(run=run)
    assert answer.content == f"{PARTIAL} yellow and blue."
    assert answer.parent_id == stopped.parent_id  # a sibling of the stopped answer
    stopped.conversation.refresh_from_db()
    assert stopped.conversation.active_leaf_id == answer.pk
    assert Message.objects.filter(pk=stopped.pk, content=PARTIAL).exists()  # kept as it was
    # The model was shown the conversation's question and the stopped text.
    (request,) = scripted_model.requests(model)
    prompt = request["messages"][-1]["content"]
    assert "Name the primary colours." in prompt
    assert PARTIAL in prompt
    finished = run.events.get(type="run.finished")
    assert finished.payload["message"]["content"] == answer.content


def test_the_words_the_model_repeats_join_the_two_texts():
    # The whole answer again, the last words (a cut word too), or none of them.
    assert join_continuation("Red, yellow", "Red, yellow and blue.") == "Red, yellow and blue."
    assert join_continuation("Red, yel", "Red, yellow and blue.") == "Red, yellow and blue."
    assert join_continuation("are red,", "red, yellow") == "are red, yellow"
    assert join_continuation("are red,", "yellow") == "are red, yellow"
    assert join_continuation("are red,", ". Done") == "are red,. Done"
    assert join_continuation("红色，", "黄色和蓝色。") == "红色，黄色和蓝色。"


@pytest.mark.parametrize(
    ("partial", "rest"),
    [
        ("Red, yel", "Red, yellow and blue."),
        ("The colours are red,", "red, yellow"),
        ("The colours are red,", "yellow"),
        ("红色，", "黄色和蓝色。"),
        ("a b c", "b c d e"),
    ],
)
@pytest.mark.parametrize("piece", [1, 3, 7])
def test_the_live_answer_is_always_the_start_of_the_stored_one(partial, rest, piece):
    live = ContinuedAnswer(partial)
    shown = ""
    for start in range(0, len(rest), piece):
        shown += live.feed(rest[start : start + piece])
        assert join_continuation(partial, rest).startswith(shown)
    assert shown == join_continuation(partial, rest)


@pytest.mark.parametrize("case", ["finished", "question", "empty", "another_user"])
def test_only_an_answer_its_owner_stopped_can_be_continued(
    case, user, other_user, scripted_profile
):
    profile, _ = scripted_profile()
    stopped = _stopped_answer(user, profile)
    who = user
    target = stopped
    if case == "finished":
        AgentRun.objects.filter(pk=stopped.run_id).update(status=AgentRun.Status.SUCCEEDED)
    elif case == "question":
        target = Message.objects.get(pk=stopped.parent_id)
    elif case == "empty":
        Message.objects.filter(pk=stopped.pk).update(content="  ")
    else:
        who = other_user
    target.refresh_from_db()
    runs_before = AgentRun.objects.count()

    with pytest.raises(RequestRefused) as refused:
        answer_continue(message=target, user=who)

    expected = RefusalCode.NOT_FOUND if case == "another_user" else RefusalCode.NOT_CONTINUABLE
    assert refused.value.code == expected
    assert AgentRun.objects.count() == runs_before
    stopped.conversation.refresh_from_db()
    assert stopped.conversation.active_leaf_id == stopped.pk  # the branch did not move


def test_continue_waits_for_a_run_in_progress(user, scripted_profile):
    profile, _ = scripted_profile()
    stopped = _stopped_answer(user, profile)
    answer_continue(message=stopped, user=user)

    with pytest.raises(RequestRefused) as refused:
        answer_continue(message=stopped, user=user)

    assert refused.value.code == RefusalCode.RUN_IN_PROGRESS
