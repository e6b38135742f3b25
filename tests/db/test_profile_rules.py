"""The profile rules a send's statements apply in SQL (agents/db/statements.py) agree, row for
row, with the Python that defines them: who may use a profile (``profiles_for_user``), the
default profile (``default_profile``) and a profile's latest prompt version (the highest
``number``, as ``prompt_version_current`` reads it). Each test builds every combination it
names and compares the two answers for each, on whichever database the suite runs on."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth.models import Group
from django.db import connection

from agents.db import statements
from agents.models import AgentProfile, Conversation, PromptVersion, ToolConfig
from agents.profile_snapshot import profile_snapshot
from agents.selectors import profiles_for_user
from agents.services.conversations import _lock_owned
from agents.services.defaults import default_profile
from agents.services.prompt_versions import prompt_version_live

pytestmark = pytest.mark.django_db

# Which groups a profile is limited to (none: open to everyone), and which a user is in.
GROUP_SETS = [(), ("red",), ("blue",), ("red", "blue")]


def _profile(slug: str, **fields) -> AgentProfile:
    return AgentProfile.objects.create(name=slug.title(), slug=slug, **fields)


def _allowed_by_the_statement(*, user, profile) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(statements.profile_allowed(), [user.pk, profile.pk, profile.pk])
        (allowed,) = cursor.fetchone()
    return bool(allowed)


def test_who_may_use_a_profile_is_decided_in_sql_as_profiles_for_user_decides(make_user):
    groups = {name: Group.objects.create(name=name) for name in ("red", "blue", "green")}
    profiles = []
    for number, limited_to in enumerate(GROUP_SETS):
        profile = _profile(f"limited-{number}")
        profile.allowed_groups.set(groups[name] for name in limited_to)
        profiles.append(profile)
    users = []
    for number, member_of in enumerate([*GROUP_SETS, ("green",)]):
        user = make_user(f"member{number}")
        user.groups.set(groups[name] for name in member_of)
        users.append(user)

    answers = []
    for user, profile in itertools.product(users, profiles):
        python = profiles_for_user(user=user).filter(pk=profile.pk).exists()
        alone = _allowed_by_the_statement(user=user, profile=profile)
        conversation = Conversation.objects.create(owner=user, profile=profile)
        with_the_lock = _lock_owned(conversation=conversation, user=user).allowed_of(profile)
        assert (alone, with_the_lock) == (python, python), (
            f"{user.username} in {list(user.groups.values_list('name', flat=True))}, "
            f"{profile.slug} for {list(profile.allowed_groups.values_list('name', flat=True))}"
        )
        answers.append(python)
    # Both answers occur, so the comparison means something.
    assert set(answers) == {True, False}


@pytest.mark.parametrize("chosen", [None, "first", "second", "third"])
def test_the_default_profile_read_with_the_lock_is_default_profiles(user, chosen):
    AgentProfile.objects.update(is_default=False)  # the one seeded on migrate
    for slug in ("first", "second", "third"):
        _profile(slug, is_default=slug == chosen)
    conversation = Conversation.objects.create(owner=user)  # no profile of its own

    read = _lock_owned(conversation=conversation, user=user).default_profile

    if chosen is None:
        # None flagged: the send falls back to default_profile(), which seeds one.
        assert read is None
        assert not AgentProfile.objects.filter(is_default=True).exists()
    else:
        assert read is not None
        assert read.pk == default_profile().pk
        assert read.slug == chosen
    # A conversation with a profile of its own reads that one, never the default.
    own = _profile("own")
    mine = Conversation.objects.create(owner=user, profile=own)
    locked = _lock_owned(conversation=mine, user=user)
    assert locked.default_profile is None
    assert locked.conversation.profile == own


# Version numbers in the order they are written: ids and numbers need not agree (a restore,
# a number written by hand in the admin's history), so the rule must follow the number. A
# negative number is a draft of that number: never the live version, however high.
VERSION_HISTORIES = [(), (1,), (1, 2, 3), (3, 1, 2), (2, 1), (7, 4), (1, -2), (-1,), (1, -3, 2)]


@pytest.mark.parametrize("numbers", VERSION_HISTORIES, ids=str)
def test_the_latest_version_read_with_the_lock_is_the_live_one(user, numbers):
    profile = _profile("versioned")
    other = _profile("other")
    for number in numbers:
        PromptVersion.objects.create(
            profile=profile, number=abs(number), snapshot={"n": number}, is_draft=number < 0
        )
    # Another profile's versions, numbered higher and written last, are never its latest.
    PromptVersion.objects.create(profile=other, number=99, snapshot={})
    conversation = Conversation.objects.create(owner=user, profile=profile)

    read = _lock_owned(conversation=conversation, user=user).latest_version_of(profile)

    python = prompt_version_live(profile=profile)
    live = [number for number in numbers if number > 0]
    assert (read.pk if read else None) == (python.pk if python else None)
    assert (read.number if read else None) == (max(live) if live else None)


# Names whose order depends on case, digits, punctuation and accents.
TOOL_NAMES = ["zeta", "Beta", "alpha_2", "alpha", "alpha-1", "Ärger", "beta", "10", "9", "Z"]


@pytest.mark.parametrize("count", [0, 1, 2, len(TOOL_NAMES)])
def test_the_tools_read_with_the_lock_are_the_snapshots_in_its_order(user, count):
    profile = _profile("tooled")
    tools = [
        ToolConfig.objects.create(name=name, kind="calculator", description=name)
        for name in TOOL_NAMES[:count]
    ]
    profile.tools.set(tools)
    conversation = Conversation.objects.create(owner=user, profile=profile)

    pairs = _lock_owned(conversation=conversation, user=user).tools_of(profile)

    snapshot = profile_snapshot(profile)  # reads the tools itself
    assert pairs is not None
    assert [tool_id for tool_id, _ in pairs] == snapshot["tool_ids"]
    assert [name for _, name in pairs] == snapshot["tool_names"]
    assert profile_snapshot(profile, tools=pairs) == snapshot
