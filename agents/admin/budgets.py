"""Monthly budgets (``UsageBudget``): per user or per group, in tokens, money or both. The
check is ``agents/services/usage.py``'s; this page only edits the rows and shows each one's
month so far."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.models import UsageBudget
from agents.services.usage import budget_state, budget_used_text


@admin.register(UsageBudget)
class UsageBudgetAdmin(admin.ModelAdmin):
    list_display = ["__str__", "monthly_tokens", "monthly_amount_with_currency", "this_month"]
    list_select_related = ["user", "group"]
    fields = ["user", "group", "monthly_tokens", "monthly_amount"]

    @admin.display(description=_("amount a month"))
    def monthly_amount_with_currency(self, obj: UsageBudget) -> str:
        if obj.monthly_amount is None:
            return "-"
        return f"{obj.monthly_amount} {settings.CHAT_CURRENCY}"

    @admin.display(description=_("this month"))
    def this_month(self, obj: UsageBudget) -> str:
        state = budget_state(obj)
        return gettext("%(used)s (%(percent)s%%)") % {
            "used": budget_used_text(state),
            "percent": round(state.share_used * 100),
        }
