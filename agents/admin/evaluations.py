"""Evaluation sets in the admin: a set's cases (written by hand, or made from runs and
thumbs-downs), running the set against a version, each evaluation's report (reloading
while its replays run) and two evaluations side by side (agents/services/evaluations.py)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.admin.forms import VersionChoiceField
from agents.admin.pages import ExtraPagesAdmin, ReadOnlyAdminMixin
from agents.evaluation import expectation_errors
from agents.models import EvalCase, EvalResult, EvalRun, EvalSet, PromptVersion
from agents.services.evaluations import (
    EvalRefused,
    eval_cases_from_thumbs_down,
    eval_run_start,
)
from agents.services.prompt_versions import prompt_version_newest


class EvalCaseForm(forms.ModelForm):
    class Meta:
        model = EvalCase
        fields = [
            "name",
            "history",
            "question",
            "source_run",
            "must_call",
            "must_not_call",
            "answer_contains",
            "answer_matches",
            "max_steps",
            "max_tokens",
        ]
        help_texts = {
            "history": _('[{"role": "user" or "assistant", "content": "…"}], oldest first.'),
            "must_call": _(
                '[{"tool": "name", "arguments": "regular expression"}]: searched in the '
                "call's arguments as canonical JSON (sorted keys, no spaces)."
            ),
            "must_not_call": _('The same form: [{"tool": "name", "arguments": "…"}].'),
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for field in ("must_call", "must_not_call"):
            for error in expectation_errors(data.get(field, [])):
                self.add_error(field, error)
        pattern = data.get("answer_matches") or ""
        if pattern:
            import re

            try:
                re.compile(pattern)
            except re.error as error:
                self.add_error("answer_matches", str(error))
        return data


class EvalCaseInline(admin.StackedInline):
    model = EvalCase
    form = EvalCaseForm
    extra = 0
    raw_id_fields = ["source_run"]


def _changed(left: EvalResult | None, right: EvalResult | None) -> bool:
    """Checked on both sides with a different outcome: what the change of version did."""
    if left is None or right is None or left.passed is None or right.passed is None:
        return False
    return left.passed != right.passed


class EvaluateForm(forms.Form):
    version = VersionChoiceField(
        label=_("Prompt version"),
        queryset=PromptVersion.objects.select_related("profile").order_by(
            "profile__name", "-number"
        ),
        help_text=_("A version of the set's profile, or of a draft profile to try."),
    )


@admin.register(EvalSet)
class EvalSetAdmin(ExtraPagesAdmin):
    list_display = ["name", "profile", "case_count", "created_at"]
    list_filter = [("profile", admin.RelatedOnlyFieldListFilter)]
    inlines = [EvalCaseInline]
    change_form_template = "admin/agents/evalset/change_form.html"

    @admin.display(description=_("Cases"))
    def case_count(self, obj: EvalSet) -> int:
        return obj.cases.count()

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        eval_set = self.get_object(request, object_id)
        if eval_set is not None:
            # The newest, a draft included: what a save just wrote is what staff evaluate next.
            latest = prompt_version_newest(profile=eval_set.profile)
            extra_context = {
                **(extra_context or {}),
                "evaluate_form": EvaluateForm(initial={"version": latest}),
                "eval_runs": eval_set.runs.select_related("version__profile").order_by("-pk")[:20],
            }
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self) -> list[URLPattern]:
        return [
            self._object_url("<int:object_id>/evaluate/", self.evaluate_view, "evaluate"),
            self._object_url("<int:object_id>/thumbs-down/", self.thumbs_down_view, "thumbs_down"),
            *super().get_urls(),
        ]

    def evaluate_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """Run the set against the chosen version (POST; the form is on the set's page)."""
        eval_set = self._get_for_change(request, object_id)
        back = reverse("admin:agents_evalset_change", args=[eval_set.pk])
        if request.method != "POST":
            return HttpResponseRedirect(back)
        form = EvaluateForm(request.POST)
        if not form.is_valid():
            messages.error(request, gettext("Choose a prompt version."))
            return HttpResponseRedirect(back)
        try:
            eval_run = eval_run_start(
                eval_set=eval_set,
                version=form.cleaned_data["version"],
                user=request.user,  # type: ignore[arg-type]
            )
        except EvalRefused as refusal:
            messages.error(request, str(refusal))
            return HttpResponseRedirect(back)
        return HttpResponseRedirect(reverse("admin:agents_evalrun_change", args=[eval_run.pk]))

    def thumbs_down_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """A case for every thumbs-down answer of the set's profile (POST)."""
        eval_set = self._get_for_change(request, object_id)
        if request.method == "POST":
            made = eval_cases_from_thumbs_down(eval_set=eval_set)
            messages.success(
                request,
                gettext("%(count)s cases added from thumbs-down answers.") % {"count": len(made)},
            )
        return HttpResponseRedirect(reverse("admin:agents_evalset_change", args=[eval_set.pk]))


@admin.register(EvalRun)
class EvalRunAdmin(ReadOnlyAdminMixin, ExtraPagesAdmin):
    list_display = ["id", "eval_set", "version", "status", "pass_rate", "created_at"]
    list_filter = ["status", ("eval_set", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["eval_set", "version__profile"]
    actions = ["compare"]
    change_form_template = "admin/agents/evalrun/change_form.html"
    fields = ["eval_set", "version", "started_by", "status", "created_at", "finished_at"]

    @admin.display(description=_("Passed"))
    def pass_rate(self, obj: EvalRun) -> str:
        if obj.status != EvalRun.Status.DONE:
            return "—"
        return f"{obj.passed} / {obj.cases}"

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        eval_run = self.get_object(request, object_id)
        if eval_run is not None:
            results = list(eval_run.results.select_related("case", "run").order_by("case_id"))
            extra_context = {
                **(extra_context or {}),
                "results": results,
                "checked": sum(result.passed is not None for result in results),
                "running": eval_run.status == EvalRun.Status.RUNNING,
            }
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self) -> list[URLPattern]:
        return [
            self._object_url(
                "<int:object_id>/compare/<int:other_id>/", self.compare_view, "compare"
            ),
            *super().get_urls(),
        ]

    @admin.action(description=_("Compare the two selected evaluations side by side"))
    def compare(self, request: HttpRequest, queryset: QuerySet[EvalRun]) -> HttpResponse | None:
        chosen = list(queryset.order_by("pk").values_list("pk", flat=True))
        if len(chosen) != 2:
            messages.error(request, gettext("Select exactly two evaluations to compare."))
            return None
        return HttpResponseRedirect(
            reverse("admin:agents_evalrun_compare", args=[chosen[0], chosen[1]])
        )

    def compare_view(self, request: HttpRequest, object_id: int, other_id: int) -> HttpResponse:
        """Two evaluations, case by case, with each one's pass rate."""
        left = self._get_for_view(request, object_id)
        right = get_object_or_404(EvalRun, pk=other_id)
        by_case: dict[int, dict[str, EvalResult]] = {}
        for side, eval_run in (("left", left), ("right", right)):
            for result in eval_run.results.select_related("case"):
                by_case.setdefault(result.case_id, {})[side] = result
        rows: list[dict[str, Any]] = [
            {
                "case": sides.get("left", sides.get("right")).case,  # type: ignore[union-attr]
                "changed": _changed(sides.get("left"), sides.get("right")),
                **sides,
            }
            for _case_id, sides in sorted(by_case.items())
        ]
        context = {
            **self.page_context(request, left, gettext("Two evaluations side by side")),
            "left": left,
            "right": right,
            "rows": rows,
            "changed": sum(row["changed"] for row in rows),
            "running": EvalRun.Status.RUNNING in (left.status, right.status),
        }
        return TemplateResponse(request, "admin/agents/evalrun/compare.html", context)
