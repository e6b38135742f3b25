"""build_executor: a profile version's snapshot becomes a ready engine."""

from __future__ import annotations

import pytest

from agents.models import AgentProfile, ModelConfig, ToolConfig
from agents.profile_snapshot import ProfileSnapshot
from agents.react.errors import ModelError
from agents.react.types import FinalAnswerStep, ObservationStep
from agents.runtime import build_executor
from agents.selectors import tool_configs_enabled
from agents.services.defaults import ensure_defaults

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_endpoint(settings):
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_MODEL = ""


def test_the_snapshot_decides_prompt_limits_and_tools(user):
    profile = ensure_defaults()
    profile.mode = "tools"
    profile.label_set = "zh"
    profile.max_iterations = 4
    profile.max_execution_time = 30
    profile.temperature = 0.5
    profile.save()
    snapshot = ProfileSnapshot.from_profile(profile)
    ToolConfig.objects.filter(name="current_time").update(enabled=False)

    executor = build_executor(snapshot=snapshot, user=user)

    assert (executor.prompt.mode, executor.prompt.label_set) == ("tools", "zh")
    assert (executor.config.max_iterations, executor.config.max_execution_time) == (4, 30)
    assert executor.config.temperature == 0.5
    assert [tool.name for tool in executor.tools] == ["calculator"]


@pytest.mark.parametrize("mode", ["react", "tools"])
def test_the_default_profile_answers_through_the_demo_and_calculator(user, mode):
    snapshot = ProfileSnapshot.from_profile(ensure_defaults()).with_mode(mode)
    deltas: list[str] = []

    steps = list(
        build_executor(snapshot=snapshot, user=user, on_answer_delta=deltas.append).run(
            "what is (28+10)*3?"
        )
    )

    observations = [s for s in steps if isinstance(s, ObservationStep)]
    assert [(o.tool, o.text) for o in observations] == [("calculator", "114")]
    final = steps[-1]
    assert isinstance(final, FinalAnswerStep)
    assert "114" in final.text
    assert "".join(deltas) == final.text


def test_a_deleted_model_endpoint_fails_the_run_clearly(user):
    model_config = ModelConfig.objects.create(name="temp", base_url="http://x/v1", model="m")
    profile = AgentProfile.objects.create(name="P", slug="p", model_config=model_config)
    snapshot = ProfileSnapshot.from_profile(profile)
    profile.delete()
    model_config.delete()

    executor = build_executor(snapshot=snapshot, user=user)

    with pytest.raises(ModelError, match="no longer exists") as raised:
        list(executor.run("hi"))
    assert raised.value.code == "model_misconfigured"


def test_tool_calling_support_comes_from_the_model_endpoint(user):
    model_config = ModelConfig.objects.create(name="tc", base_url="http://x/v1", model="m")
    profile = AgentProfile.objects.create(name="P", slug="p", model_config=model_config)
    snapshot = ProfileSnapshot.from_profile(profile)
    assert not build_executor(snapshot=snapshot, user=user).config.supports_tool_calling

    model_config.supports_tool_calling = True
    model_config.save()
    assert build_executor(snapshot=snapshot, user=user).config.supports_tool_calling
    no_endpoint = ProfileSnapshot.from_json({})
    assert not build_executor(snapshot=no_endpoint, user=user).config.supports_tool_calling


def test_an_endpoint_row_already_read_is_used_without_a_query(user, django_assert_num_queries):
    model_config = ModelConfig.objects.create(
        name="read", base_url="http://x/v1", model="m", supports_tool_calling=True
    )
    profile = AgentProfile.objects.create(name="P", slug="p", model_config=model_config)
    snapshot = ProfileSnapshot.from_profile(profile)

    # The profile has no tools: the tools' read costs none either.
    with django_assert_num_queries(0):
        executor = build_executor(snapshot=snapshot, user=user, model_config=model_config)
    assert executor.config.supports_tool_calling


def test_the_endpoint_row_a_run_pinned_is_used_even_where_the_snapshot_names_another(user):
    """A run's endpoint is its own (a replay's may be another than its version names)."""
    named = ModelConfig.objects.create(
        name="named", base_url="http://x/v1", model="m", supports_tool_calling=True
    )
    other = ModelConfig.objects.create(name="other", base_url="http://y/v1", model="n")
    profile = AgentProfile.objects.create(name="P", slug="p", model_config=named)
    snapshot = ProfileSnapshot.from_profile(profile)

    executor = build_executor(snapshot=snapshot, user=user, model_config=other)

    assert not executor.config.supports_tool_calling  # other's, not named's


def test_the_tool_rows_a_run_reads_are_the_orms():
    """Plain SQL for the tools' read: the same rows, fields converted as the ORM does."""
    ensure_defaults()
    extra = ToolConfig.objects.create(
        name="extra", kind="calculator", config={"nested": {"a": [1, 2]}}, timeout_seconds=2.5
    )
    disabled = ToolConfig.objects.create(name="off", kind="calculator", enabled=False)
    ids = [*ToolConfig.objects.exclude(pk=disabled.pk).values_list("pk", flat=True), 10**9]

    read = {row.pk: row for row in tool_configs_enabled(ids=[*ids, disabled.pk])}

    expected = {row.pk: row for row in ToolConfig.objects.filter(pk__in=ids, enabled=True)}
    assert set(read) == set(expected)
    assert extra.pk in read
    for pk, row in expected.items():
        for field in ToolConfig._meta.concrete_fields:
            assert getattr(read[pk], field.attname) == getattr(row, field.attname), field
    assert tool_configs_enabled(ids=[]) == []
