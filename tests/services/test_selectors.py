"""What each read shows to whom: a user's own rows, never another's, and a foreign id that
looks exactly like a missing one; in the order the pages show them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser, Group
from django.utils import timezone

from agents import selectors
from agents.models import (
    AgentProfile,
    AgentRun,
    AnswerFeedback,
    ApiKey,
    Conversation,
    ConversationFolder,
    ConversationShare,
    EvalCase,
    EvalResult,
    EvalRun,
    EvalSet,
    Message,
    Notification,
    NotificationPreference,
    ProviderIdentity,
    SandboxFile,
    Schedule,
    ScheduleFiring,
    ToolApproval,
    UsageBudget,
    UserPreference,
    Webhook,
    WebhookDelivery,
)
from agents.services.branches import branch_activate
from agents.services.conversations import conversation_create, message_send
from tests.tree import continue_branch

pytestmark = pytest.mark.django_db

ANONYMOUS = AnonymousUser()


def chat(owner, title: str = "", **fields) -> Conversation:
    return Conversation.objects.create(owner=owner, title=title, **fields)


def asked(conversation: Conversation, content: str) -> Message:
    return continue_branch(conversation, Message.Role.USER, content)


def answered(conversation: Conversation, content: str, **fields) -> Message:
    return continue_branch(conversation, Message.Role.ASSISTANT, content, **fields)


def sibling(of: Message, content: str, **fields) -> Message:
    """A second version of ``of`` (an edit, or a regenerated answer), now the one shown."""
    message = Message.objects.create(
        conversation=of.conversation, role=of.role, content=content, parent=of.parent, **fields
    )
    branch_activate(conversation=of.conversation, leaf_id=message.pk)
    return message


def run_for(message: Message, **fields) -> AgentRun:
    return AgentRun.objects.create(
        conversation=message.conversation, trigger_message=message, **fields
    )


def titles(conversations) -> list[str]:
    return [c.title for c in conversations]


# --- conversations ---------------------------------------------------------------------


def test_the_list_holds_only_my_chats_that_are_not_archived_or_replay_copies(user, other_user):
    chat(user, "mine")
    chat(user, "archived", archived=True)
    chat(user, "a replay's copy", for_replay=True)
    chat(other_user, "theirs")

    assert titles(selectors.conversation_list(user=user)) == ["mine"]
    assert titles(selectors.conversation_list(user=user, archived=True)) == ["archived"]
    assert titles(selectors.conversation_list(user=other_user)) == ["theirs"]
    assert list(selectors.conversation_list(user=ANONYMOUS)) == []


def test_the_list_shows_pinned_chats_first_newest_pin_on_top_then_the_most_recent(user):
    now = timezone.now()
    old, recent, pinned_long_ago, pinned_just_now = (
        chat(user, name) for name in ("old", "recent", "pinned long ago", "pinned just now")
    )
    Conversation.objects.filter(pk=old.pk).update(updated_at=now - timedelta(days=2))
    Conversation.objects.filter(pk=recent.pk).update(updated_at=now - timedelta(days=1))
    Conversation.objects.filter(pk=pinned_long_ago.pk).update(
        pinned_at=now - timedelta(days=9), updated_at=now - timedelta(days=9)
    )
    Conversation.objects.filter(pk=pinned_just_now.pk).update(
        pinned_at=now, updated_at=now - timedelta(days=8)
    )

    assert titles(selectors.conversation_list(user=user)) == [
        "pinned just now",
        "pinned long ago",
        "recent",
        "old",
    ]


def test_chats_touched_at_the_same_instant_list_newest_first(user):
    same = timezone.now()
    first, second = chat(user, "first"), chat(user, "second")
    Conversation.objects.filter(pk__in=[first.pk, second.pk]).update(updated_at=same)

    assert titles(selectors.conversation_list(user=user)) == ["second", "first"]


def test_a_chat_is_marked_busy_only_while_a_run_is_queued_or_running(user):
    statuses = [AgentRun.Status.QUEUED, AgentRun.Status.RUNNING, *AgentRun.PAUSED_STATUSES]
    statuses += list(AgentRun.TERMINAL_STATUSES)
    for status in statuses:
        run_for(asked(chat(user, status), "q"), status=status)
    chat(user, "no run")

    busy = {c.title: c.has_active_run for c in selectors.conversation_list(user=user)}

    assert busy == {status: status in AgentRun.ACTIVE_STATUSES for status in statuses} | {
        "no run": False
    }
    for status in statuses:
        conversation = Conversation.objects.get(title=status)
        assert selectors.conversation_has_active_run(conversation=conversation) is (
            status in AgentRun.ACTIVE_STATUSES
        )


def test_a_search_finds_a_title_or_the_text_shown_whatever_the_case(user, other_user):
    chat(user, "Trip to Lisbon")
    in_text = chat(user, "plans")
    asked(in_text, "What is the weather in LISBON in May?")
    chat(user, "unrelated")
    asked(chat(other_user, "theirs"), "lisbon too")

    found = {c.title: c.match_excerpt for c in selectors.conversation_list(user=user, q="lisbon")}

    assert found == {
        "Trip to Lisbon": None,
        "plans": "What is the weather in LISBON in May?",
    }


def test_a_search_for_blanks_lists_every_chat(user):
    chat(user, "one")
    chat(user, "two")

    assert sorted(titles(selectors.conversation_list(user=user, q="   "))) == ["one", "two"]


def test_a_search_skips_text_that_is_only_on_an_earlier_branch(user):
    conversation = chat(user, "edited")
    sibling(asked(conversation, "about zebras"), "about horses")

    assert list(selectors.conversation_list(user=user, q="zebras")) == []
    [hit] = selectors.conversation_list(user=user, q="horses")
    assert hit.match_excerpt == "about horses"


def test_a_search_excerpt_is_the_newest_match_cut_around_it(user):
    conversation = chat(user, "long")
    asked(conversation, "needle in an older message")
    before = "x" * 100
    after = "y" * 500
    asked(conversation, before + "needle" + after)

    [hit] = selectors.conversation_list(user=user, q="needle")

    # Eighty characters of context before the match, an ellipsis for what was cut, and
    # 400 characters plus the match's own length from the context's start.
    assert hit.match_excerpt == "…" + "x" * 80 + "needle" + "y" * 320


def test_a_match_near_the_start_keeps_the_text_from_its_first_character(user):
    conversation = chat(user, "short")
    asked(conversation, "x" * 79 + "needle")

    [hit] = selectors.conversation_list(user=user, q="needle")

    assert hit.match_excerpt == "x" * 79 + "needle"


def test_a_match_at_the_start_keeps_as_much_after_it_as_any_other(user):
    conversation = chat(user, "start")
    asked(conversation, "needle" + "y" * 500)

    [hit] = selectors.conversation_list(user=user, q="needle")

    assert hit.match_excerpt == "needle" + "y" * 400


def test_a_match_just_past_the_context_is_cut_with_an_ellipsis(user):
    conversation = chat(user, "short")
    asked(conversation, "a" + "x" * 80 + "needle")

    [hit] = selectors.conversation_list(user=user, q="needle")

    assert hit.match_excerpt == "…" + "x" * 80 + "needle"


def test_one_chat_and_a_bulk_selection_hold_only_my_own_chats(user, other_user):
    mine, theirs = chat(user, "mine"), chat(other_user, "theirs")
    copy = chat(user, "replay copy", for_replay=True)
    second = chat(user, "second")

    assert selectors.conversation_get(user=user, conversation_id=mine.pk) == mine
    assert selectors.conversation_get(user=user, conversation_id=theirs.pk) is None
    assert selectors.conversation_get(user=user, conversation_id=copy.pk) is None
    assert selectors.conversation_get(user=ANONYMOUS, conversation_id=mine.pk) is None
    chat(user, "not selected")
    owned = selectors.conversations_owned(
        user=user, conversation_ids=[second.pk, theirs.pk, copy.pk, mine.pk]
    )
    assert list(owned) == [mine, second]


def test_folders_are_mine_and_listed_by_name(user, other_user):
    later = ConversationFolder.objects.create(owner=user, name="Work")
    earlier = ConversationFolder.objects.create(owner=user, name="Home")
    theirs = ConversationFolder.objects.create(owner=other_user, name="Alpha")

    assert list(selectors.folder_list(user=user)) == [earlier, later]
    assert selectors.folder_get(user=user, folder_id=later.pk) == later
    assert selectors.folder_get(user=user, folder_id=theirs.pk) is None


# --- the log a socket replays ----------------------------------------------------------


def test_the_last_seq_is_told_to_the_owner_only(user, other_user, default_profile):
    conversation = conversation_create(owner=user)
    message_send(conversation=conversation, user=user, content="hello")
    conversation.refresh_from_db()

    assert conversation.last_seq > 0
    assert (
        selectors.conversation_last_seq(user=user, conversation_id=conversation.pk)
        == conversation.last_seq
    )
    assert selectors.conversation_last_seq(user=other_user, conversation_id=conversation.pk) is None
    assert selectors.conversation_last_seq(user=ANONYMOUS, conversation_id=conversation.pk) is None
    assert selectors.conversation_last_seq(user=user, conversation_id=conversation.pk + 99) is None


def test_events_after_a_seq_come_oldest_first_as_models_and_as_rows(user, default_profile):
    conversation = conversation_create(owner=user)
    for text in ("one", "two", "three"):
        message_send(conversation=conversation, user=user, content=text)
        AgentRun.objects.filter(conversation=conversation).update(status=AgentRun.Status.CANCELLED)
    other = conversation_create(owner=user)
    message_send(conversation=other, user=user, content="elsewhere")
    every = list(selectors.events_after(conversation=conversation, after_seq=0))
    seqs = [event.seq for event in every]
    assert seqs == sorted(seqs)
    assert len(seqs) >= 3

    later = selectors.events_after(conversation=conversation, after_seq=seqs[0])
    assert [event.seq for event in later] == seqs[1:]
    page = selectors.events_after(conversation=conversation, after_seq=seqs[0], limit=1)
    assert [event.seq for event in page] == seqs[1:2]
    rows = selectors.event_rows_after(
        conversation_id=conversation.pk, after_seq=seqs[0], limit=len(seqs)
    )
    assert [(row.seq, row.type, row.run_id) for row in rows] == [
        (event.seq, event.type, event.run_id) for event in every[1:]
    ]
    # The payload comes back as data, not as the text the database stores.
    assert rows[0].payload == every[1].payload
    assert isinstance(rows[0].payload, dict)
    one = selectors.event_rows_after(conversation_id=conversation.pk, after_seq=0, limit=1)
    assert [row.seq for row in one] == seqs[:1]


# --- the message tree ------------------------------------------------------------------


def test_the_branch_shown_or_every_message_of_the_tree(user):
    conversation = chat(user, "tree")
    question = asked(conversation, "q")
    first = answered(conversation, "first answer")
    second = sibling(first, "second")

    assert list(selectors.message_list(conversation=conversation)) == [question, second]
    assert list(selectors.message_list(conversation=conversation, all_branches=True)) == [
        question,
        first,
        second,
    ]


def test_a_branch_is_read_from_the_first_message_to_its_leaf_in_this_chat_only(user):
    conversation = chat(user, "tree")
    question = asked(conversation, "q")
    answer = answered(conversation, "a")
    follow_up = asked(conversation, "q2")
    elsewhere = asked(chat(user, "other"), "not here")

    assert selectors.branch_ids(conversation=conversation, leaf_id=answer.pk) == [
        question.pk,
        answer.pk,
    ]
    assert selectors.branch_lines(conversation=conversation, leaf_id=follow_up.pk) == [
        (question.pk, "user", "q"),
        (answer.pk, "assistant", "a"),
        (follow_up.pk, "user", "q2"),
    ]
    assert selectors.branch_ids(conversation=conversation, leaf_id=None) == []
    assert selectors.branch_lines(conversation=conversation, leaf_id=elsewhere.pk) == []


def test_switching_to_a_message_shows_its_newest_descendant(user):
    conversation = chat(user, "tree")
    question = asked(conversation, "q")
    older = answered(conversation, "older")
    newer = Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, content="newer", parent=question
    )
    below_older = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, content="deeper", parent=older
    )
    elsewhere = asked(chat(user, "other"), "x")

    newest = selectors.branch_newest_leaf(conversation=conversation, message_id=question.pk)
    assert newest == below_older.pk
    assert selectors.branch_newest_leaf(conversation=conversation, message_id=newer.pk) == newer.pk
    assert selectors.branch_newest_leaf(conversation=conversation, message_id=elsewhere.pk) is None


def test_the_tree_holds_every_node_and_the_leaf_stored_with_them(user):
    conversation = chat(user, "tree")
    assert selectors.conversation_tree(conversation=conversation) == selectors.Tree(
        nodes=[], active_leaf_id=None
    )
    question = asked(conversation, "q")
    run = run_for(question)
    answer = answered(conversation, "a", run=run)

    tree = selectors.conversation_tree(conversation=conversation)

    assert tree.nodes == [
        selectors.TreeNode(id=question.pk, parent_id=None, role="user", run_id=None),
        selectors.TreeNode(id=answer.pk, parent_id=question.pk, role="assistant", run_id=run.pk),
    ]
    assert tree.active_leaf_id == answer.pk


def test_each_top_level_run_names_the_question_it_answers(user):
    conversation = chat(user, "runs")
    first, second = asked(conversation, "one"), asked(conversation, "two")
    run_one, run_two = run_for(first), run_for(second)
    run_for(second, parent_run=run_two)  # a sub-agent's run: drawn under its parent's call
    run_for(asked(chat(user, "other"), "x"))

    assert selectors.run_triggers(conversation=conversation) == {
        run_one.pk: first.pk,
        run_two.pk: second.pk,
    }


def test_the_branch_shown_draws_the_runs_of_its_answers_and_their_sub_agents(user):
    conversation = chat(user, "view")
    question = asked(conversation, "q")
    run = run_for(question, status=AgentRun.Status.SUCCEEDED)
    answer = answered(conversation, "a", run=run)
    child = run_for(question, parent_run=run)
    grandchild = run_for(question, parent_run=child)
    elsewhere = chat(user, "elsewhere")
    run_for(asked(elsewhere, "other"), status=AgentRun.Status.RUNNING)

    view = selectors.active_branch_view(conversation=conversation)

    assert view == selectors.BranchView(
        message_ids=frozenset({question.pk, answer.pk}),
        run_ids=frozenset({run.pk, child.pk, grandchild.pk}),
    )


def test_an_unanswered_question_shows_its_newest_run_if_newer_than_its_answers(user):
    conversation = chat(user, "attempts")
    first = asked(conversation, "first")
    answered_run = run_for(first, status=AgentRun.Status.SUCCEEDED)
    answered(conversation, "answer", run=answered_run)
    # A later attempt at the answered question failed: the answer shown stands.
    run_for(first, status=AgentRun.Status.FAILED)
    second = asked(conversation, "second")
    # The second question: a failed attempt, then one that answered on another branch.
    run_for(second, status=AgentRun.Status.FAILED)
    answered_elsewhere = run_for(second, status=AgentRun.Status.SUCCEEDED)
    Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content="an answer not shown",
        parent=second,
        run=answered_elsewhere,
    )
    branch_activate(conversation=conversation, leaf_id=second.pk)
    third = asked(conversation, "third")
    run_for(third, status=AgentRun.Status.FAILED)
    failed_third = run_for(third, status=AgentRun.Status.FAILED)  # tried again, failed again

    view = selectors.active_branch_view(conversation=conversation)

    # Nothing newer than the second question's answer: no attempt is drawn after it.
    assert view.run_ids == {answered_run.pk, failed_third.pk}


def test_a_question_still_being_answered_shows_its_run_and_the_sub_agents_under_it(user):
    conversation = chat(user, "going")
    question = asked(conversation, "q")
    run = run_for(question, status=AgentRun.Status.AWAITING_SUBAGENT)
    child = run_for(question, parent_run=run, status=AgentRun.Status.RUNNING)

    view = selectors.active_branch_view(conversation=conversation)

    assert view.run_ids == {run.pk, child.pk}


# --- one row by id: a foreign id is a missing one ---------------------------------------


def test_a_run_an_approval_and_a_message_are_found_by_their_owner_only(user, other_user):
    question = asked(chat(user, "mine"), "q")
    run = run_for(question)
    ToolApproval.objects.create(run=run, call_id="c0", tool="calculator")
    approval = ToolApproval.objects.create(run=run, call_id="c1", tool="calculator")

    assert selectors.run_get(user=user, run_id=run.pk) == run
    assert selectors.approval_get(user=user, approval_id=approval.pk) == approval
    assert selectors.message_get(user=user, message_id=question.pk) == question
    for someone in (other_user, ANONYMOUS):
        assert selectors.run_get(user=someone, run_id=run.pk) is None
        assert selectors.approval_get(user=someone, approval_id=approval.pk) is None
        assert selectors.message_get(user=someone, message_id=question.pk) is None


def test_a_runs_approvals_are_listed_in_the_order_asked(user):
    run = run_for(asked(chat(user, "mine"), "q"))
    now = timezone.now()
    earlier = ToolApproval.objects.create(
        run=run, call_id="a", tool="t", requested_at=now - timedelta(seconds=5)
    )
    # Two asked at the same instant, the one with the larger id written first: the order
    # asked for (then the id), not the table's, decides.
    written_first = ToolApproval.objects.create(
        pk=earlier.pk + 1000, run=run, call_id="c", tool="t", requested_at=now
    )
    written_second = ToolApproval.objects.create(
        pk=earlier.pk + 500, run=run, call_id="b", tool="t", requested_at=now
    )

    assert list(selectors.run_approvals(run=run)) == [earlier, written_second, written_first]
    # Asked before all of them, though written last.
    first_asked = ToolApproval.objects.create(
        pk=earlier.pk + 2000, run=run, call_id="z", tool="t", requested_at=now - timedelta(hours=1)
    )
    assert next(iter(selectors.run_approvals(run=run))) == first_asked


# --- the run inspector: staff read any run, in the order it happened --------------------


def test_a_runs_events_and_model_calls_in_the_order_they_happened(user, default_profile):
    from agents.models import ModelCall, RunEvent

    conversation = chat(user, "inspected")
    run = run_for(asked(conversation, "q"))
    other = run_for(asked(conversation, "q2"))
    for seq, who in ((3, run), (1, run), (2, other), (4, run)):
        RunEvent.objects.create(conversation=conversation, run=who, seq=seq, type="step")
    for index, who in ((1, run), (0, run), (0, other)):
        ModelCall.objects.create(run=who, index=index, request_messages=[])

    assert [event.seq for event in selectors.run_event_list(run=run)] == [1, 3, 4]
    calls = selectors.model_call_list(run=run)
    assert [(call.run_id, call.index) for call in calls] == [(run.pk, 0), (run.pk, 1)]


# --- profiles ---------------------------------------------------------------------------


def test_profiles_open_to_all_or_to_one_of_my_groups(user, other_user, default_profile):
    readers, writers = Group.objects.create(name="readers"), Group.objects.create(name="writers")
    user.groups.add(readers, writers)
    both = AgentProfile.objects.create(slug="both", name="Both groups")
    both.allowed_groups.add(readers, writers)
    not_mine = AgentProfile.objects.create(slug="not-mine", name="Another group")
    not_mine.allowed_groups.add(Group.objects.create(name="others"))
    open_ones = [
        AgentProfile.objects.create(slug=f"open-{n}", name=name)
        for n, name in enumerate(["Zebra", "Mango", "Kiwi", "Aardvark"])
    ]
    by_name = sorted(open_ones, key=lambda profile: profile.name)

    mine = list(selectors.profiles_for_user(user=user))

    # The default first, then by name; a profile of two of my groups once.
    assert mine == [default_profile, *by_name[:1], both, *by_name[1:]]
    assert list(selectors.profiles_for_user(user=other_user)) == [default_profile, *by_name]
    assert list(selectors.profiles_for_user(user=ANONYMOUS)) == []
    assert selectors.profile_get(user=user, slug="both") == both
    assert selectors.profile_get(user=other_user, slug="both") is None
    assert selectors.profile_get(user=ANONYMOUS, slug="open-0") is None


# --- searching my messages (the conversation_search tool) ------------------------------


def test_a_message_search_needs_every_word_in_the_text_or_the_title(user, other_user):
    travel = chat(user, "Travel")
    both_words = asked(travel, "cheap flights to Rome")
    asked(travel, "cheap hotels")
    title_and_text = asked(chat(user, "Rome notes"), "cheap wine")
    asked(chat(other_user, "theirs"), "cheap Rome")
    asked(chat(user, "replay copy", for_replay=True), "cheap Rome")

    found = selectors.message_search(user=user, q="CHEAP rome")

    assert found == [title_and_text, both_words]
    assert found[0].conversation.title == "Rome notes"
    assert selectors.message_search(user=user, q="   ") == []
    assert selectors.message_search(user=ANONYMOUS, q="cheap") == []


def test_a_message_search_reads_the_branch_shown_and_can_leave_out_a_chat(user):
    here, there = chat(user, "here"), chat(user, "there")
    sibling(asked(here, "apple pie"), "plum pie")
    in_there = asked(there, "apple tart")

    assert selectors.message_search(user=user, q="apple") == [in_there]
    assert selectors.message_search(user=user, q="apple", exclude_conversation_id=there.pk) == []


def test_a_message_search_gives_the_newest_first_up_to_its_limit(user):
    conversation = chat(user, "many")
    messages = [asked(conversation, f"note {n}") for n in range(7)]
    same_instant = timezone.now()
    Message.objects.filter(pk__in=[m.pk for m in messages]).update(created_at=same_instant)

    assert selectors.message_search(user=user, q="note", limit=3) == messages[::-1][:3]
    # Five by default: what the conversation_search tool shows the model.
    assert selectors.message_search(user=user, q="note") == messages[::-1][:5]
    # Newest by when it was written, the id breaking ties: an imported older message last.
    Message.objects.filter(pk=messages[-1].pk).update(created_at=same_instant - timedelta(days=1))
    assert selectors.message_search(user=user, q="note", limit=7)[-1] == messages[-1]


def test_a_message_search_uses_its_first_eight_words(user):
    conversation = chat(user, "words")
    hit = asked(conversation, "a b c d e f g h")

    assert selectors.message_search(user=user, q="a b c d e f g h not-in-it") == [hit]
    assert selectors.message_search(user=user, q="a b c d e f g not-in-it") == []


# --- feedback, shares, preferences ------------------------------------------------------


def test_my_feedback_on_this_chats_answers_only(user, other_user):
    conversation = chat(user, "rated")
    asked(conversation, "q")
    answer = answered(conversation, "a")
    elsewhere = answered(chat(user, "other"), "b")
    mine = AnswerFeedback.objects.create(message=answer, user=user, rating="up", comment="nice")
    AnswerFeedback.objects.create(message=answer, user=other_user, rating="down")
    asked(conversation, "q2")
    their_rated = answered(conversation, "a2")
    AnswerFeedback.objects.create(message=their_rated, user=other_user, rating="down")
    AnswerFeedback.objects.create(message=elsewhere, user=user, rating="down")

    assert selectors.feedback_by_message(user=user, conversation=conversation) == {
        answer.pk: {"rating": "up", "comment": "nice"}
    }
    assert selectors.feedback_get(user=user, message=answer) == mine
    assert selectors.feedback_get(user=user, message=Message(pk=answer.pk + 99)) is None


def test_a_share_link_opens_until_it_is_revoked(user):
    ConversationShare.objects.create(conversation=chat(user, "another shared chat"))
    conversation = chat(user, "shared")
    revoked = ConversationShare.objects.create(conversation=conversation, revoked_at=timezone.now())
    assert selectors.share_open_get(conversation=conversation) is None
    open_share = ConversationShare.objects.create(conversation=conversation)

    assert selectors.share_open_get(conversation=conversation) == open_share
    assert selectors.shared_conversation_get(token=open_share.token) == conversation
    assert selectors.shared_conversation_get(token=revoked.token) is None
    assert selectors.shared_conversation_get(token="no-such-token") is None
    assert selectors.share_was_revoked(token=revoked.token) is True
    assert selectors.share_was_revoked(token=open_share.token) is False
    assert selectors.share_was_revoked(token="no-such-token") is False


def test_a_users_stored_preferences_and_instructions(user, other_user):
    assert selectors.preference_get(user=user) is None
    assert selectors.custom_instructions_of(user_id=user.pk) == ""
    mine = UserPreference.objects.create(user=user, custom_instructions="Answer in French.")
    UserPreference.objects.create(user=other_user, custom_instructions="Be brief.")

    assert selectors.preference_get(user=user) == mine
    assert selectors.custom_instructions_of(user_id=user.pk) == "Answer in French."


# --- schedules, notifications, webhooks, identities, keys ------------------------------


def _schedule(owner, profile, title: str) -> Schedule:
    return Schedule.objects.create(
        owner=owner, profile=profile, title=title, prompt="p", starts_at=timezone.now()
    )


def test_schedules_are_the_owners_by_title(user, other_user, default_profile):
    later = _schedule(user, default_profile, "weekly report")
    # Two of one title, the one with the larger id written first: by title, then by id.
    twin = Schedule.objects.create(
        pk=later.pk + 1000,
        owner=user,
        profile=default_profile,
        title="daily digest",
        prompt="p",
        starts_at=timezone.now(),
    )
    earlier = _schedule(user, default_profile, "daily digest")
    theirs = _schedule(other_user, default_profile, "another")

    assert earlier.pk < twin.pk
    assert list(selectors.schedules_for_user(user=user)) == [earlier, twin, later]
    assert list(selectors.schedules_for_user(user=ANONYMOUS)) == []
    assert selectors.schedule_get(user=user, schedule_id=later.pk) == later
    assert selectors.schedule_get(user=user, schedule_id=theirs.pk) is None


def _notification(user, key: str, **fields) -> Notification:
    return Notification.objects.create(
        user=user, kind=Notification.Kind.FINISHED, key=key, **fields
    )


def test_notifications_are_mine_newest_first_up_to_the_limit(user, other_user):
    same_instant = timezone.now()
    first, second, third = (_notification(user, f"n{n}") for n in range(3))
    Notification.objects.filter(pk__in=[first.pk, second.pk]).update(created_at=same_instant)
    Notification.objects.filter(pk=third.pk).update(created_at=same_instant - timedelta(hours=1))
    theirs = _notification(other_user, "theirs")

    assert selectors.notifications_for_user(user=user) == [second, first, third]
    assert selectors.notifications_for_user(user=user, limit=1) == [second]
    # Thirty by default: the bell's list.
    for n in range(30):
        _notification(user, f"more{n}")
    assert len(selectors.notifications_for_user(user=user)) == 30
    assert selectors.notifications_for_user(user=ANONYMOUS) == []
    assert selectors.notification_get(user=user, notification_id=first.pk) == first
    assert selectors.notification_get(user=user, notification_id=theirs.pk) is None
    assert selectors.notification_get(user=ANONYMOUS, notification_id=theirs.pk) is None


def test_email_is_sent_only_to_those_who_asked_for_it(user, other_user, make_user):
    NotificationPreference.objects.create(user=user, email=True)
    NotificationPreference.objects.create(user=other_user, email=False)

    assert selectors.notification_email_wanted(user=user) is True
    assert selectors.notification_email_wanted(user=other_user) is False
    assert selectors.notification_email_wanted(user=make_user("never-chose")) is False
    assert selectors.notification_email_wanted(user=ANONYMOUS) is False


def test_webhooks_and_their_deliveries_are_the_owners(user, other_user):
    mine = Webhook.objects.create(owner=user, url="http://127.0.0.1:9/hook")
    theirs = Webhook.objects.create(owner=other_user, url="http://127.0.0.1:9/theirs")
    same_instant = timezone.now()
    deliveries = [
        WebhookDelivery.objects.create(webhook=mine, notification=_notification(user, f"d{n}"))
        for n in range(3)
    ]
    WebhookDelivery.objects.filter(pk__in=[d.pk for d in deliveries]).update(
        created_at=same_instant
    )
    WebhookDelivery.objects.create(webhook=theirs, notification=_notification(other_user, "t"))

    assert list(selectors.webhooks_for_user(user=user)) == [mine]
    assert list(selectors.webhooks_for_user(user=ANONYMOUS)) == []
    assert selectors.webhook_get(user=user, webhook_id=mine.pk) == mine
    assert selectors.webhook_get(user=user, webhook_id=theirs.pk) is None
    assert selectors.webhook_deliveries_for_user(user=user) == deliveries[::-1]
    assert selectors.webhook_deliveries_for_user(user=user, limit=2) == deliveries[:0:-1]
    assert selectors.webhook_deliveries_for_user(user=ANONYMOUS) == []
    WebhookDelivery.objects.filter(pk=deliveries[-1].pk).update(
        created_at=same_instant - timedelta(hours=1)
    )
    assert selectors.webhook_deliveries_for_user(user=user)[-1] == deliveries[-1]
    # Fifty by default: the page's list.
    WebhookDelivery.objects.bulk_create(
        WebhookDelivery(webhook=mine, notification=_notification(user, f"more{n}"))
        for n in range(50)
    )
    assert len(selectors.webhook_deliveries_for_user(user=user)) == 50


def test_a_provider_account_is_matched_on_its_issuer_and_subject_together(user, other_user):
    ProviderIdentity.objects.create(user=user, issuer="http://127.0.0.1:1/a", subject="42")
    ProviderIdentity.objects.create(user=other_user, issuer="http://127.0.0.1:1/b", subject="7")

    found = selectors.users_of_provider_identity
    assert list(found(issuer="http://127.0.0.1:1/a", subject="42")) == [user]
    assert list(found(issuer="http://127.0.0.1:1/a", subject="7")) == []
    assert list(found(issuer="http://127.0.0.1:1/b", subject="42")) == []


def test_api_keys_are_listed_newest_first_and_found_by_owner_or_by_hash(user, other_user):
    same_instant = timezone.now()
    keys = [
        ApiKey.objects.create(owner=user, name=f"k{n}", prefix=f"p{n}", secret_hash=f"h{n}")
        for n in range(3)
    ]
    ApiKey.objects.filter(pk__in=[keys[0].pk, keys[1].pk]).update(created_at=same_instant)
    ApiKey.objects.filter(pk=keys[2].pk).update(created_at=same_instant - timedelta(days=1))
    theirs = ApiKey.objects.create(owner=other_user, name="t", prefix="pt", secret_hash="ht")

    # Newest first by when it was made, the id breaking ties.
    assert list(selectors.api_key_list(user=user)) == [keys[1], keys[0], keys[2]]
    assert selectors.api_key_get(user=user, key_id=keys[0].pk) == keys[0]
    assert selectors.api_key_get(user=user, key_id=theirs.pk) is None
    by_hash = selectors.api_key_by_hash(secret_hash="ht")
    assert by_hash == theirs
    assert by_hash.owner == other_user
    assert selectors.api_key_by_hash(secret_hash="unknown") is None


def test_a_kept_file_of_the_python_tool_is_its_chat_owners(user, other_user):
    plots = chat(user, "plots")
    SandboxFile.objects.create(conversation=plots, name="a.csv", content_type="text/csv", size=3)
    kept = SandboxFile.objects.create(
        conversation=plots, name="plot.png", content_type="image/png", size=3
    )

    assert selectors.sandbox_file_get(user=user, file_id=kept.pk) == kept
    assert selectors.sandbox_file_get(user=other_user, file_id=kept.pk) is None
    assert selectors.sandbox_file_get(user=ANONYMOUS, file_id=kept.pk) is None


# --- a run's end: what its effects need, in one read -------------------------------------


def test_an_ended_run_says_which_of_its_ends_effects_can_apply(user, default_profile):
    run = run_for(asked(chat(user, "ended"), "q"), status=AgentRun.Status.FAILED, attempts=2)
    AgentRun.objects.filter(pk=run.pk).update(error_message="The model did not answer.")
    bystander = run_for(asked(chat(user, "other"), "q"))

    plain = selectors.ended_run_get(run_id=run.pk)
    assert plain is not None
    assert (plain.run.pk, plain.run.status, plain.run.attempts) == (run.pk, "failed", 2)
    assert plain.run.error_message == "The model did not answer."
    assert plain.run.conversation.owner_id == user.pk
    assert (plain.schedule_id, plain.any_budget, plain.has_children, plain.replays_a_case) == (
        None,
        False,
        False,
        False,
    )
    assert selectors.firing_budget_steps(run_id=run.pk) is None

    # Another run's firing, children and case never count as this run's.
    schedule = _schedule(user, default_profile, "nightly")
    ScheduleFiring.objects.create(
        schedule=schedule, occurrence=timezone.now(), run=bystander, budget_steps=9
    )
    run_for(bystander.trigger_message, parent_run=bystander)
    eval_run = EvalRun.objects.create(
        eval_set=EvalSet.objects.create(profile=default_profile, name="set"),
        version=default_profile.versions.order_by("-number").first(),
    )
    case = EvalCase.objects.create(eval_set=eval_run.eval_set, name="c", question="q")
    EvalResult.objects.create(eval_run=eval_run, case=case, run=bystander)
    still_plain = selectors.ended_run_get(run_id=run.pk)
    assert still_plain is not None
    assert (still_plain.schedule_id, still_plain.has_children, still_plain.replays_a_case) == (
        None,
        False,
        False,
    )

    ScheduleFiring.objects.create(
        schedule=schedule, occurrence=timezone.now(), run=run, budget_steps=4
    )
    run_for(run.trigger_message, parent_run=run)
    EvalResult.objects.create(
        eval_run=eval_run,
        case=EvalCase.objects.create(eval_set=eval_run.eval_set, name="d", question="q"),
        run=run,
    )
    UsageBudget.objects.create(user=user, monthly_tokens=1000)

    full = selectors.ended_run_get(run_id=run.pk)
    assert full is not None
    assert (full.schedule_id, full.any_budget, full.has_children, full.replays_a_case) == (
        schedule.pk,
        True,
        True,
        True,
    )
    assert selectors.firing_budget_steps(run_id=run.pk) == 4
    assert selectors.ended_run_get(run_id=run.pk + bystander.pk + 99) is None


# --- the secrets a page shown to others blanks -------------------------------------------


def test_every_tool_and_mcp_server_secret_is_known_and_an_unreadable_one_is_skipped():
    from agents.models import McpServer, ToolConfig

    search = ToolConfig(name="secret-search", kind="http_request")
    search.set_secrets({"api_key": "tool-secret-1"})
    search.save()
    ToolConfig.objects.create(name="no-secrets", kind="calculator")
    unreadable = McpServer(name="a-unreadable", url="http://127.0.0.1:9/mcp")
    unreadable.headers_encrypted = "not-what-this-key-encrypted"
    unreadable.save()
    by_header = McpServer(name="b-header", url="http://127.0.0.1:9/mcp")
    by_header.set_headers({"Authorization": "Bearer header-secret"})
    by_header.save()
    by_environment = McpServer(name="c-environment", transport="stdio", command="true")
    by_environment.set_environment({"TOKEN": "environment-secret"})
    by_environment.save()

    assert sorted(selectors.tool_secret_values()) == [
        "Bearer header-secret",
        "environment-secret",
        "tool-secret-1",
    ]


# --- what a caller reads next comes in the same query ------------------------------------


def test_a_row_comes_with_what_its_callers_read_next_in_one_query(
    user, default_profile, django_assert_num_queries
):
    conversation = chat(user, "joined", profile=default_profile)
    question = asked(conversation, "a word to find")
    run = run_for(question)
    approval = ToolApproval.objects.create(run=run, call_id="c", tool="t", decided_by=user)
    share = ConversationShare.objects.create(conversation=conversation)
    schedule = _schedule(user, default_profile, "daily")
    _notification(user, "n", schedule=schedule)
    webhook = Webhook.objects.create(owner=user, url="http://127.0.0.1:9/hook", schedule=schedule)
    WebhookDelivery.objects.create(
        webhook=webhook, notification=_notification(user, "d", schedule=schedule)
    )
    ApiKey.objects.create(owner=user, name="k", prefix="p", secret_hash="h")

    def ended() -> tuple[object, ...]:
        # What a run's end reads of it (the notification, the schedule, the owner).
        end = selectors.ended_run_get(run_id=run.pk)
        found = end.run
        return (
            found.pk,
            found.status,
            found.attempts,
            found.error_message,
            found.conversation.owner_id,
        )

    reads = {
        "conversation_get": lambda: (
            selectors.conversation_get(user=user, conversation_id=conversation.pk).profile.name
        ),
        "ended_run_get": ended,
        "run_get": lambda: selectors.run_get(user=user, run_id=run.pk).conversation.title,
        "approval_get": lambda: (
            selectors.approval_get(user=user, approval_id=approval.pk).run.status
        ),
        "run_approvals": lambda: [a.decided_by.username for a in selectors.run_approvals(run=run)],
        "message_get": lambda: (
            selectors.message_get(user=user, message_id=question.pk).conversation.title
        ),
        "message_search": lambda: [
            m.conversation.title for m in selectors.message_search(user=user, q="word")
        ],
        "shared_conversation_get": lambda: (
            selectors.shared_conversation_get(token=share.token).title
        ),
        "conversation_list": lambda: [
            c.profile.name for c in selectors.conversation_list(user=user)
        ],
        "schedules_for_user": lambda: [
            s.profile.name for s in selectors.schedules_for_user(user=user)
        ],
        "notifications_for_user": lambda: [
            n.schedule.title for n in selectors.notifications_for_user(user=user)
        ],
        "webhooks_for_user": lambda: [
            w.schedule.title for w in selectors.webhooks_for_user(user=user)
        ],
        "webhook_deliveries_for_user": lambda: [
            (d.webhook.url, d.notification.key)
            for d in selectors.webhook_deliveries_for_user(user=user)
        ],
        "api_key_by_hash": lambda: selectors.api_key_by_hash(secret_hash="h").owner.username,
    }
    for name, read in reads.items():
        with django_assert_num_queries(1):
            assert read(), name
