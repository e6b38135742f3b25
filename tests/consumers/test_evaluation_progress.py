"""`/ws/evaluations/<id>/`: staff allowed to view evaluations follow one live. The socket
opens with where the evaluation stands, then gets each case as it is checked, published
after the check commits; anyone else is refused as the socket opens."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import Permission

from agents.models import AgentProfile, EvalResult, EvalRun, EvalSet
from agents.services.evaluations import eval_run_ended
from agents.services.prompt_versions import prompt_version_ensure
from chatsite.asgi import application
from tests.admin.conftest import make_finished_run  # noqa: F401 (a fixture)
from tests.consumers.sockets import ORIGIN, QUIET_SECONDS, close_code, receive, run, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


def evaluation_socket(eval_run_id: int, cookie: str | None) -> WebsocketCommunicator:
    headers = [(b"host", b"localhost"), (b"origin", ORIGIN.encode())]
    if cookie is not None:
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, f"/ws/evaluations/{eval_run_id}/", headers=headers)


@pytest.fixture
def evaluation(user, make_finished_run):  # noqa: F811
    """An evaluation of two cases, neither checked yet; the first one's replay has ended."""
    profile = AgentProfile.objects.create(name="Geographer", slug="geographer")
    version = prompt_version_ensure(profile=profile)
    eval_set = EvalSet.objects.create(profile=profile, name="Capitals")
    eval_run = EvalRun.objects.create(eval_set=eval_set, version=version, cases=2)
    ended = make_finished_run(owner=user, profile_version=version)
    for name, replay in (("France", ended), ("Peru", None)):
        case = eval_set.cases.create(name=name, question=f"The capital of {name}?")
        case.answer_contains = "Paris"
        case.save()
        EvalResult.objects.create(eval_run=eval_run, case=case, run=replay)
    return eval_run


def test_staff_get_the_state_then_each_case_as_it_is_checked(make_user, evaluation):
    staff = make_user("watcher", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_evalrun"))
    cookie = session_cookie(staff)
    first, second = evaluation.results.select_related("run").order_by("case_id")
    replay = first.run

    async def body():
        communicator = evaluation_socket(evaluation.pk, cookie)
        assert (await communicator.connect())[0]
        opening = await receive(communicator)
        await database_sync_to_async(eval_run_ended)(run=replay)
        checked = await receive(communicator)
        assert await communicator.receive_nothing(timeout=QUIET_SECONDS)
        await communicator.disconnect()
        return opening, checked

    opening, checked = run(body)
    assert opening["type"] == "evaluation.progress"
    assert opening["evaluation"] == {
        "id": evaluation.pk,
        "status": "running",
        "cases": 2,
        "checked": 0,
        "passed": 0,
    }
    assert [(r["id"], r["run_id"], r["passed"]) for r in opening["results"]] == [
        (first.pk, first.run_id, None),
        (second.pk, None, None),
    ]
    assert checked["evaluation"]["checked"] == 1
    assert checked["evaluation"]["passed"] == 1
    [result] = checked["results"]
    assert (result["id"], result["passed"]) == (first.pk, True)
    assert result["checks"] == [
        {"expectation": "The run ends with an answer", "passed": True, "detail": ""},
        {
            "expectation": "The answer contains “Paris”",
            "passed": True,
            "detail": "The capital of France is Paris.",
        },
    ]
    assert result["tokens"] == 150


@pytest.mark.parametrize(
    ("who", "code"),
    [("nobody", 4401), ("user", 4404), ("staff without the permission", 4404)],
)
def test_anyone_else_is_refused_as_the_socket_opens(make_user, user, evaluation, who, code):
    cookie = {
        "nobody": None,
        "user": session_cookie(user),
        "staff without the permission": session_cookie(make_user("clerk", is_staff=True)),
    }[who]

    async def body():
        communicator = evaluation_socket(evaluation.pk, cookie)
        assert (await communicator.connect())[0]
        return await close_code(communicator)

    assert run(body) == code


def test_an_evaluation_that_does_not_exist_is_not_found(make_user):
    cookie = session_cookie(make_user("boss", is_staff=True, is_superuser=True))

    async def body():
        communicator = evaluation_socket(999999, cookie)
        assert (await communicator.connect())[0]
        return await close_code(communicator)

    assert run(body) == 4404
