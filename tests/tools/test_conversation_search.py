"""conversation_search: the user's own past conversations, never anyone else's."""

from __future__ import annotations

import pytest

from agents.models import Conversation, Message
from agents.react.tools import ToolInputError
from agents.selectors import message_search
from agents.tools.base import ToolError
from agents.tools.builtin.conversation_search import ConversationSearch, snippet

pytestmark = pytest.mark.django_db


def _conversation(owner, title: str, *messages: tuple[str, str]) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title=title)
    for role, content in messages:
        Message.objects.create(conversation=conversation, role=role, content=content)
    return conversation


@pytest.fixture
def history(user, other_user):
    trip = _conversation(
        user,
        "Trip to Lisbon",
        ("user", "Which tram goes to the castle in Lisbon?"),
        ("assistant", "Tram 28 passes close to the castle."),
    )
    recipe = _conversation(user, "Dinner", ("user", "A recipe with saffron and rice, please."))
    secret = _conversation(
        other_user,
        "Bob's private notes",
        ("user", "My tram pass PIN for Lisbon is 4321."),
    )
    return {"trip": trip, "recipe": recipe, "secret": secret}


def test_finds_the_users_own_messages_with_title_and_date(user, history):
    output = ConversationSearch(user=user).run(query="tram castle")
    lines = output.splitlines()
    day = history["trip"].created_at.strftime("%Y-%m-%d")
    assert lines == [
        f'- "Trip to Lisbon" ({day}, assistant): Tram 28 passes close to the castle.',
        f'- "Trip to Lisbon" ({day}, user): Which tram goes to the castle in Lisbon?',
    ]


def test_never_returns_another_users_messages(user, other_user, history):
    output = ConversationSearch(user=user).run(query="PIN")
    assert output == "No earlier conversation mentions 'PIN'."
    found = message_search(user=user, q="Lisbon", limit=20)
    assert {message.conversation.owner_id for message in found} == {user.pk}
    assert "4321" not in ConversationSearch(user=user).run(query="Lisbon tram")
    # And the other way round: Bob sees only his own.
    bobs = message_search(user=other_user, q="tram", limit=20)
    assert [message.conversation_id for message in bobs] == [history["secret"].pk]


def test_matches_conversation_titles(user, history):
    output = ConversationSearch(user=user).run(query="dinner")
    assert '"Dinner"' in output
    assert "saffron" in output


def test_leaves_out_the_current_conversation(user, history):
    tool = ConversationSearch(user=user, conversation=history["trip"])
    assert tool.run(query="tram") == "No earlier conversation mentions 'tram'."
    assert "saffron" in tool.run(query="saffron")


def test_limits_results(user, history):
    tool = ConversationSearch(user=user, config={"max_results": 1})
    assert len(tool.run(query="Lisbon").splitlines()) == 1


def test_needs_a_user_and_a_query(user):
    with pytest.raises(ToolError, match="no signed-in user"):
        ConversationSearch().run(query="tram")
    with pytest.raises(ToolInputError, match="give some words"):
        ConversationSearch(user=user).run(query="  ")


def test_snippet_centres_on_the_match():
    text = "filler " * 100 + "the saffron risotto recipe" + " filler" * 100
    piece = snippet(text, "saffron", 80)
    assert "saffron risotto" in piece
    assert piece.startswith("…")
    assert piece.endswith("…")
    assert len(piece) <= 82
