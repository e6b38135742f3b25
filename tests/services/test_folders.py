"""Folders and bulk actions, services and selectors, always with two users (issue 42)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents import selectors
from agents.models import Conversation, ConversationFolder, Message
from agents.protocol import RefusalCode, RequestRefused
from agents.services.conversations import (
    BULK_MAX_CONVERSATIONS,
    conversation_create,
    conversations_delete,
    conversations_set_archived,
)
from agents.services.folders import (
    FolderGone,
    conversation_move,
    folder_create,
    folder_delete,
    folder_rename,
)

pytestmark = pytest.mark.django_db


def test_a_user_sees_and_gets_only_their_own_folders(user, other_user):
    mine = folder_create(owner=user, name="  Travel   plans ")
    theirs = folder_create(owner=other_user, name="Travel plans")
    assert mine.name == "Travel plans"
    assert list(selectors.folder_list(user=user)) == [mine]
    assert list(selectors.folder_list(user=other_user)) == [theirs]
    assert selectors.folder_get(user=user, folder_id=theirs.pk) is None
    assert selectors.folder_get(user=other_user, folder_id=mine.pk) is None
    assert selectors.folder_get(user=user, folder_id=mine.pk) == mine


def test_folders_are_listed_by_name(user):
    for name in ("Work", "Art", "Home"):
        folder_create(owner=user, name=name)
    assert [f.name for f in selectors.folder_list(user=user)] == ["Art", "Home", "Work"]


@pytest.mark.parametrize(
    ("name", "code"),
    [("   ", RefusalCode.EMPTY), ("x" * 81, RefusalCode.TOO_LONG)],
)
def test_a_bad_name_is_refused_and_nothing_is_written(user, name, code):
    with pytest.raises(RequestRefused) as refused:
        folder_create(owner=user, name=name)
    assert refused.value.code == code
    assert not ConversationFolder.objects.exists()


def test_a_name_taken_by_the_same_user_is_refused_on_create_and_rename(user, other_user):
    travel = folder_create(owner=user, name="Travel")
    work = folder_create(owner=user, name="Work")
    with pytest.raises(RequestRefused) as refused:
        folder_create(owner=user, name="Travel")
    assert refused.value.code == RefusalCode.FOLDER_NAME_TAKEN
    with pytest.raises(RequestRefused):
        folder_rename(folder=work, name=" Travel ")
    assert work.name == "Work"
    work.refresh_from_db()
    assert work.name == "Work"
    # Another user's folder of that name is no clash.
    folder_create(owner=other_user, name="Travel")
    assert folder_rename(folder=travel, name="Trips").name == "Trips"
    travel.refresh_from_db()
    assert travel.name == "Trips"


def test_moving_is_not_activity_and_deleting_a_folder_keeps_its_conversations(user):
    folder = folder_create(owner=user, name="Work")
    conversation = conversation_create(owner=user, title="Report")
    earlier = timezone.now() - timedelta(days=3)
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=earlier)
    conversation.refresh_from_db()

    conversation_move(conversation=conversation, folder=folder)
    conversation.refresh_from_db()
    assert conversation.folder_id == folder.pk
    assert conversation.updated_at == earlier
    conversation_move(conversation=conversation, folder=None)
    conversation.refresh_from_db()
    assert conversation.folder_id is None

    conversation_move(conversation=conversation, folder=folder)
    folder_delete(folder=folder)
    conversation.refresh_from_db()
    assert conversation.folder_id is None
    assert not ConversationFolder.objects.exists()


def test_a_conversation_never_moves_into_another_users_folder(user, other_user):
    theirs = folder_create(owner=other_user, name="Bob's")
    conversation = conversation_create(owner=user, title="Mine")
    with pytest.raises(FolderGone) as refused:
        conversation_move(conversation=conversation, folder=theirs)
    assert refused.value.code == RefusalCode.NOT_FOUND
    conversation.refresh_from_db()
    assert conversation.folder_id is None


def test_conversations_listed_carry_their_folder(user, other_user):
    folder = folder_create(owner=user, name="Work")
    filed = conversation_create(owner=user, title="Filed")
    conversation_move(conversation=filed, folder=folder)
    conversation_create(owner=other_user, title="Bob's")
    listed = {c.title: c.folder_id for c in selectors.conversation_list(user=user)}
    assert listed == {"Filed": folder.pk}


# ---- bulk ---------------------------------------------------------------------------------


def test_bulk_archive_and_unarchive_act_on_all_named(user):
    a, b, c = (conversation_create(owner=user, title=t) for t in "abc")
    earlier = timezone.now() - timedelta(days=2)
    Conversation.objects.filter(pk=a.pk).update(updated_at=earlier)
    assert conversations_set_archived(
        owner=user, conversation_ids=[b.pk, a.pk, a.pk], archived=True
    ) == sorted([a.pk, b.pk])
    assert set(Conversation.objects.filter(archived=True).values_list("pk", flat=True)) == {
        a.pk,
        b.pk,
    }
    # Not activity: the date bucket stays for an undone archive.
    assert Conversation.objects.get(pk=a.pk).updated_at == earlier
    conversations_set_archived(owner=user, conversation_ids=[a.pk, b.pk], archived=False)
    assert not Conversation.objects.filter(archived=True).exists()
    c.refresh_from_db()
    assert not c.archived


def test_bulk_actions_naming_another_users_conversation_change_nothing(user, other_user):
    mine = conversation_create(owner=user, title="mine")
    theirs = conversation_create(owner=other_user, title="theirs")
    for act in (
        lambda ids: conversations_set_archived(owner=user, conversation_ids=ids, archived=True),
        lambda ids: conversations_delete(owner=user, conversation_ids=ids),
    ):
        with pytest.raises(RequestRefused) as refused:
            act([mine.pk, theirs.pk])
        assert refused.value.code == RefusalCode.NOT_FOUND
        assert str(theirs.pk) in refused.value.message
        assert "Nothing was changed" in refused.value.message
    assert Conversation.objects.filter(archived=False).count() == 2


def test_bulk_delete_deletes_all_with_their_messages(user, other_user):
    first, second = (conversation_create(owner=user, title=t) for t in ("1", "2"))
    kept = conversation_create(owner=other_user, title="bob")
    Message.objects.create(conversation=first, role="user", content="hello")
    assert conversations_delete(owner=user, conversation_ids=[second.pk, first.pk]) == sorted(
        [first.pk, second.pk]
    )
    assert list(Conversation.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not Message.objects.exists()


def test_too_many_ids_are_refused(user):
    conversation = conversation_create(owner=user, title="x")
    with pytest.raises(RequestRefused) as refused:
        conversations_set_archived(
            owner=user,
            conversation_ids=[conversation.pk, *range(10**6, 10**6 + BULK_MAX_CONVERSATIONS)],
            archived=True,
        )
    assert refused.value.code == RefusalCode.TOO_LONG
    conversation.refresh_from_db()
    assert not conversation.archived
