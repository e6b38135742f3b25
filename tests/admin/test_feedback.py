"""The admin's feedback pages: every rating, and the comparison of prompt versions."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import AgentProfile, AnswerFeedback
from agents.selectors import feedback_stats
from agents.services.conversations import conversation_create
from agents.services.prompt_versions import prompt_version_ensure
from tests.admin.conftest import page_text
from tests.answers import finished_answer

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_versions(user, other_user):
    """v1 of a profile got one up and one down; v2 got two ups, one with a comment."""
    profile = AgentProfile.objects.create(name="Maths", slug="maths")
    v1 = prompt_version_ensure(profile=profile)
    profile.system_prompt = "Be brief. {tools} {tool_names}"
    profile.save()
    v2 = prompt_version_ensure(profile=profile)
    assert (v1.number, v2.number) == (1, 2)
    conversation = conversation_create(owner=user, profile=profile)

    def rate(version, reader, rating, comment=""):
        answer = finished_answer(conversation=conversation, profile_version=version)
        AnswerFeedback.objects.create(
            message=answer,
            user=reader,
            rating=rating,
            comment=comment,
            profile=profile,
            prompt_version=version,
        )

    rate(v1, user, "up")
    rate(v1, other_user, "down", "Rambled on.")
    rate(v2, user, "up", "Short and right.")
    rate(v2, other_user, "up")
    return profile


def test_the_stats_count_and_share_per_version_with_comments(two_versions):
    stats = {row.version_number: row for row in feedback_stats(profile=two_versions)}
    assert (stats[1].count, stats[1].thumbs_up, stats[1].up_share) == (2, 1, 0.5)
    assert (stats[2].count, stats[2].thumbs_up, stats[2].up_share) == (2, 2, 1.0)
    assert [item.comment for item in stats[1].latest_comments] == ["Rambled on."]
    assert [item.comment for item in stats[2].latest_comments] == ["Short and right."]


def test_the_stats_of_one_profile_leave_out_the_others(two_versions, user):
    other = AgentProfile.objects.create(name="Poetry", slug="poetry")
    answer = finished_answer(
        conversation=conversation_create(owner=user, profile=other),
        profile_version=prompt_version_ensure(profile=other),
    )
    AnswerFeedback.objects.create(message=answer, user=user, rating="up", profile=other)

    assert {row.profile_id for row in feedback_stats(profile=two_versions)} == {two_versions.pk}
    assert {row.profile_id for row in feedback_stats()} >= {two_versions.pk, other.pk}


def _rate(profile, version, user, comment: str = "") -> AnswerFeedback:
    answer = finished_answer(
        conversation=conversation_create(owner=user, profile=profile), profile_version=version
    )
    return AnswerFeedback.objects.create(
        message=answer,
        user=user,
        rating="up",
        comment=comment,
        profile=profile,
        prompt_version=version,
    )


def test_the_stats_list_profiles_by_name_then_newest_version_first(user):
    """Two profiles may share a name: each keeps its versions together, in creation order."""
    first = AgentProfile.objects.create(name="Helper", slug="helper-a")
    second = AgentProfile.objects.create(name="Helper", slug="helper-b")
    before_both = AgentProfile.objects.create(name="Aardvark", slug="aardvark")
    _rate(first, prompt_version_ensure(profile=first), user)
    second_v1 = prompt_version_ensure(profile=second)
    _rate(second, second_v1, user)
    second.system_prompt = "Be brief. {tools} {tool_names}"
    second.save()
    _rate(second, prompt_version_ensure(profile=second), user)
    _rate(before_both, prompt_version_ensure(profile=before_both), user)

    rows = [(row.profile_id, row.profile_name, row.version_number) for row in feedback_stats()]

    assert rows == [
        (before_both.pk, "Aardvark", 1),
        (first.pk, "Helper", 1),
        (second.pk, "Helper", 2),
        (second.pk, "Helper", 1),
    ]


def test_feedback_on_a_deleted_profile_is_counted_under_a_plain_name(user):
    profile = AgentProfile.objects.create(name="Gone", slug="gone")
    _rate(profile, prompt_version_ensure(profile=profile), user, "kept")
    AnswerFeedback.objects.filter(profile=profile).update(profile=None, prompt_version=None)

    [row] = feedback_stats()

    assert (row.profile_id, row.profile_name, row.version_number, row.count) == (
        None,
        "(deleted profile)",
        None,
        1,
    )
    assert [item.comment for item in row.latest_comments] == ["kept"]


def test_each_version_shows_its_five_newest_comments_however_many_another_has(user):
    profile = AgentProfile.objects.create(name="Busy", slug="busy")
    old_version = prompt_version_ensure(profile=profile)
    quiet = [_rate(profile, old_version, user, f"old {n}") for n in range(2)]
    profile.system_prompt = "Be brief. {tools} {tool_names}"
    profile.save()
    new_version = prompt_version_ensure(profile=profile)
    busy = [_rate(profile, new_version, user, f"new {n}") for n in range(60)]
    _rate(profile, new_version, user)  # a rating without a comment is no comment
    # An old comment edited last is the newest; two edited at one instant: the later first.
    now = timezone.now()
    AnswerFeedback.objects.filter(pk=busy[0].pk).update(updated_at=now + timedelta(minutes=1))
    AnswerFeedback.objects.filter(pk__in=[busy[1].pk, busy[2].pk]).update(
        updated_at=now + timedelta(seconds=30)
    )

    stats = {row.version_number: row for row in feedback_stats(profile=profile)}

    assert [item.comment for item in stats[2].latest_comments] == [
        "new 0",
        "new 2",
        "new 1",
        "new 59",
        "new 58",
    ]
    assert stats[2].count == 61
    assert [item.comment for item in stats[1].latest_comments] == ["old 1", "old 0"]
    assert [item.pk for item in stats[1].latest_comments] == [quiet[1].pk, quiet[0].pk]
    few = {
        row.version_number: row for row in feedback_stats(profile=profile, comments_per_version=1)
    }
    assert [item.comment for item in few[2].latest_comments] == ["new 0"]


def test_the_stats_page_shows_each_version(staff_client, two_versions):
    response = staff_client.get(f"/admin/agents/answerfeedback/by-version/{two_versions.pk}/")
    assert response.status_code == 200
    text = page_text(response)
    rows = re.findall(r'<tr data-profile="Maths" data-version="(\d)">(.*?)</tr>', text, re.S)
    by_version = {number: row for number, row in rows}
    assert set(by_version) == {"1", "2"}
    assert "50% (1)" in by_version["1"]
    assert "Rambled on." in by_version["1"]
    assert "100% (2)" in by_version["2"]
    assert "Short and right." in by_version["2"]


def test_the_stats_take_the_same_queries_however_much_feedback(
    staff_client, two_versions, user, other_user
):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert staff_client.get("/admin/agents/answerfeedback/by-version/").status_code == 200
        return len(captured)

    before = queries()
    conversation = conversation_create(owner=other_user, profile=two_versions)
    version = two_versions.versions.get(number=2)
    for _ in range(5):
        answer = finished_answer(conversation=conversation, profile_version=version)
        AnswerFeedback.objects.create(
            message=answer, user=user, rating="down", comment="again", prompt_version=version
        )
    assert queries() == before


def test_the_feedback_list_is_read_only(staff_client, two_versions):
    response = staff_client.get("/admin/agents/answerfeedback/")
    assert response.status_code == 200
    assert "Rambled on." in page_text(response)
    assert "Compare prompt versions" in page_text(response)
    assert staff_client.get("/admin/agents/answerfeedback/add/").status_code == 403


def test_a_non_staff_user_cannot_see_the_stats(client, user, two_versions):
    client.force_login(user)
    response = client.get("/admin/agents/answerfeedback/by-version/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_the_profile_list_links_to_its_feedback_by_version(staff_client, two_versions):
    text = page_text(staff_client.get("/admin/agents/agentprofile/"))
    assert f'href="/admin/agents/answerfeedback/by-version/{two_versions.pk}/"' in text


def test_one_feedback_shows_with_the_answer_it_rates(staff_client, two_versions):
    feedback = AnswerFeedback.objects.exclude(comment="").first()
    response = staff_client.get(f"/admin/agents/answerfeedback/{feedback.pk}/change/")
    assert response.status_code == 200
    text = page_text(response)
    assert feedback.comment in text
    assert "**42**, says the calculator." in text
