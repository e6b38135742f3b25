"""Schedules as resources (docs/protocol.md, "Schedules as resources"): the user's own, by
API key under /v1/schedules, and by the site's session under /api/schedules/ (/v1/ requests
carry no session: chatsite/asgi.py gives them their own short middleware list).

Thin views over agents/services/schedules.py, the service the schedules page and the admin
use: every rule (the agents the owner may use, the recurrence, the time zone, the budgets)
is judged there, and its refusal names the field, which the answer's ``fields`` repeats.
Another user's schedule is a 404, as a missing one.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import NotFound
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response

from agents import selectors
from agents.api import v1_serializers as shapes
from agents.api.keys import ApiKeyAuthentication, KeyScopeOrSession
from agents.api.v1 import ERRORS, KeyView, run_resource
from agents.models import AgentProfile, ApiKey, Schedule, ScheduleFiring
from agents.protocol import RefusalCode, RequestRefused
from agents.recurrence import describe, zone
from agents.services import schedules as schedule_services

# The service's name of a field, where the API's differs.
API_FIELD_NAMES = {"profile": "agent"}
SERVICE_FIELD_NAMES = {"rrule": "rule"}


class ScheduleView(KeyView):
    """Reads need the key's ``read`` scope, writes its ``chat`` scope (they start runs).
    Under /v1/ a key is the only way in, as for the rest of the key API; agents/api/urls.py
    serves the same views under /api/ with the session instead (``SESSION_ONLY``), where a
    session may do either, with DRF's CSRF check on every write."""

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [KeyScopeOrSession]

    @property
    def required_scope(self) -> str:  # type: ignore[override]
        if self.request.method in SAFE_METHODS:
            return ApiKey.Scope.READ
        return ApiKey.Scope.CHAT

    def schedule_or_404(self, schedule_id: int) -> Schedule:
        schedule = selectors.schedule_get(user=self.request.user, schedule_id=schedule_id)
        if schedule is None:
            raise NotFound(_("No such schedule."))
        return schedule

    def agent_or_refuse(self, slug: str) -> AgentProfile:
        profile = selectors.profile_get(user=self.request.user, slug=slug)
        if profile is None:
            raise RequestRefused(
                RefusalCode.PROFILE_NOT_ALLOWED,
                _("No agent %(agent)r is available to you (GET /v1/models lists them).")
                % {"agent": slug},
                field="agent",
            )
        return profile

    def fields_of(
        self, data: dict[str, Any], base: schedule_services.ScheduleFields | None = None
    ) -> schedule_services.ScheduleFields:
        """The service's fields from the request's, over ``base`` (a schedule's own) for
        the fields the request leaves out."""
        given: dict[str, Any] = {}
        if "agent" in data:
            given["profile"] = self.agent_or_refuse(data["agent"])
        for name, value in data.items():
            if name != "agent":
                given[SERVICE_FIELD_NAMES.get(name, name)] = value
        time_zone = given.get("time_zone", base.time_zone if base else "UTC")
        starts_at: datetime | None = given.get("starts_at")
        if starts_at is not None and starts_at.tzinfo is None:
            given["starts_at"] = _on_the_clock_of(starts_at, time_zone)
        if base is None:
            return schedule_services.ScheduleFields(**given)
        return replace(base, **given)


def _on_the_clock_of(naive: datetime, time_zone: str) -> datetime:
    try:
        return naive.replace(tzinfo=zone(time_zone))
    except ValueError as error:
        raise RequestRefused(RefusalCode.INVALID_SCHEDULE, str(error), field="time_zone") from None


def _named_for_the_api(refusal: RequestRefused) -> RequestRefused:
    if refusal.field in API_FIELD_NAMES:
        refusal.field = API_FIELD_NAMES[refusal.field]
    return refusal


def _in_zone(moment: datetime | None, time_zone: str) -> str | None:
    if moment is None:
        return None
    try:
        return moment.astimezone(zone(time_zone)).isoformat()
    except (ValueError, OverflowError):
        return moment.isoformat()


def schedule_resource(schedule: Schedule) -> dict[str, Any]:
    return {
        "id": schedule.pk,
        "object": "schedule",
        "agent": schedule.profile.slug,
        "title": schedule.title,
        "prompt": schedule.prompt,
        "rrule": schedule.rrule,
        "starts_at": _in_zone(schedule.starts_at, schedule.time_zone),
        "time_zone": schedule.time_zone,
        "description": describe(
            rule=schedule.rrule, starts_at=schedule.starts_at, time_zone=schedule.time_zone
        ),
        "conversation_mode": schedule.conversation_mode,
        "conversation_id": schedule.conversation_id,
        "budget_steps": schedule.budget_steps,
        "approval_expires_after": schedule.approval_expires_after,
        "next_fire_at": _in_zone(schedule.next_fire_at, schedule.time_zone),
        "paused": schedule.is_paused,
        "paused_at": schedule.paused_at.isoformat() if schedule.paused_at else None,
        "paused_reason": schedule.paused_reason,
        "failures_in_a_row": schedule.failures_in_a_row,
        "created_at": schedule.created_at.isoformat(),
        "updated_at": schedule.updated_at.isoformat(),
    }


# For agents/api/urls.py: the views under /api/, signed in by the site's session alone.
SESSION_ONLY = {"authentication_classes": [SessionAuthentication]}


class ScheduleCollectionView(ScheduleView):
    @extend_schema(
        operation_id="schedules_list",
        summary="Your schedules",
        responses={200: shapes.ScheduleListSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        schedules = selectors.schedules_for_user(user=self.owner())
        return Response(
            {"object": "list", "data": [schedule_resource(schedule) for schedule in schedules]}
        )

    @extend_schema(
        summary="Schedule a prompt: an agent answers it at set times, as your own send",
        request=shapes.ScheduleInput,
        responses={201: shapes.ScheduleSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        data = self.input(shapes.ScheduleInput)
        try:
            schedule = schedule_services.schedule_create(
                owner=self.owner(), fields=self.fields_of(data)
            )
        except RequestRefused as refusal:
            raise _named_for_the_api(refusal) from None
        return Response(schedule_resource(schedule), status=status.HTTP_201_CREATED)


class ScheduleItemView(ScheduleView):
    @extend_schema(
        summary="One of your schedules", responses={200: shapes.ScheduleSerializer, **ERRORS}
    )
    def get(self, request: Request, schedule_id: int) -> Response:
        return Response(schedule_resource(self.schedule_or_404(schedule_id)))

    @extend_schema(
        summary="Change a schedule (the fields sent), pause it or resume it",
        request=shapes.ScheduleChangeInput,
        responses={200: shapes.ScheduleSerializer, **ERRORS},
    )
    def patch(self, request: Request, schedule_id: int) -> Response:
        schedule = self.schedule_or_404(schedule_id)
        serializer = shapes.ScheduleChangeInput(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        user = self.owner()
        paused = data.pop("paused", None)
        try:
            if data:
                base = schedule_services.schedule_fields_of(schedule)
                schedule = schedule_services.schedule_update(
                    schedule=schedule, user=user, fields=self.fields_of(data, base)
                )
        except RequestRefused as refusal:
            raise _named_for_the_api(refusal) from None
        if paused is True:
            schedule = schedule_services.schedule_pause(schedule=schedule, user=user)
        elif paused is False and schedule.is_paused:
            schedule = schedule_services.schedule_resume(schedule=schedule, user=user)
        return Response(schedule_resource(schedule))

    @extend_schema(
        summary="Delete a schedule; its conversations and runs stay",
        responses={204: None, **ERRORS},
    )
    def delete(self, request: Request, schedule_id: int) -> Response:
        schedule = self.schedule_or_404(schedule_id)
        schedule_services.schedule_delete(schedule=schedule, user=self.owner())
        return Response(status=status.HTTP_204_NO_CONTENT)


class ScheduleRunView(ScheduleView):
    @extend_schema(
        summary="Fire a schedule once now, whatever its timing (paused too)",
        request=None,
        responses={201: shapes.FiringSerializer, **ERRORS},
    )
    def post(self, request: Request, schedule_id: int) -> Response:
        schedule = self.schedule_or_404(schedule_id)
        firing = schedule_services.schedule_run_now(schedule=schedule, user=self.owner())
        return Response(self.firing_data(firing), status=status.HTTP_201_CREATED)

    def firing_data(self, firing: ScheduleFiring) -> dict[str, Any]:
        return {
            "id": firing.pk,
            "object": "schedule.firing",
            "schedule_id": firing.schedule_id,
            "occurrence": firing.occurrence.isoformat(),
            "error": firing.error or None,
            "run": run_resource(firing.run, request=self.request) if firing.run else None,
        }
