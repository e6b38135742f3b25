"""The pages: sign-in, sign-up and password reset, the chat page, and the archive.

Views stay thin: they read through selectors scoped to ``request.user``, write through
services, and hand the browser the conversation's stored events so ``static/js/`` can draw
the thread with the same code that applies live frames (docs/protocol.md).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    JsonResponse,
)
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import reverse, reverse_lazy
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents import selectors
from agents.admin.forms import UsageRangeForm
from agents.attachments.files import CONTENT_TYPES, allowed_extensions_text
from agents.attachments.selectors import (
    attachment_get,
    attachment_passage_at_row,
    shared_attachment_get,
)
from agents.llm.factory import is_demo_model
from agents.memory.selectors import summary_in_use
from agents.middleware import set_language_cookie, set_theme_cookie
from agents.models import AgentProfile, Attachment, Conversation
from agents.permissions import signed_in_user
from agents.preferences import remember_in_session, supported_language
from agents.protocol import RequestRefused, event_frame, max_message_chars
from agents.ratelimit import rate_limit_hit
from agents.selectors import custom_instructions_of
from agents.services import conversations as conversation_services
from agents.services.api_keys import api_key_create, api_key_revoke
from agents.services.notifications import notifications_unread_count
from agents.services.preferences import (
    CUSTOM_INSTRUCTIONS_MAX_CHARS,
    preference_set_instructions,
    preference_update,
)
from agents.services.sandbox import OTHER, PNG
from agents.services.tools import tool_names_reading_private_data
from agents.services.usage import budget_states, budget_used_text, budget_warning
from agents.transcript import transcript
from agents.usage_reports import (
    UsageBy,
    UsageLine,
    usage_days,
    usage_entries,
    usage_lines,
    usage_totals,
)

# --------------------------------------------------------------------------------------
# Sign-in, sign-up, password reset
# --------------------------------------------------------------------------------------


class SignInView(auth_views.LoginView):
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.SIGNIN_PASSWORD_ENABLED:
            return _password_sign_in_off()
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        # Read per request, so the links follow the settings of the moment.
        password = settings.SIGNIN_PASSWORD_ENABLED
        return super().get_context_data(
            password_signin_enabled=password,
            signup_enabled=settings.CHAT_SIGNUP_ENABLED and password,
            password_reset_enabled=bool(settings.EMAIL_BACKEND) and password,
            sso_enabled=settings.OIDC_ENABLED,
            sso_provider=settings.OIDC_PROVIDER_NAME,
            **kwargs,
        )


def _password_sign_in_off() -> HttpResponse:
    """What every password endpoint answers while only single sign-on signs in."""
    return HttpResponse(
        _("Signing in with a password is switched off: use single sign-on."),
        status=403,
        content_type="text/plain; charset=utf-8",
    )


def _needs_password_sign_in(
    view: Callable[..., HttpResponseBase],
) -> Callable[..., HttpResponseBase]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.SIGNIN_PASSWORD_ENABLED:
            return _password_sign_in_off()
        return view(request, *args, **kwargs)

    return wrapped


login_view = SignInView.as_view()
logout_view = auth_views.LogoutView.as_view()


@_needs_password_sign_in
def admin_sign_in(request: HttpRequest) -> HttpResponse:
    """The admin's own sign-in form, while passwords sign in."""
    from django.contrib import admin

    return admin.site.login(request)


class PasswordChangeView(auth_views.PasswordChangeView):
    """Django's, with the sign-in throttle's allowance: the old password is a password
    check like a sign-in, so a stolen session must not guess it at will."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        user_id = request.user.pk  # signed in: the view requires it
        if settings.AXES_ENABLED and user_id is not None:
            decision = rate_limit_hit(
                action="password_change",
                user_id=user_id,
                limit=settings.AXES_FAILURE_LIMIT,
                window_seconds=settings.AXES_COOLOFF_TIME.total_seconds(),
            )
            if not decision.allowed:
                minutes = max(1, math.ceil(decision.retry_after / 60))
                message = _(
                    "Too many attempts to change the password; try again in %(minutes)d minutes."
                ) % {"minutes": minutes}
                return HttpResponse(message, status=429, content_type="text/plain")
        return super().post(request, *args, **kwargs)


password_change = _needs_password_sign_in(
    PasswordChangeView.as_view(success_url=reverse_lazy("password_change_done"))
)
password_change_done = auth_views.PasswordChangeDoneView.as_view()


def signup(request: HttpRequest) -> HttpResponse:
    if not settings.CHAT_SIGNUP_ENABLED or not settings.SIGNIN_PASSWORD_ENABLED:
        raise Http404(_("Sign-up is switched off."))
    if request.user.is_authenticated:
        return redirect("chat")
    form: UserCreationForm[User] = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("chat")
    return render(request, "registration/signup.html", {"form": form})


def signin_locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: Any
) -> HttpResponse:
    """django-axes' answer once a username has failed too often from this address.

    The same page for every username, existing or not, so it reveals no account.
    """
    minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    return render(
        request,
        "registration/locked_out.html",
        {"lockout_minutes": minutes, "password_reset_enabled": bool(settings.EMAIL_BACKEND)},
        status=429,
    )


def _needs_email(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Password reset only makes sense when the site can send the email."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.EMAIL_BACKEND:
            raise Http404(_("Password reset needs email, which is not configured."))
        if not settings.SIGNIN_PASSWORD_ENABLED:
            return _password_sign_in_off()
        return view(request, *args, **kwargs)

    return wrapped


password_reset = _needs_email(auth_views.PasswordResetView.as_view())
password_reset_done = _needs_email(auth_views.PasswordResetDoneView.as_view())
password_reset_confirm = _needs_email(auth_views.PasswordResetConfirmView.as_view())
password_reset_complete = _needs_email(auth_views.PasswordResetCompleteView.as_view())


# --------------------------------------------------------------------------------------
# The user menu's language and theme
# --------------------------------------------------------------------------------------


@require_POST
def preferences(request: HttpRequest) -> HttpResponse:
    """Set ``language`` and/or ``theme`` from the user menu (a form post, or fetch asking
    for JSON). Stored for a signed-in user, so it follows them to other devices; kept in
    this browser's cookies either way, so the sign-in page follows it too."""
    language = request.POST.get("language")
    theme = request.POST.get("theme")
    wants_json = "application/json" in request.headers.get("Accept", "")
    if language and supported_language(language) is None:
        return _preferences_refused(request, _("That language is not available."), wants_json)
    language = supported_language(language) if language else language
    if request.user.is_authenticated:
        try:
            stored = preference_update(
                user=signed_in_user(request.user), language=language, theme=theme
            )
        except ValidationError as error:
            return _preferences_refused(request, error.messages[0], wants_json)
        remember_in_session(request.session, stored)
    elif theme is not None and theme not in {"system", "light", "dark"}:
        return _preferences_refused(request, _("That theme is not available."), wants_json)
    if language:
        translation.activate(language)
    response: HttpResponse
    if wants_json:
        response = JsonResponse({"language": translation.get_language(), "theme": theme})
    else:
        next_url = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(
            next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            next_url = reverse("chat")
        response = redirect(next_url)
    if language is not None:
        if language:
            set_language_cookie(response, language)
        else:
            response.delete_cookie(settings.LANGUAGE_COOKIE_NAME)
    if theme is not None:
        set_theme_cookie(response, theme)
    return response


@login_required
@require_http_methods(["GET", "POST"])
def custom_instructions(request: HttpRequest) -> HttpResponse:
    """The user menu's "Custom instructions" dialog (static/js/user_menu.js): GET reads them,
    POST ``instructions`` stores them (empty removes them). A refusal is a 400 with the
    reason, and what was stored stays; the dialog keeps the text typed."""
    user = signed_in_user(request.user)
    limit = CUSTOM_INSTRUCTIONS_MAX_CHARS
    if request.method == "POST":
        try:
            stored = preference_set_instructions(user=user, text=request.POST.get("instructions"))
        except ValidationError as error:
            return JsonResponse(
                {"code": error.code or "invalid", "message": error.messages[0], "limit": limit},
                status=400,
            )
        return JsonResponse({"instructions": stored.custom_instructions, "limit": limit})
    return JsonResponse({"instructions": custom_instructions_of(user_id=user.pk), "limit": limit})


def _preferences_refused(request: HttpRequest, message: str, wants_json: bool) -> HttpResponse:
    if wants_json:
        return JsonResponse({"code": "invalid", "message": message}, status=400)
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")


# --------------------------------------------------------------------------------------
# The chat page
# --------------------------------------------------------------------------------------


# The sidebar starts with this many; search reaches the rest through the API.
SIDEBAR_LIMIT = 200


def _conversation_or_404(request: HttpRequest, conversation_id: int) -> Conversation:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404(_("No such conversation."))
    return conversation


def _conversation_item(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.pk,
        "title": str(conversation),
        "untitled": not conversation.title,
        "updated_at": conversation.updated_at.isoformat(),
        "archived": conversation.archived,
        "pinned": conversation.pinned_at is not None,
        "folder_id": conversation.folder_id,
        # Annotated on the sidebar's list (agents/selectors.py); the open one's thread knows.
        "has_active_run": bool(getattr(conversation, "has_active_run", False)),
    }


def _summary_marker(conversation: Conversation) -> dict[str, Any] | None:
    """Where earlier messages were folded into a summary, for a quiet marker in the thread."""
    summary = summary_in_use(conversation=conversation)
    if summary is None:
        return None
    return {"through_message_id": summary.covers_through_id, "text": summary.text}


def _tree(conversation: Conversation) -> dict[str, Any]:
    # The leaf comes with the messages (one statement): a leaf older than the messages would
    # hide an answer the tree already holds.
    tree = selectors.conversation_tree(conversation=conversation)
    return {
        "messages": [[node.id, node.parent_id, node.role, node.run_id] for node in tree.nodes],
        "run_triggers": selectors.run_triggers(conversation=conversation),
        "active_leaf_id": tree.active_leaf_id,
    }


def _profile_for_page(
    conversation: Conversation | None, profiles: list[AgentProfile]
) -> AgentProfile | None:
    if conversation is not None and conversation.profile_id:
        for profile in profiles:
            if profile.pk == conversation.profile_id:
                return profile
    return next((p for p in profiles if p.is_default), profiles[0] if profiles else None)


def _conversation_urls(conversation: Conversation) -> dict[str, str]:
    """The JSON API the page calls for this conversation (agents/api/urls.py)."""
    return {
        "conversation": reverse("api:conversation", args=[conversation.pk]),
        "regenerate": reverse("api:conversation-regenerate", args=[conversation.pk]),
        "branch": reverse("api:conversation-branch", args=[conversation.pk]),
        "compact": reverse("api:conversation-compact", args=[conversation.pk]),
        # The browser swaps the 0 for the message being edited or the run being stopped.
        "edit_message": reverse("api:message-edit", args=[0]),
        "continue_answer": reverse("api:message-continue", args=[0]),
        "cancel_run": reverse("api:run-cancel", args=[0]),
        "fork_run": reverse("api:run-fork", args=[0]),
        "feedback": reverse("api:message-feedback", args=[0]),
        "share": reverse("api:conversation-share", args=[conversation.pk]),
    }


@login_required
@require_GET
def chat(request: HttpRequest, conversation_id: int | None = None) -> HttpResponse:
    conversation = None
    if conversation_id is not None:
        conversation = _conversation_or_404(request, conversation_id)
    return _render_chat(request, conversation)


def _render_chat(
    request: HttpRequest,
    conversation: Conversation | None,
    *,
    draft: str = "",
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    frames: list[dict[str, Any]] = []
    tree = None
    if conversation is not None:
        # The tree before the frames: a run that ends between the two reads then has its
        # answer in the frames (or in the socket's replay after them) and not in the tree,
        # which the page adds as news. The other way round the page knew the answer from
        # the tree, still showed the branch ending at the question, and took the answer's
        # frame for one it had (the run never showed: two CI runs' first-question flake).
        tree = _tree(conversation)
        stored = selectors.events_after(conversation=conversation, after_seq=0)
        frames = [event_frame(event) for event in stored]
    profiles = list(selectors.profiles_for_user(user=request.user).select_related("model_config"))
    profile = _profile_for_page(conversation, profiles)
    state = {
        "conversation": _conversation_item(conversation) if conversation else None,
        "events": frames,
        "summary": _summary_marker(conversation) if conversation else None,
        # The tree the frames are drawn into: every message's parent, each run's question,
        # and the branch shown (static/js/thread.js). Frames written before the tree lack
        # some of this, so it comes from the rows.
        "tree": tree,
        # The reader's own thumbs on this conversation's answers (static/js/answer_tools.js).
        "feedback": (
            selectors.feedback_by_message(
                user=signed_in_user(request.user), conversation=conversation
            )
            if conversation
            else {}
        ),
        "conversations": [
            _conversation_item(c)
            for c in selectors.conversation_list(user=request.user)[:SIDEBAR_LIMIT]
        ],
        # The sidebar's folders (static/js/sidebar.js); their conversations name them.
        "folders": [
            {"id": folder.pk, "name": folder.name}
            for folder in selectors.folder_list(user=request.user)
        ],
        "urls": _conversation_urls(conversation) if conversation else {},
        # The composer's files (static/js/attachments.js): where they go and what is allowed.
        "attachment_api": {
            "conversations": reverse("api:conversations"),
            "upload": reverse("api:conversation-attachments", args=[0]),
            "item": reverse("api:attachment", args=[0]),
            "messages": reverse("api:conversation-messages", args=[0]),
            "max_bytes": settings.CHAT_ATTACHMENT_MAX_BYTES,
            "accept": allowed_extensions_text().replace(" ", ""),
        },
        "resume_after_silent_ms": round(settings.CHAT_RESUME_AFTER_SILENT_SECONDS * 1000),
        "max_message_chars": max_message_chars(),
        # The demo banner follows the agent picker (static/js/chat.js).
        "demo_profiles": [p.slug for p in profiles if is_demo_model(p.model_config)],
    }
    context = {
        "conversation": conversation,
        "profiles": profiles,
        "selected_profile": profile,
        "demo_model": is_demo_model(profile.model_config if profile else None),
        "public_shares": settings.CHAT_PUBLIC_SHARES,
        "draft": draft,
        "error": error,
        "state": state,
        # A monthly budget at its warning share or used up (agents/services/usage.py).
        "budget_warning": budget_warning(user_id=signed_in_user(request.user).pk),
        # The bell's badge from the first paint; notifications.js keeps it live once loaded.
        "unread": notifications_unread_count(user_id=signed_in_user(request.user).pk),
    }
    return render(request, "agents/chat.html", context, status=status)


# --------------------------------------------------------------------------------------
# A user's own usage and cost
# --------------------------------------------------------------------------------------

_CHART_WIDTH = 600
_CHART_HEIGHT = 160


@login_required
@require_GET
def usage(request: HttpRequest) -> HttpResponse:
    """The signed-in user's tokens and cost by day, agent and conversation, with a chart of
    the days (SVG drawn here) and their monthly budgets; nobody else's rows are read."""
    form = UsageRangeForm(request.GET or None)
    since, until = form.date_range()
    entries = usage_entries(since=since, until=until, user_id=signed_in_user(request.user).pk)
    days = usage_lines(entries=entries, by=UsageBy.DAY)
    last_day = (until - datetime.timedelta(days=1)).date()
    context = {
        "form": form,
        "since": since,
        "last_day": last_day,
        "currency": settings.CHAT_CURRENCY,
        "totals": usage_totals(entries=entries),
        "by_day": days,
        "by_agent": usage_lines(entries=entries, by=UsageBy.AGENT),
        "by_conversation": usage_lines(entries=entries, by=UsageBy.CONVERSATION),
        "chart": _usage_chart(usage_days(days, first=since.date(), last=last_day)),
        "budgets": [
            {
                "state": state,
                "used": budget_used_text(state),
                "percent": round(state.share_used * 100),
            }
            for state in budget_states(user_id=signed_in_user(request.user).pk)
        ],
    }
    return render(request, "agents/usage.html", context)


def _usage_chart(days: list[UsageLine]) -> dict[str, Any]:
    """Bars of tokens per day, scaled to the fullest day, as plain numbers for the SVG in
    ``agents/usage.html`` (the table below it carries the same figures as text)."""
    most = max((day.total_tokens for day in days), default=0)
    slot = _CHART_WIDTH / max(len(days), 1)
    bars = []
    for index, day in enumerate(days):
        height = round(day.total_tokens / most * _CHART_HEIGHT, 1) if most else 0
        bars.append(
            {
                "day": day,
                "x": round(index * slot + slot * 0.1, 1),
                "y": round(_CHART_HEIGHT - height, 1),
                "width": round(slot * 0.8, 1),
                "height": height,
            }
        )
    return {"bars": bars, "width": _CHART_WIDTH, "height": _CHART_HEIGHT, "most": most}


@login_required
@require_GET
def archived(request: HttpRequest) -> HttpResponse:
    conversations = selectors.conversation_list(user=request.user, archived=True)
    return render(request, "agents/archived.html", {"conversations": conversations})


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """The site's icon for browsers that ask for /favicon.ico (pages name it in base.html).

    Not a permanent redirect: the static file's hashed name changes with its content.
    """
    return redirect(static("img/favicon.svg"))


@require_GET
def shared_conversation(request: HttpRequest, token: str) -> HttpResponse:
    """A conversation its owner shared: read-only, with steps and answers, and nothing else
    of the owner's. Signed-in users only unless ``CHAT_PUBLIC_SHARES``; revoked is a 404."""
    if not settings.CHAT_PUBLIC_SHARES and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    conversation = selectors.shared_conversation_get(token=token)
    if conversation is None:
        if not selectors.share_was_revoked(token=token):
            raise Http404(_("No such shared conversation."))
        # Still a 404 (nothing is there), but the reader learns the link was closed on purpose.
        revoked = render(request, "agents/share_revoked.html", status=404)
        revoked["Referrer-Policy"] = "no-referrer"
        revoked["X-Robots-Tag"] = "noindex, nofollow"
        return revoked
    stored = selectors.events_after(conversation=conversation, after_seq=0)
    turns = transcript(
        (event_frame(event) for event in stored),
        secrets=selectors.tool_secret_values(),
        branch=selectors.active_branch_view(conversation=conversation),
        hidden_tools=tool_names_reading_private_data(),
    )
    response = render(request, "agents/shared.html", {"title": str(conversation), "turns": turns})
    # The token is the key: keep it out of Referer headers and search engines.
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response


# --------------------------------------------------------------------------------------
# Form posts that work without JavaScript. Everything else goes through the JSON API.
# --------------------------------------------------------------------------------------


@login_required
@require_POST
def conversation_new(request: HttpRequest) -> HttpResponse:
    """Start a conversation with its first message, then show it while the run goes."""
    content = request.POST.get("content", "").strip()
    if not content:
        return redirect("chat")
    slug = request.POST.get("profile", "")
    profile = selectors.profile_get(user=request.user, slug=slug)
    try:
        with transaction.atomic():
            conversation = conversation_services.conversation_create(
                owner=signed_in_user(request.user), profile=profile
            )
            conversation_services.message_send(
                conversation=conversation,
                user=signed_in_user(request.user),
                content=content,
                client_id=request.POST.get("client_id") or None,
                profile=profile,
            )
    except RequestRefused as refusal:
        # Nothing was kept: show the page again with the text still in the box.
        return _render_chat(request, None, draft=content, error=refusal.message, status=400)
    return redirect("conversation", conversation_id=conversation.pk)


@login_required
@require_POST
def conversation_archive(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = _conversation_or_404(request, conversation_id)
    archive = request.POST.get("archived", "1") != "0"
    conversation_services.conversation_set_archived(conversation=conversation, archived=archive)
    if archive:
        return redirect("chat")
    # Restored: to the conversation itself, not back to a list it just left (maybe empty).
    return redirect("conversation", conversation_id=conversation.pk)


@login_required
@require_GET
def sandbox_file(request: HttpRequest, file_id: str, name: str) -> HttpResponseBase:
    """A file the python tool kept, to its conversation's owner only (anyone else: 404).

    Only a file whose bytes are a PNG is shown inline, as ``image/png``; every other file is a
    download (``application/octet-stream``, ``attachment``), never rendered or run.
    """
    stored = selectors.sandbox_file_get(user=request.user, file_id=file_id)
    if stored is None or stored.name != name:
        raise Http404
    inline = stored.content_type == PNG
    response = FileResponse(
        stored.file.open("rb"),
        content_type=PNG if inline else OTHER,
        as_attachment=not inline,
        filename=stored.name,
    )
    response["Cache-Control"] = "private, max-age=3600"
    return response


# --------------------------------------------------------------------------------------
# Attached files: their bytes, to their owner and to a shared conversation's readers
# --------------------------------------------------------------------------------------


def _file_response(attachment: Attachment) -> HttpResponseBase:
    """The stored bytes with a content type that cannot run here (HTML goes as plain text) and
    the user's file name. PDFs and images open in the browser (a citation's ``#page=3``); the
    rest download."""
    inline = attachment.kind in ("pdf", "png", "jpeg", "text", "markdown", "csv", "html")
    response = FileResponse(
        attachment.file.open("rb"),
        as_attachment=not inline,
        filename=attachment.name,
        content_type=CONTENT_TYPES[attachment.kind],
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    # Nothing it holds may run or load anything; the text kinds also lose the site's origin
    # (a sandbox would stop the browser's own PDF viewer, so PDFs and images keep theirs).
    response["Content-Security-Policy"] = (
        "default-src 'none'; img-src 'self'; object-src 'self'; style-src 'unsafe-inline'"
        if attachment.kind in ("pdf", "png", "jpeg")
        else "sandbox; default-src 'none'"
    )
    return response


@login_required
@require_GET
def attachment_file(request: HttpRequest, attachment_id: int) -> HttpResponseBase:
    attachment = attachment_get(user=request.user, attachment_id=attachment_id)
    if attachment is None:
        raise Http404(_("No such file."))
    return _file_response(attachment)


@login_required
@require_GET
def attachment_rows(request: HttpRequest, attachment_id: int) -> HttpResponse:
    """A table's rows around the one a citation names (``?row=12``), that row marked."""
    attachment = attachment_get(user=request.user, attachment_id=attachment_id)
    if attachment is None or attachment.kind not in ("csv", "xlsx"):
        raise Http404(_("No such file."))
    try:
        row = max(int(request.GET.get("row", "1")), 1)
    except ValueError:
        row = 1
    passage = attachment_passage_at_row(attachment=attachment, row=row)
    lines = []
    for line in passage.text.splitlines() if passage else []:
        number, _sep, text = line.partition(": ")
        lines.append({"number": number, "text": text, "cited": number == str(row)})
    return render(
        request,
        "agents/attachment_rows.html",
        {
            "attachment": attachment,
            "lines": lines,
            "row": row,
            "label": passage.label if passage else "",
        },
    )


def shared_attachment_file(
    request: HttpRequest, token: str, attachment_id: int
) -> HttpResponseBase:
    """A file of a shared conversation, for the share's readers (as the shared page)."""
    if not settings.CHAT_PUBLIC_SHARES and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    conversation = selectors.shared_conversation_get(token=token)
    attachment = (
        shared_attachment_get(conversation=conversation, attachment_id=attachment_id)
        if conversation is not None
        else None
    )
    if attachment is None:
        raise Http404(_("No such file."))
    response = _file_response(attachment)
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response


# --- API keys: the user's own page (agents/services/api_keys.py) ---------------------------

# Where a new key's secret waits, in the session, for the one page that shows it.
NEW_KEY_SESSION = "api_key_new_secret"


@login_required
def api_keys(request: HttpRequest) -> HttpResponse:
    """The user's keys: make one (name, scopes), see it once, revoke any."""
    user = signed_in_user(request.user)
    error = ""
    name = ""
    scopes: list[str] = ["read", "chat"]
    if request.method == "POST":
        name = request.POST.get("name", "")
        scopes = request.POST.getlist("scopes")
        try:
            made = api_key_create(owner=user, name=name, scopes=scopes)
        except RequestRefused as refusal:
            error = refusal.message
        else:
            request.session[NEW_KEY_SESSION] = made.secret
            return redirect("api_keys")
    return render(
        request,
        "agents/api_keys.html",
        {
            "keys": selectors.api_key_list(user=user),
            "new_secret": request.session.pop(NEW_KEY_SESSION, None),
            "error": error,
            "name": name,
            "scopes": scopes,
            "api_base": request.build_absolute_uri("/v1"),
        },
        status=400 if error else 200,
    )


@login_required
@require_POST
def api_key_revoke_view(request: HttpRequest, key_id: int) -> HttpResponse:
    user = signed_in_user(request.user)
    key = selectors.api_key_get(user=user, key_id=key_id)
    if key is None:
        raise Http404
    api_key_revoke(key=key, by=user)
    return redirect("api_keys")
