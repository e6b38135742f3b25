"""The key API's OpenAPI schema (drf-spectacular) and a bounded schemathesis run against a
real daphne: every documented operation, with generated requests, answers without a 500 and
within its documented response schema."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from schemathesis import openapi
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from agents.models import ApiKey
from agents.services.api_keys import api_key_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Generated requests per operation: bounded, so the run takes seconds rather than minutes.
EXAMPLES_PER_OPERATION = 25


def test_the_schema_documents_every_key_endpoint(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()

    assert sorted(schema["paths"]) == [
        "/v1/approvals/{approval_id}/decide",
        "/v1/chat/completions",
        "/v1/models",
        "/v1/runs",
        "/v1/runs/{run_id}",
        "/v1/runs/{run_id}/cancel",
        "/v1/runs/{run_id}/continue",
        "/v1/runs/{run_id}/events",
        "/v1/schedules",
        "/v1/schedules/{schedule_id}",
        "/v1/schedules/{schedule_id}/run",
    ]
    assert schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"


def test_generated_requests_get_no_server_error_and_match_the_schema(live_stack, user):
    made = api_key_create(owner=user, name="fuzz", scopes=["read", "chat"])
    ApiKey.objects.filter(pk=made.key.pk).update(requests_per_minute=0)  # no limit here
    live_stack.profile("fuzz-agent")
    base_url = live_stack.daphne.url
    schema = openapi.from_url(f"{base_url}/api/schema/?format=json")
    headers = {"Authorization": f"Bearer {made.secret}"}
    checked = []

    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def check(case):
            response = case.call(base_url=base_url, headers=headers, timeout=30)
            case.validate_response(
                response, checks=[not_a_server_error, response_schema_conformance]
            )

        check()
        checked.append(operation.label)

    assert len(checked) == 14
