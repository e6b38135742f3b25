"""The pages: sign-in, sign-up and password reset, the chat page, and the archive.

Views stay thin: they read through selectors scoped to ``request.user``, write through
services, and hand the browser the conversation's stored events so ``static/js/`` can draw
the thread with the same code that applies live frames (docs/protocol.md).
"""

from __future__ import annotations

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
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import reverse, reverse_lazy
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from agents import selectors
from agents.llm.factory import is_demo_model
from agents.memory.selectors import summary_in_use
from agents.middleware import set_language_cookie, set_theme_cookie
from agents.models import AgentProfile, Conversation
from agents.permissions import signed_in_user
from agents.preferences import remember_in_session, supported_language
from agents.protocol import RequestRefused, event_frame, max_message_chars
from agents.ratelimit import rate_limit_hit
from agents.services import conversations as conversation_services
from agents.services.api_keys import api_key_create, api_key_revoke
from agents.services.preferences import preference_update
from agents.services.tools import tool_names_reading_private_data
from agents.transcript import transcript

# --------------------------------------------------------------------------------------
# Sign-in, sign-up, password reset
# --------------------------------------------------------------------------------------


class SignInView(auth_views.LoginView):
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        # Read per request, so the links follow the settings of the moment.
        return super().get_context_data(
            signup_enabled=settings.CHAT_SIGNUP_ENABLED,
            password_reset_enabled=bool(settings.EMAIL_BACKEND),
            **kwargs,
        )


login_view = SignInView.as_view()
logout_view = auth_views.LogoutView.as_view()


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


password_change = PasswordChangeView.as_view(success_url=reverse_lazy("password_change_done"))
password_change_done = auth_views.PasswordChangeDoneView.as_view()


def signup(request: HttpRequest) -> HttpResponse:
    if not settings.CHAT_SIGNUP_ENABLED:
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
        "cancel_run": reverse("api:run-cancel", args=[0]),
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
        "urls": _conversation_urls(conversation) if conversation else {},
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
    }
    return render(request, "agents/chat.html", context, status=status)


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
