"""Schedules under /v1/: the owner's own, by API key or by session, judged by the service
the schedules page uses. In process (no worker, no beat): "run now" starts its run as the
owner's send would, and a refusal names its field and writes nothing. Committed data
(transaction=True): the views run on a pool thread, with a database connection of its own."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from agents.models import AgentProfile, AgentRun, Schedule, ScheduleFiring
from agents.services.api_keys import api_key_create
from agents.services.schedules import ScheduleFields, schedule_create

pytestmark = pytest.mark.django_db(transaction=True)

JSON = "application/json"


def _keyed(client: Client, user, *scopes: str) -> Client:
    secret = api_key_create(owner=user, name="schedules", scopes=scopes or ("read", "chat"))
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {secret.secret}"
    client.raise_request_exception = False
    return client


@pytest.fixture
def key_client(client, user):
    return _keyed(client, user)


@pytest.fixture
def agent(db):
    return AgentProfile.objects.create(name="Digest writer", slug="digest-writer")


def _body(profile: AgentProfile, /, **changes) -> dict:
    tomorrow = timezone.now() + timedelta(days=1)
    body = {
        "agent": profile.slug,
        "title": "Morning digest",
        "prompt": "Summarise the news.",
        "rrule": "FREQ=WEEKLY;BYDAY=MO,WE",
        "starts_at": tomorrow.strftime("%Y-%m-%dT08:00:00"),
        "time_zone": "Europe/Paris",
    }
    body.update(changes)
    return body


def _schedule_of(user, agent: AgentProfile, **changes) -> Schedule:
    fields = {
        "profile": agent,
        "title": "Theirs",
        "prompt": "Their question.",
        "rule": "FREQ=DAILY",
        "starts_at": timezone.now() + timedelta(hours=1),
        "time_zone": "UTC",
    }
    fields.update(changes)
    return schedule_create(owner=user, fields=ScheduleFields(**fields))


def test_create_then_list_and_read_it(key_client, user, agent):
    created = key_client.post("/v1/schedules", _body(agent), content_type=JSON)

    assert created.status_code == 201, created.content
    body = created.json()
    assert body["object"] == "schedule"
    assert body["agent"] == "digest-writer"
    assert body["rrule"] == "FREQ=WEEKLY;BYDAY=MO,WE"
    # Sent without an offset: eight in the morning on the clock of Paris.
    assert body["starts_at"].startswith(_body(agent)["starts_at"])
    assert body["starts_at"][-6:] in ("+01:00", "+02:00")
    assert body["paused"] is False
    assert body["next_fire_at"] is not None
    schedule = Schedule.objects.get(pk=body["id"])
    assert schedule.owner == user
    assert schedule.created_by == user

    listed = key_client.get("/v1/schedules").json()
    assert [item["id"] for item in listed["data"]] == [body["id"]]
    assert key_client.get(f"/v1/schedules/{body['id']}").json() == listed["data"][0]


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"rrule": "FREQ=SOMETIMES"}, "rrule", "not valid"),
        ({"rrule": "FREQ=MINUTELY"}, "rrule", "once an hour"),
        ({"time_zone": "Mars/Olympus"}, "time_zone", "Unknown time zone"),
        ({"agent": "no-such-agent"}, "agent", "no-such-agent"),
        ({"prompt": "   "}, "prompt", "empty"),
        ({"starts_at": "2001-01-01T08:00:00Z", "rrule": ""}, "starts_at", "passed"),
        ({"starts_at": "next tuesday"}, "starts_at", ""),
        ({"budget_steps": 0}, "budget_steps", "at least 1"),
        ({"budget_steps": 40000}, "budget_steps", "at most"),
        ({"conversation_mode": "sideways"}, "conversation_mode", ""),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_created(
    key_client, agent, changes, field, words
):
    response = key_client.post("/v1/schedules", _body(agent, **changes), content_type=JSON)

    assert response.status_code == 400, response.content
    error = response.json()
    assert list(error["fields"]) == [field]
    assert words in error["message"] + " ".join(map(str, error["fields"][field]))
    assert not Schedule.objects.exists()


def test_an_agent_the_owner_may_not_use_is_refused_like_an_unknown_one(key_client, agent):
    agent.allowed_groups.add(Group.objects.create(name="insiders"))

    response = key_client.post("/v1/schedules", _body(agent), content_type=JSON)

    assert response.status_code == 400
    assert response.json()["code"] == "profile_not_allowed"
    assert list(response.json()["fields"]) == ["agent"]
    assert not Schedule.objects.exists()


def test_change_pause_and_resume(key_client, user, agent):
    schedule = _schedule_of(user, agent)
    url = f"/v1/schedules/{schedule.pk}"

    changed = key_client.patch(
        url, {"prompt": "Only the headlines.", "rrule": "FREQ=WEEKLY;BYDAY=FR"}, content_type=JSON
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["prompt"] == "Only the headlines."
    assert changed.json()["title"] == "Theirs"  # what was not sent stays
    schedule.refresh_from_db()
    assert schedule.rrule == "FREQ=WEEKLY;BYDAY=FR"
    assert schedule.next_fire_at.weekday() == 4

    paused = key_client.patch(url, {"paused": True}, content_type=JSON).json()
    assert paused["paused"] is True
    assert paused["paused_at"] is not None
    resumed = key_client.patch(url, {"paused": False}, content_type=JSON).json()
    assert resumed["paused"] is False
    assert resumed["next_fire_at"] is not None


def test_a_bad_change_is_a_400_and_changes_nothing(key_client, user, agent):
    schedule = _schedule_of(user, agent)

    response = key_client.patch(
        f"/v1/schedules/{schedule.pk}",
        {"prompt": "Something else.", "rrule": "FREQ=NEVER", "paused": True},
        content_type=JSON,
    )

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["rrule"]
    schedule.refresh_from_db()
    assert (schedule.prompt, schedule.rrule, schedule.paused_at) == (
        "Their question.",
        "FREQ=DAILY",
        None,
    )


def test_run_now_starts_the_owners_run_and_delete_keeps_it(key_client, user, agent):
    schedule = _schedule_of(user, agent, conversation_mode=Schedule.ConversationMode.NEW)

    fired = key_client.post(f"/v1/schedules/{schedule.pk}/run")

    assert fired.status_code == 201, fired.content
    firing = fired.json()
    assert firing["error"] is None
    assert firing["run"]["question"] == "Their question."
    run = AgentRun.objects.select_related("conversation").get(pk=firing["run"]["id"])
    assert run.conversation.owner == user
    assert ScheduleFiring.objects.get(pk=firing["id"]).run == run

    deleted = key_client.delete(f"/v1/schedules/{schedule.pk}")
    assert deleted.status_code == 204
    assert not Schedule.objects.exists()
    assert AgentRun.objects.filter(pk=run.pk).exists()


def test_another_users_schedule_is_a_404_and_stays_as_it_was(key_client, other_user, agent):
    theirs = _schedule_of(other_user, agent)
    url = f"/v1/schedules/{theirs.pk}"

    assert key_client.get(url).status_code == 404
    assert key_client.patch(url, {"paused": True}, content_type=JSON).status_code == 404
    assert key_client.post(f"{url}/run").status_code == 404
    assert key_client.delete(url).status_code == 404
    assert key_client.get("/v1/schedules").json()["data"] == []
    theirs.refresh_from_db()
    assert theirs.paused_at is None
    assert not theirs.firings.exists()


def test_a_read_key_reads_but_does_not_schedule(client, user, agent):
    reader = _keyed(client, user, "read")

    assert reader.get("/v1/schedules").status_code == 200
    refused = reader.post("/v1/schedules", _body(agent), content_type=JSON)
    assert refused.status_code == 403
    assert refused.json()["code"] == "insufficient_scope"
    assert not Schedule.objects.exists()


def test_no_key_and_no_session_is_a_401(client):
    assert client.get("/v1/schedules").status_code == 401


def test_a_session_schedules_under_api_with_its_csrf_token(user, agent):
    # /api/ is the site's session API; /v1/ requests carry no session in production
    # (chatsite/asgi.py), so the same views serve the session there.
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)

    assert browser.get("/api/schedules/").status_code == 200
    refused = browser.post("/api/schedules/", _body(agent), content_type=JSON)
    assert refused.status_code == 403
    assert not Schedule.objects.exists()

    browser.get("/schedules/")  # the page sets the CSRF cookie
    token = browser.cookies["csrftoken"].value
    created = browser.post(
        "/api/schedules/", _body(agent), content_type=JSON, HTTP_X_CSRFTOKEN=token
    )
    assert created.status_code == 201, created.content
    schedule = Schedule.objects.get()
    assert schedule.owner == user
    item = f"/api/schedules/{schedule.pk}/"
    paused = browser.patch(item, {"paused": True}, content_type=JSON, HTTP_X_CSRFTOKEN=token)
    assert paused.json()["paused"] is True
    assert browser.post(f"{item}run/", HTTP_X_CSRFTOKEN=token).status_code == 201
    assert browser.delete(item, HTTP_X_CSRFTOKEN=token).status_code == 204
