"""The JSON API (docs/protocol.md, "HTTP API"): thin views over selectors and services.

Every lookup is scoped to ``request.user`` through a selector, so another user's id is a
404 exactly like a missing one. Every error body is ``{"code", "message"}`` (validation
errors add ``fields``), the same shape as the socket's ``error`` frame.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.utils.text import slugify
from django.utils.translation import gettext as _
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from agents import selectors
from agents.api import serializers as api
from agents.api.export import EXPORT_FORMATS, export_data, export_json, export_markdown
from agents.attachments import selectors as attachment_selectors
from agents.attachments.files import FileRefused, judge_size_only
from agents.memory.selectors import summary_in_use
from agents.memory.services import SummaryRequest, summary_request
from agents.models import (
    AgentProfile,
    AgentRun,
    Conversation,
    ConversationFolder,
    ConversationShare,
    Message,
)
from agents.permissions import signed_in_user
from agents.protocol import RefusalCode, RequestRefused, approval_decided_payload, event_frame
from agents.services.approvals import approval_decide, run_continue
from agents.services.attachments import attachment_delete, attachment_upload
from agents.services.branches import branch_switch
from agents.services.conversations import (
    SendResult,
    answer_continue,
    conversation_create,
    conversation_delete,
    conversation_pin,
    conversation_rename,
    conversation_set_archived,
    conversation_unpin,
    conversations_delete,
    conversations_set_archived,
    message_edit_resend,
    message_send,
    run_cancel,
    run_fork,
    run_regenerate,
)
from agents.services.feedback import feedback_clear, feedback_set
from agents.services.folders import (
    FolderGone,
    conversation_move,
    folder_create,
    folder_delete,
    folder_rename,
)
from agents.services.shares import share_create, share_revoke


class ApiView(GenericAPIView):
    def conversation_or_404(self, conversation_id: int) -> Conversation:
        conversation = selectors.conversation_get(
            user=self.request.user, conversation_id=conversation_id
        )
        if conversation is None:
            raise NotFound(_("No such conversation."))
        return conversation

    def folder_or_404(self, folder_id: int) -> ConversationFolder:
        folder = selectors.folder_get(user=self.request.user, folder_id=folder_id)
        if folder is None:
            raise FolderGone
        return folder

    def message_or_404(self, message_id: int) -> Message:
        message = selectors.message_get(user=self.request.user, message_id=message_id)
        if message is None:
            raise NotFound(_("No such message."))
        return message

    def profile_or_none(self, slug: str | None) -> AgentProfile | None:
        """The profile named by ``slug`` if this user may use it; refuses any other slug."""
        if not slug:
            return None
        profile = selectors.profile_get(user=self.request.user, slug=slug)
        if profile is None:
            raise RequestRefused(
                RefusalCode.PROFILE_NOT_ALLOWED, _("That agent is not available to you.")
            )
        return profile

    def input(self, serializer_class: type, **kwargs: Any) -> dict[str, Any]:
        serializer = serializer_class(data=self.request.data, **kwargs)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


def send_result(result: SendResult) -> Response:
    """A repeated ``client_id`` answers 200 with the original message and run, not 201."""
    return Response(
        {
            "message": api.MessageSerializer(result.message).data,
            "run": api.RunSerializer(result.run).data,
            "created": result.created,
        },
        status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
    )


def _wants_all_branches(request: Request) -> bool:
    return request.query_params.get("branches", "") == "all"


class ConversationPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 200


# ---- conversations ---------------------------------------------------------------------


class ConversationCollectionView(ApiView):
    serializer_class = api.ConversationSerializer
    pagination_class = ConversationPagination

    def get_queryset(self):
        params = self.request.query_params
        q = params.get("q", "")
        if "\x00" in q:
            # PostgreSQL cannot hold a NUL in text: the query would fail with a 500.
            raise RequestRefused(
                RefusalCode.INVALID_FIELD, _("The search text cannot contain a NUL character.")
            )
        return selectors.conversation_list(
            user=self.request.user,
            q=q,
            archived=params.get("archived", "").lower() in ("1", "true", "yes"),
        )

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        context = {"q": request.query_params.get("q", "")}
        return self.get_paginated_response(
            api.ConversationSerializer(page, many=True, context=context).data
        )

    def post(self, request: Request) -> Response:
        data = self.input(api.ConversationCreateInput)
        profile = self.profile_or_none(data["profile"])
        conversation = conversation_create(
            owner=signed_in_user(request.user), title=data["title"], profile=profile
        )
        return Response(
            api.ConversationSerializer(conversation).data, status=status.HTTP_201_CREATED
        )


class ConversationItemView(ApiView):
    def get(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation_or_404(conversation_id)
        messages = selectors.message_list(
            conversation=conversation, all_branches=_wants_all_branches(request)
        )
        stored = selectors.events_after(conversation=conversation, after_seq=0)
        data = api.ConversationSerializer(conversation).data
        # The active branch (``?branches=all``: every message of the tree, each naming its
        # parent and whether it is on the active branch).
        data["messages"] = api.MessageSerializer(messages, many=True).data
        # The same frames the socket replays, so a client can build the thread either way.
        data["events"] = [event_frame(event) for event in stored]
        return Response(data)

    def patch(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation_or_404(conversation_id)
        data = self.input(api.ConversationUpdateInput)
        if "title" in data:
            conversation = conversation_rename(conversation=conversation, title=data["title"])
        if "archived" in data:
            conversation = conversation_set_archived(
                conversation=conversation, archived=data["archived"]
            )
        if "folder" in data:
            folder = self.folder_or_404(data["folder"]) if data["folder"] is not None else None
            conversation = conversation_move(conversation=conversation, folder=folder)
        return Response(api.ConversationSerializer(conversation).data)

    def delete(self, request: Request, conversation_id: int) -> Response:
        conversation_delete(conversation=self.conversation_or_404(conversation_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationBulkView(ApiView):
    """The sidebar's select mode: archive, bring back or delete several conversations at
    once. All or nothing: one id that is not the user's refuses the request (404)."""

    def post(self, request: Request) -> Response:
        data = self.input(api.ConversationBulkInput)
        owner = signed_in_user(request.user)
        if data["action"] == "delete":
            ids = conversations_delete(owner=owner, conversation_ids=data["ids"])
        else:
            ids = conversations_set_archived(
                owner=owner, conversation_ids=data["ids"], archived=data["action"] == "archive"
            )
        return Response({"action": data["action"], "ids": ids})


# ---- folders ---------------------------------------------------------------------------


class FolderCollectionView(ApiView):
    serializer_class = api.FolderSerializer

    def get(self, request: Request) -> Response:
        folders = selectors.folder_list(user=request.user)
        return Response({"results": api.FolderSerializer(folders, many=True).data})

    def post(self, request: Request) -> Response:
        data = self.input(api.FolderInput)
        folder = folder_create(owner=signed_in_user(request.user), name=data["name"])
        return Response(api.FolderSerializer(folder).data, status=status.HTTP_201_CREATED)


class FolderItemView(ApiView):
    def patch(self, request: Request, folder_id: int) -> Response:
        folder = self.folder_or_404(folder_id)
        data = self.input(api.FolderInput)
        return Response(api.FolderSerializer(folder_rename(folder=folder, name=data["name"])).data)

    def delete(self, request: Request, folder_id: int) -> Response:
        folder_delete(folder=self.folder_or_404(folder_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationPinView(ApiView):
    """POST pins, DELETE unpins; both answer the conversation and are safe to repeat."""

    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = conversation_pin(conversation=self.conversation_or_404(conversation_id))
        return Response(api.ConversationSerializer(conversation).data)

    def delete(self, request: Request, conversation_id: int) -> Response:
        conversation = conversation_unpin(conversation=self.conversation_or_404(conversation_id))
        return Response(api.ConversationSerializer(conversation).data)


class ConversationExportView(ApiView):
    def get(self, request: Request, conversation_id: int):
        conversation = self.conversation_or_404(conversation_id)
        fmt = request.query_params.get("format", "md")
        if fmt not in EXPORT_FORMATS:
            raise ValidationError(
                {
                    "format": [
                        _("Choose one of: %(formats)s.") % {"formats": ", ".join(EXPORT_FORMATS)}
                    ]
                }
            )
        data = export_data(conversation, all_branches=_wants_all_branches(request))
        if fmt == "json":
            response = HttpResponse(export_json(data), content_type="application/json")
        else:
            response = HttpResponse(
                export_markdown(data), content_type="text/markdown; charset=utf-8"
            )
        stem = slugify(str(conversation))[:60] or f"conversation-{conversation.pk}"
        response["Content-Disposition"] = f'attachment; filename="{stem}.{fmt}"'
        return response

    def perform_content_negotiation(self, request, force=False):
        # `?format=` names the export format here, not one of DRF's renderers.
        renderer = self.get_renderers()[0]
        return renderer, renderer.media_type


class ConversationShareView(ApiView):
    """The conversation's read-only link: see it, create it, revoke it (owner only)."""

    def share_data(self, share: ConversationShare | None) -> dict[str, Any] | None:
        if share is None:
            return None
        return api.ShareSerializer(share, context={"request": self.request}).data

    def get(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation_or_404(conversation_id)
        return Response(
            {"share": self.share_data(selectors.share_open_get(conversation=conversation))}
        )

    def post(self, request: Request, conversation_id: int) -> Response:
        share, created = share_create(conversation=self.conversation_or_404(conversation_id))
        return Response(
            {"share": self.share_data(share)},
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    def delete(self, request: Request, conversation_id: int) -> Response:
        share_revoke(conversation=self.conversation_or_404(conversation_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


# ---- turns -----------------------------------------------------------------------------


class ConversationMessagesView(ApiView):
    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation_or_404(conversation_id)
        data = self.input(api.MessageSendInput)
        result = message_send(
            conversation=conversation,
            user=signed_in_user(request.user),
            content=data["content"],
            client_id=data["client_id"],
            profile=self.profile_or_none(data["profile"]),
            parent_id=data["parent_id"],
        )
        return send_result(result)


class ConversationBranchView(ApiView):
    """Switch the conversation to the branch through one message (the ‹ 2 / 3 › switcher)."""

    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation_or_404(conversation_id)
        data = self.input(api.BranchSwitchInput)
        switched = branch_switch(
            conversation=conversation,
            user=signed_in_user(request.user),
            message_id=data["message_id"],
        )
        summary = summary_in_use(conversation=conversation)
        return Response(
            {
                "active_leaf_id": switched.leaf_id,
                "branch": switched.branch,
                "summary": (
                    {"through_message_id": summary.covers_through_id, "text": summary.text}
                    if summary
                    else None
                ),
            }
        )


class ConversationRegenerateView(ApiView):
    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation_or_404(conversation_id)
        run = run_regenerate(conversation=conversation, user=signed_in_user(request.user))
        return Response({"run": api.RunSerializer(run).data}, status=status.HTTP_201_CREATED)


class ConversationCompactView(ApiView):
    """Summarise now: the ``/compact`` command and the "Summarise now" menu item."""

    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation_or_404(conversation_id)
        # Over the rate limit or the quota, RequestRefused is answered by the API's handler.
        outcome = summary_request(conversation=conversation, user=request.user)
        if outcome == SummaryRequest.NOTHING_TO_FOLD:
            return Response(
                {"queued": False, "message": "Nothing to summarise yet."},
                status=status.HTTP_200_OK,
            )
        if outcome == SummaryRequest.ALREADY_PENDING:
            return Response(
                {"queued": True, "message": "A summary of this conversation is on its way."},
                status=status.HTTP_202_ACCEPTED,
            )
        return Response(
            {"queued": True, "message": "Summarising the conversation so far."},
            status=status.HTTP_202_ACCEPTED,
        )


class MessageContinueView(ApiView):
    """ "Continue" on an answer its owner stopped: a new run that writes the rest of it."""

    def post(self, request: Request, message_id: int) -> Response:
        message = self.message_or_404(message_id)
        run = answer_continue(message=message, user=signed_in_user(request.user))
        return Response({"run": api.RunSerializer(run).data}, status=status.HTTP_201_CREATED)


class MessageEditView(ApiView):
    def post(self, request: Request, message_id: int) -> Response:
        message = self.message_or_404(message_id)
        data = self.input(api.ContentInput)
        result = message_edit_resend(
            message=message,
            user=signed_in_user(request.user),
            content=data["content"],
            client_id=data["client_id"],
        )
        return send_result(result)


class MessageFeedbackView(ApiView):
    """The signed-in user's thumbs up or down on one answer of their own conversation."""

    def get(self, request: Request, message_id: int) -> Response:
        feedback = selectors.feedback_get(
            user=signed_in_user(request.user), message=self.message_or_404(message_id)
        )
        if feedback is None:
            raise NotFound(_("No feedback on this answer yet."))
        return Response(api.FeedbackSerializer(feedback).data)

    def put(self, request: Request, message_id: int) -> Response:
        message = self.message_or_404(message_id)
        data = self.input(api.FeedbackInput)
        feedback = feedback_set(
            message=message,
            user=signed_in_user(request.user),
            rating=data["rating"],
            comment=data["comment"],
        )
        return Response(api.FeedbackSerializer(feedback).data)

    def delete(self, request: Request, message_id: int) -> Response:
        feedback_clear(message=self.message_or_404(message_id), user=signed_in_user(request.user))
        return Response(status=status.HTTP_204_NO_CONTENT)


class RunCancelView(ApiView):
    def post(self, request: Request, run_id: int) -> Response:
        run: AgentRun | None = selectors.run_get(user=request.user, run_id=run_id)
        if run is None:
            raise NotFound(_("No such run."))
        run = run_cancel(run=run, user=signed_in_user(request.user))
        return Response({"run": api.RunSerializer(run).data})


class ApprovalDecideView(ApiView):
    """``{"approve": true|false, "reason": "..."}``: the owner's decision on a paused call."""

    def post(self, request: Request, approval_id: int) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        approval = approval_decide(
            approval_id=approval_id,
            user=signed_in_user(request.user),
            approve=data.get("approve"),
            reason=data.get("reason", ""),
        )
        return Response({"approval": approval_decided_payload(approval)})


class RunContinueView(ApiView):
    def post(self, request: Request, run_id: int) -> Response:
        run: AgentRun | None = selectors.run_get(user=request.user, run_id=run_id)
        if run is None:
            raise NotFound(_("No such run."))
        run = run_continue(run=run, user=signed_in_user(request.user))
        return Response({"run": api.RunSerializer(run).data})


class RunForkView(ApiView):
    """ "Retry from here": a new run starting with the run's steps before the chosen one."""

    def post(self, request: Request, run_id: int) -> Response:
        run: AgentRun | None = selectors.run_get(user=request.user, run_id=run_id)
        if run is None:
            raise NotFound(_("No such run."))
        data = self.input(api.RunForkInput)
        fork = run_fork(run=run, user=signed_in_user(request.user), step_seq=data["step_seq"])
        return Response({"run": api.RunSerializer(fork).data}, status=status.HTTP_201_CREATED)


# ---- profiles --------------------------------------------------------------------------


class ProfileListView(ApiView):
    def get(self, request: Request) -> Response:
        profiles = selectors.profiles_for_user(user=request.user)
        return Response(api.ProfileSerializer(profiles, many=True).data)


# ---- attachments -----------------------------------------------------------------------


class ConversationAttachmentsView(ApiView):
    """The conversation's files: GET lists them with their reading state; POST attaches one
    (multipart, field ``file``). A refused file is a ``{"code", "message"}`` and stores
    nothing (docs/protocol.md, "Attachments")."""

    def get(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation_or_404(conversation_id)
        files = attachment_selectors.attachment_list(conversation=conversation)
        return Response({"attachments": api.AttachmentSerializer(files, many=True).data})

    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation_or_404(conversation_id)
        uploaded = request.FILES.get("file")
        if uploaded is None:
            raise RequestRefused(RefusalCode.EMPTY, _("Choose a file to attach."))
        try:
            # The size is checked before the bytes are read into memory.
            judge_size_only(name=uploaded.name or "", size=uploaded.size)
            attachment = attachment_upload(
                conversation=conversation,
                user=signed_in_user(request.user),
                name=uploaded.name or "",
                data=uploaded.read(),
            )
        except FileRefused as refused:
            raise RequestRefused(refused.code, refused.message) from None
        return Response(api.AttachmentSerializer(attachment).data, status=status.HTTP_201_CREATED)


class AttachmentItemView(ApiView):
    """One of the user's files: its state (a chip polls it while it is read), or DELETE it
    (a chip removed before sending)."""

    def attachment_or_404(self, attachment_id: int):
        attachment = attachment_selectors.attachment_get(
            user=self.request.user, attachment_id=attachment_id
        )
        if attachment is None:
            raise NotFound(_("No such file."))
        return attachment

    def get(self, request: Request, attachment_id: int) -> Response:
        return Response(api.AttachmentSerializer(self.attachment_or_404(attachment_id)).data)

    def delete(self, request: Request, attachment_id: int) -> Response:
        attachment_delete(attachment=self.attachment_or_404(attachment_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
