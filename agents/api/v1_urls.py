"""The key API's routes, under /v1/ (agents/api/v1.py). Each view is entered through
``unthreaded``: its work runs on a shared thread pool, its streamed body from the loop."""

from django.urls import path, re_path

from agents.api import v1, v1_schedules
from agents.api.v1 import unthreaded

app_name = "v1"

urlpatterns = [
    path("models", unthreaded(v1.ModelListView.as_view()), name="models"),
    path("chat/completions", unthreaded(v1.ChatCompletionsView.as_view()), name="chat"),
    path("runs", unthreaded(v1.RunCollectionView.as_view()), name="runs"),
    path("runs/<int:run_id>", unthreaded(v1.RunItemView.as_view()), name="run"),
    path("runs/<int:run_id>/cancel", unthreaded(v1.RunCancelView.as_view()), name="run-cancel"),
    path(
        "runs/<int:run_id>/continue",
        unthreaded(v1.RunContinueView.as_view()),
        name="run-continue",
    ),
    path("runs/<int:run_id>/events", unthreaded(v1.RunEventsView.as_view()), name="run-events"),
    path(
        "approvals/<int:approval_id>/decide",
        unthreaded(v1.ApprovalDecideView.as_view()),
        name="approval-decide",
    ),
    path(
        "schedules",
        unthreaded(v1_schedules.ScheduleCollectionView.as_view()),
        name="schedules",
    ),
    path(
        "schedules/<int:schedule_id>",
        unthreaded(v1_schedules.ScheduleItemView.as_view()),
        name="schedule",
    ),
    path(
        "schedules/<int:schedule_id>/run",
        unthreaded(v1_schedules.ScheduleRunView.as_view()),
        name="schedule-run",
    ),
    # Last: any other path under /v1/ is a JSON 404.
    re_path(r"^", unthreaded(v1.NoSuchEndpointView.as_view()), name="no-such-endpoint"),
]
