"""The conversation websocket: `/ws/conversations/<id>/` (frames in docs/protocol.md).

One socket per open conversation. It joins the conversation's group, replays the stored
events the client has not seen, then forwards live ones; client frames become service calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar
from urllib.parse import parse_qs

from channels.auth import get_user
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import translation
from django.utils.translation import gettext as _

from agents import events, live, selectors
from agents.models import AgentRun, Conversation
from agents.permissions import can_watch_evaluation
from agents.preferences import socket_language
from agents.protocol import (
    CLIENT_ID_MAX_CHARS,
    CLOSE_NOT_FOUND,
    CLOSE_NOT_READING,
    CLOSE_SIGNED_OUT,
    CLOSE_TOO_MANY_SOCKETS,
    TERMINAL_FRAME_TYPES,
    FrameType,
    RefusalCode,
    RequestRefused,
    budget_warning_frame,
    error_frame,
    evaluation_progress_frame,
    event_frame,
    max_frame_bytes,
    notifications_unread_frame,
    pong_frame,
)
from agents.ratelimit import rate_limit_hit
from agents.services.approvals import approval_decide, run_continue
from agents.services.conversations import ConversationGone, message_send, run_cancel
from agents.services.notifications import notifications_unread_count
from agents.services.usage import budget_warning
from agents.session_check import SignedOut, session_signs_in, socket_opening
from chatsite.server.sockets import signouts
from chatsite.server.sockets.drain import SCOPE_KEY, SocketDrain

# Events read from the database per page of a replay; the socket drains between pages.
REPLAY_BATCH = 200
LIVE_FRAME_TYPES = frozenset(live.FRAME_TYPES.values())


P = ParamSpec("P")
R = TypeVar("R")

_database_threads: ThreadPoolExecutor | None = None


def _in_database_thread(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Run a consumer's database call in a small pool of threads of its own.

    Channels' ``database_sync_to_async`` runs the calls of every socket in the process on one
    shared thread, so 200 users sending at once were accepted one after another
    (docs/performance.md#socket-database-threads). A socket still awaits its own calls in
    order; different sockets' calls now overlap while each waits on the database. Stale
    connections are closed before and after each call, as Channels does.
    """

    in_thread: Any = None  # made at the first call, once the executor exists

    @functools.wraps(func)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        nonlocal in_thread
        if in_thread is None:
            in_thread = database_sync_to_async(
                func, thread_sensitive=False, executor=_socket_database_threads()
            )
        return await in_thread(*args, **kwargs)

    return call


def _socket_database_threads() -> ThreadPoolExecutor:
    global _database_threads
    if _database_threads is None:
        _database_threads = ThreadPoolExecutor(
            max_workers=settings.CHAT_SOCKET_DATABASE_THREADS,
            thread_name_prefix="chatsite-socket-db",
        )
    return _database_threads


# Open sockets per user in this process. A process-local count bounds what matters here, the
# memory of this daphne, and cannot leak when another process dies.
_open_sockets: dict[int, int] = {}
# The same count for the notification sockets, whose cap is their own.
_open_notification_sockets: dict[int, int] = {}


class _ReplaySlots:
    """At most CHAT_REPLAYS_PER_USER replays of one user at a time in this process.

    A replay reads a page only once the client has taken the page before, so one socket holds
    about a page; a user with many sockets that read nothing would still hold a page in each.
    The slot is kept until the replay's last page has been read, so what one user's replays
    hold here is bounded by the slots, however many sockets they open. A socket waiting for a
    slot holds nothing: it has not read its first page yet.
    """

    def __init__(self) -> None:
        # user id -> (the user's semaphore, how many replays hold or wait for it)
        self._slots: dict[int, tuple[asyncio.Semaphore, int]] = {}

    @contextlib.asynccontextmanager
    async def held(self, user_id: int) -> AsyncIterator[None]:
        semaphore, users = self._slots.get(user_id) or (
            asyncio.Semaphore(settings.CHAT_REPLAYS_PER_USER),
            0,
        )
        self._slots[user_id] = (semaphore, users + 1)
        try:
            async with semaphore:
                yield
        finally:
            semaphore, users = self._slots[user_id]
            if users > 1:
                self._slots[user_id] = (semaphore, users - 1)
            else:
                del self._slots[user_id]  # none left: a new one is made in the next loop

    def waiting(self, user_id: int) -> int:
        """Replays of this user waiting for a slot (for tests and diagnostics)."""
        semaphore, users = self._slots.get(user_id, (None, 0))
        return max(0, users - settings.CHAT_REPLAYS_PER_USER) if semaphore else 0


_replay_slots = _ReplaySlots()


class NotReading(Exception):
    """The client did not read what it was sent; the socket was closed."""


class ConversationConsumer(AsyncJsonWebsocketConsumer):
    conversation_id: int
    group: str
    # The sign-in this socket was opened with (events.sign_in_name): its logout closes it.
    sign_in: str
    # The highest stored seq sent down this socket; stored frames at or below it are dropped.
    last_sent_seq: int
    # Runs whose end this socket has delivered; late live text for them is dropped.
    finished_run_ids: set[int]
    # Whose socket counts in _open_sockets (set once counted).
    counted_user_id: int | None
    drain: SocketDrain | None
    # The language of the refusals this socket sends (agents/preferences.py).
    language: str
    # Set once the socket is opened by someone who may read the conversation; until then (and
    # for a refused socket, which joined its groups before it was decided) nothing is
    # forwarded.
    may_read: bool

    async def connect(self) -> None:
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        self.last_sent_seq = 0
        self.finished_run_ids = set()
        self.counted_user_id = None
        self.drain = None
        self.may_read = False
        self.group = self.sign_in = ""
        # Join first, then read the log (docs/architecture.md, invariant 4): an event
        # committed after the read below is then certain to arrive live, and one committed
        # before it is at or below the last seq it reads. Live frames published meanwhile wait
        # in this channel's queue (a consumer handles one message at a time) and go through
        # chat_event afterwards, which drops the seqs already sent. Joined before accepting,
        # so nothing published once the client sees the socket open can miss it; left again
        # at once if the socket is refused, and nothing is forwarded before it may read.
        session_key = self._session_key()
        self.sign_in = events.sign_in_name(session_key) if session_key else ""
        if self.sign_in:
            await signouts.watch(
                self.channel_layer, sign_in=self.sign_in, channel=self.channel_name
            )
        self.group = events.group_name(self.conversation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # Who opens it, the language of its refusals (the page's), and the conversation's
        # last seq if that user owns it. The owner's own socket takes one statement
        # (session_check.socket_opening); anyone else is decided by Channels' get_user.
        opened: tuple[str, int | None, bool] | None = await self._open_as_owner()
        if opened is None:
            self.scope["user"] = await get_user(self.scope)
            opened = await self._connect_reads()
        self.language, last_seq, run_active = opened
        user = self.scope["user"]
        over_cap = (
            last_seq is not None
            and _open_sockets.get(user.pk, 0) >= settings.CHAT_MAX_SOCKETS_PER_USER
        )
        if last_seq is None or over_cap:
            await self._leave_groups()
        else:
            _open_sockets[user.pk] = _open_sockets.get(user.pk, 0) + 1
            self.counted_user_id = user.pk
            self.drain = self.scope.get(SCOPE_KEY)
            self.may_read = True
        # Accept before closing so the browser sees the code; a close during the handshake
        # arrives as 1006, indistinguishable from a network failure, and would be retried.
        await self.accept()
        if last_seq is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        if over_cap:
            await self.close(code=CLOSE_TOO_MANY_SOCKETS)
            return
        after_seq = _after_seq_param(self.scope, last_seq)
        self.last_sent_seq = after_seq
        with contextlib.suppress(NotReading):  # closed; the client reconnects from its seq
            if after_seq < last_seq:  # read after the join: nothing newer is missed
                await self._replay(after_seq=after_seq)
            # A run queued or started after that read publishes its text to the group,
            # joined before it: without one then, Redis holds nothing this socket lacks.
            if run_active:
                await self._send_live_text()

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        # Channels' own ends with a hop to the thread-sensitive executor to close that
        # thread's stale connections, one hop per closing socket: this consumer never uses
        # that thread (see dispatch), so the hop closed nothing. It joins no ``groups``.
        await self.disconnect(message.get("code", 1005))
        raise StopConsumer

    async def disconnect(self, code: int) -> None:
        if self.counted_user_id is not None:
            left = _open_sockets.pop(self.counted_user_id, 1) - 1
            if left > 0:
                _open_sockets[self.counted_user_id] = left
            self.counted_user_id = None
        self.may_read = False
        await self._leave_groups()

    async def _leave_groups(self) -> None:
        if self.sign_in:
            signouts.forget(sign_in=self.sign_in, channel=self.channel_name)
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        self.group = self.sign_in = ""

    # ---- client → server ---------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        with translation.override(self.language):
            await self._receive(text_data, bytes_data)

    async def _receive(self, text_data: str | None, bytes_data: bytes | None) -> None:
        frame: dict[str, Any] | None = None
        try:
            frame = _parse_frame(text_data, bytes_data)
            await self._handle(frame)
        except RequestRefused as refusal:
            # The one place a refusal becomes a frame; the socket stays open.
            await self.send_json(
                error_frame(
                    refusal.code,
                    refusal.message,
                    client_id=_send_client_id(frame),
                    retry_after=refusal.retry_after,
                )
            )
        except SignedOut:
            await self.chat_signed_out({})
        except NotReading:
            pass  # closed already

    async def _handle(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == FrameType.PING:
            await self.send_json(pong_frame())
        elif kind == FrameType.MESSAGE_SEND:
            await self._send_message(frame)
        elif kind == FrameType.RUN_CANCEL:
            await self._cancel_run(frame)
        elif kind == FrameType.APPROVAL_DECIDE:
            await self._decide_approval(frame)
        elif kind == FrameType.RUN_CONTINUE:
            await self._continue_run(frame)
        elif kind == FrameType.RESUME:
            after_seq = _required_int(frame, "after_seq")
            if not await self._count_resume():
                limit = settings.CHAT_RESUMES_PER_MINUTE
                raise RequestRefused(
                    RefusalCode.RATE_LIMITED,
                    _("At most %(limit)s resumes a minute.") % {"limit": limit},
                )
            last_seq = await self._last_seq_or_close()
            if last_seq is not None:
                # The client asked for these again: resend even what this socket already sent.
                after_seq = min(after_seq, last_seq)
                self.last_sent_seq = max(self.last_sent_seq, after_seq)
                await self._replay(after_seq=after_seq)
        elif isinstance(kind, str):
            raise RequestRefused(
                RefusalCode.UNKNOWN_TYPE, _("Unknown frame type %(type)r.") % {"type": kind}
            )
        else:
            raise RequestRefused(RefusalCode.INVALID_FIELD, _("Every frame needs a string 'type'."))

    async def _send_message(self, frame: dict[str, Any]) -> None:
        client_id = _required_str(frame, "client_id")
        if not _is_client_id(client_id):
            raise RequestRefused(
                RefusalCode.INVALID_FIELD,
                _("'client_id' must be 1 to %(limit)s characters.")
                % {"limit": CLIENT_ID_MAX_CHARS},
            )
        # Empty and over-long content are refused by message_send, one rule for every door.
        content = _required_str(frame, "content")
        profile_slug = frame.get("profile")
        if profile_slug is not None and not isinstance(profile_slug, str):
            raise RequestRefused(RefusalCode.INVALID_FIELD, _("'profile' must be a profile slug."))
        parent_id = frame.get("parent_id")
        if parent_id is not None:
            parent_id = _required_int(frame, "parent_id")
        # No read of the conversation first: the send locks its row anyway, and finds there
        # whether another tab deleted it.
        try:
            await self._message_send(content, client_id, profile_slug or None, parent_id)
        except ConversationGone:
            await self._close_gone()

    async def _cancel_run(self, frame: dict[str, Any]) -> None:
        run_id = _required_int(frame, "run_id")
        if not await self._run_cancel(run_id):
            raise RequestRefused(RefusalCode.NOT_FOUND, _("No such run in this conversation."))

    async def _decide_approval(self, frame: dict[str, Any]) -> None:
        approval_id = _required_int(frame, "approval_id")
        # approval_decide checks the decision's shape, as it does for the API.
        await self._approval_decide(approval_id, frame.get("approve"), frame.get("reason", ""))

    async def _continue_run(self, frame: dict[str, Any]) -> None:
        run_id = _required_int(frame, "run_id")
        if not await self._run_continue(run_id):
            raise RequestRefused(RefusalCode.NOT_FOUND, _("No such run in this conversation."))

    # ---- server → client ---------------------------------------------------------------

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections before every handler, on the one
        # thread-sensitive executor that every socket in the process shares. This consumer
        # reaches the database only through _in_database_thread, whose threads close stale
        # connections before and after each call (database_sync_to_async): Channels' extra
        # hop closed another thread's connections, and queued every socket's connect,
        # frame, live event and disconnect behind that one thread.
        if message.get("type") == events.GROUP_MESSAGE_TYPE:
            await self.chat_event(message)
            return
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def chat_signed_out(self, message: dict[str, Any]) -> None:
        """The sign-in ended (agents/apps.py sends this on logout): nothing more goes through."""
        with translation.override(self.language):
            signed_out = error_frame(RefusalCode.SIGNED_OUT, _("You have signed out."))
        await self.send_json(signed_out)
        await self.close(code=CLOSE_SIGNED_OUT)

    async def chat_event(self, message: dict[str, Any]) -> None:
        """Frames published to the group by agents/events.py, in seq order."""
        if not self.may_read:
            return
        try:
            await self._wait_until_drained()
            for frame in message["frames"]:
                await self._forward(frame)
        except NotReading:
            pass  # closed; the client reconnects with after_seq

    async def _forward(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if seq is None:
            if (
                frame.get("type") in LIVE_FRAME_TYPES
                and frame.get("run_id") in self.finished_run_ids
            ):
                return
            await self.send_json(frame)
            return
        if seq <= self.last_sent_seq:
            return
        if seq > self.last_sent_seq + 1:
            # A gap: the channel layer dropped or delayed a frame. The log has it.
            if await self._last_seq_or_close() is None:
                return
            await self._replay(after_seq=self.last_sent_seq)
            if seq <= self.last_sent_seq:
                return
        await self._send_stored(frame)

    async def _replay(self, *, after_seq: int) -> None:
        """Send every stored event with seq > after_seq, in order, from the database.

        A page at a time, each read only once the client has taken the one before: what
        waits in memory for a slow client is about one page, however long the log, and what
        all of one user's sockets hold is bounded by the user's replay slots (_ReplaySlots).
        """
        cursor = after_seq
        async with _replay_slots.held(self.scope["user"].pk):
            while True:
                await self._wait_until_drained()
                frames = await self._frames_after(cursor)
                for frame in frames:
                    await self._send_stored(frame)
                if len(frames) < REPLAY_BATCH:
                    break
                cursor = frames[-1]["seq"]
            # The slot is free only once the client has the last page, not merely daphne.
            await self._wait_until_drained()

    async def _send_live_text(self) -> None:
        """What the run in progress has written so far (agents/live.py), after the replay.

        Deltas published since the group was joined wait in this channel's queue and follow;
        their offsets let the client drop what this snapshot already holds.
        """
        for frame in await live.live_frames(self.conversation_id):
            run_id = frame["run_id"]
            if run_id not in self.finished_run_ids and await self._run_in_progress(run_id):
                await self.send_json(frame)

    async def _wait_until_drained(self) -> None:
        """Wait for the client to read what was sent; close the socket if it does not."""
        if self.drain is None or self.drain.drained.is_set():
            return
        try:
            async with asyncio.timeout(settings.CHAT_SOCKET_DRAIN_TIMEOUT_SECONDS):
                await self.drain.drained.wait()
        except TimeoutError:
            await self.close(code=CLOSE_NOT_READING)
            raise NotReading from None

    async def _send_stored(self, frame: dict[str, Any]) -> None:
        await self.send_json(frame)
        self.last_sent_seq = max(self.last_sent_seq, frame["seq"])
        if frame.get("type") in TERMINAL_FRAME_TYPES and frame.get("run_id") is not None:
            self.finished_run_ids.add(frame["run_id"])

    async def _last_seq_or_close(self) -> int | None:
        """The conversation's last seq, re-read so a deletion in another tab closes this
        socket (None then)."""
        last_seq = await self._last_seq()
        if last_seq is None:
            await self._close_gone()
        return last_seq

    async def _close_gone(self) -> None:
        await self.send_json(error_frame(RefusalCode.NOT_FOUND, _("This conversation is gone.")))
        await self.close(code=CLOSE_NOT_FOUND)

    def _session_key(self) -> str | None:
        """The key of the session this socket was opened with (None without one)."""
        return getattr(self.scope.get("session"), "session_key", None)

    # ---- database ----------------------------------------------------------------------

    @_in_database_thread
    def _open_as_owner(self) -> tuple[str, int, bool] | None:
        opening = socket_opening(
            session_key=self._session_key(), conversation_id=self.conversation_id
        )
        if opening is None:
            return None
        self.scope["user"] = opening.user
        language = socket_language(self.scope, session=opening.session)
        return language, opening.last_seq, opening.run_active

    @_in_database_thread
    def _connect_reads(self) -> tuple[str, int | None, bool]:
        """The socket's language, the conversation's last seq if this user may open it, and
        True: whether a run is queued or running is left to the live text's own read."""
        language = socket_language(self.scope)
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return language, None, True
        return language, self._read_last_seq(), True

    @_in_database_thread
    def _last_seq(self) -> int | None:
        return self._read_last_seq()

    def _read_last_seq(self) -> int | None:
        return selectors.conversation_last_seq(
            user=self.scope["user"], conversation_id=self.conversation_id
        )

    def _signed_in_user(self) -> User:
        """The socket's user, if its session still signs them in; before every write.

        A logout closes the socket (``chat_signed_out``), but a channel-layer message can be
        lost, and a session also ends by expiring or by a password change.
        """
        user = self.scope["user"]
        if not session_signs_in(session_key=self._session_key(), user_id=user.pk):
            raise SignedOut
        return user

    @_in_database_thread
    def _count_resume(self) -> bool:
        limit = settings.CHAT_RESUMES_PER_MINUTE
        user_id = self.scope["user"].pk
        return rate_limit_hit(action="resume", user_id=user_id, limit=limit).allowed

    @_in_database_thread
    def _frames_after(self, after_seq: int) -> list[dict[str, Any]]:
        stored = selectors.event_rows_after(
            conversation_id=self.conversation_id, after_seq=after_seq, limit=REPLAY_BATCH
        )
        return [event_frame(event) for event in stored]

    @_in_database_thread
    def _run_in_progress(self, run_id: int) -> bool:
        # Text of a run that has ended (failed from outside its worker, or left from an
        # earlier database with the same ids) is not live.
        run = selectors.run_get(user=self.scope["user"], run_id=run_id)
        return (
            run is not None and run.conversation_id == self.conversation_id and not run.is_terminal
        )

    @_in_database_thread
    def _message_send(
        self,
        content: str,
        client_id: str,
        profile_slug: str | None,
        parent_id: int | None,
    ) -> None:
        user = self.scope["user"]
        profile = None
        if profile_slug is not None:
            # The profile is looked up for the user the session signs in, so that first.
            user = self._signed_in_user()
            profile = selectors.profile_get(user=user, slug=profile_slug)
            if profile is None:
                raise RequestRefused(
                    RefusalCode.PROFILE_NOT_ALLOWED, _("That agent is not available to you.")
                )
        message_send(
            # Only its id is read: message_send locks the row, owned by this user, or raises
            # ConversationGone.
            conversation=Conversation(pk=self.conversation_id, owner_id=user.pk),
            user=user,
            content=content,
            client_id=client_id,
            profile=profile,
            parent_id=parent_id,
            # Otherwise asked with the lock, in its statement (SignedOut if no longer; a
            # socket without a session key is signed out).
            signed_in_by=None if profile is not None else (self._session_key() or ""),
        )

    @_in_database_thread
    def _run_cancel(self, run_id: int) -> bool:
        user = self._signed_in_user()
        run: AgentRun | None = selectors.run_get(user=user, run_id=run_id)
        if run is None or run.conversation_id != self.conversation_id:
            return False
        run_cancel(run=run, user=user)
        return True

    @_in_database_thread
    def _approval_decide(self, approval_id: int, approve: object, reason: object) -> None:
        user = self._signed_in_user()
        approval = selectors.approval_get(user=user, approval_id=approval_id)
        if approval is None or approval.run.conversation_id != self.conversation_id:
            raise RequestRefused(RefusalCode.NOT_FOUND, _("No such approval request here."))
        approval_decide(approval_id=approval_id, user=user, approve=approve, reason=reason)

    @_in_database_thread
    def _run_continue(self, run_id: int) -> bool:
        user = self._signed_in_user()
        run: AgentRun | None = selectors.run_get(user=user, run_id=run_id)
        if run is None or run.conversation_id != self.conversation_id:
            return False
        run_continue(run=run, user=user)
        return True


# ---- frame parsing ---------------------------------------------------------------------


def _parse_frame(text_data: str | None, bytes_data: bytes | None) -> dict[str, Any]:
    if text_data is None:
        raise RequestRefused(RefusalCode.INVALID_FRAME, _("Frames are JSON text, not binary."))
    size = len(text_data.encode("utf-8"))
    limit = max_frame_bytes()
    if size > limit:
        raise RequestRefused(
            RefusalCode.FRAME_TOO_LARGE,
            _("The frame is %(size)s bytes; the limit is %(limit)s.")
            % {"size": size, "limit": limit},
        )
    try:
        frame = json.loads(text_data)
    except ValueError as error:
        raise RequestRefused(
            RefusalCode.INVALID_JSON,
            _("The frame is not valid JSON: %(error)s.") % {"error": error},
        ) from error
    except RecursionError as error:
        # Python's parser recurses once per bracket; no frame of the protocol nests deeply.
        raise RequestRefused(
            RefusalCode.INVALID_JSON, _("The frame's JSON nests too deeply.")
        ) from error
    if not isinstance(frame, dict):
        raise RequestRefused(
            RefusalCode.INVALID_FRAME, _("A frame is a JSON object with a 'type'.")
        )
    return frame


def _send_client_id(frame: dict[str, Any] | None) -> str | None:
    """The ``client_id`` of a ``message.send`` frame if it is a valid one, else None.

    An error frame names it, so the client can tell which of its sends was refused.
    """
    if frame is None or frame.get("type") != FrameType.MESSAGE_SEND:
        return None
    client_id = frame.get("client_id")
    return client_id if _is_client_id(client_id) else None


def _is_client_id(value: Any) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= CLIENT_ID_MAX_CHARS


def _required_str(frame: dict[str, Any], field: str) -> str:
    value = frame.get(field)
    if not isinstance(value, str):
        raise RequestRefused(
            RefusalCode.INVALID_FIELD, _("'%(field)s' must be a string.") % {"field": field}
        )
    return value


def _required_int(frame: dict[str, Any], field: str) -> int:
    value = frame.get(field)
    # bool is an int in Python, but `true` is not a run id or a seq.
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RequestRefused(
            RefusalCode.INVALID_FIELD,
            _("'%(field)s' must be a non-negative integer.") % {"field": field},
        )
    return value


def _after_seq_param(scope: dict[str, Any], last_seq: int) -> int:
    """`?after_seq=N` from the URL; missing or malformed means "send everything".

    Clamped to the conversation's last seq: a client claiming more than exists (a stale
    number from elsewhere) would otherwise have the next real events dropped as seen.
    """
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after_seq")
    try:
        after_seq = int(values[-1]) if values else 0
    except ValueError:
        after_seq = 0
    return min(max(after_seq, 0), last_seq)


class _GroupFollower(AsyncJsonWebsocketConsumer):
    """A socket that follows one group of the channel layer until its sign-in ends: the
    notifications' and an evaluation's. It joins the group before its opening read, so
    nothing published after the read is missed; it is closed (4401) when the session that
    opened it signs out; the client sends nothing but ``ping``."""

    group: str = ""
    sign_in: str = ""

    async def refuse(self, code: int) -> None:
        # Accepted first, so the browser sees the code; it joined nothing.
        await self.accept()
        await self.close(code=code)

    async def follow(self, group: str) -> None:
        """Watch the sign-in, join ``group`` and accept; the caller then sends its read."""
        session = self.scope.get("session")
        session_key = getattr(session, "session_key", None) or ""
        self.sign_in = events.sign_in_name(session_key) if session_key else ""
        if self.sign_in:
            await signouts.watch(
                self.channel_layer, sign_in=self.sign_in, channel=self.channel_name
            )
        self.group = group
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.sign_in:
            signouts.forget(sign_in=self.sign_in, channel=self.channel_name)
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        self.group = self.sign_in = ""

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == FrameType.PING:
            await self.send_json(pong_frame())

    async def chat_signed_out(self, message: dict[str, Any]) -> None:
        await self.close(code=CLOSE_SIGNED_OUT)


class NotificationConsumer(_GroupFollower):
    """`/ws/notifications/`: the signed-in user's notifications, live (docs/protocol.md,
    "Notifications"). Every page of the user opens one; it sends the unread count as it
    opens, then every ``notification`` and ``notifications.unread`` frame published to the
    user's group (agents/events.py)."""

    user_id: int = 0
    language: str = ""
    # Whose socket counts in _open_notification_sockets (set once counted).
    counted_user_id: int | None = None

    async def connect(self) -> None:
        self.group = self.sign_in = ""
        user = await get_user(self.scope)
        if not user.is_authenticated:
            await self.refuse(CLOSE_SIGNED_OUT)
            return
        if (
            _open_notification_sockets.get(user.pk, 0)
            >= settings.CHAT_MAX_NOTIFICATION_SOCKETS_PER_USER
        ):
            await self.refuse(CLOSE_TOO_MANY_SOCKETS)
            return
        _open_notification_sockets[user.pk] = _open_notification_sockets.get(user.pk, 0) + 1
        self.counted_user_id = user.pk
        self.user_id = user.pk
        self.language = await _in_database_thread(_language_of)(self.scope)
        # Join, then count: a notification written after the count arrives live.
        await self.follow(events.notifications_group_name(user.pk))
        unread = await _in_database_thread(_unread_count)(user.pk)
        await self.send_json(notifications_unread_frame(unread))

    async def disconnect(self, code: int) -> None:
        if self.counted_user_id is not None:
            left = _open_notification_sockets.pop(self.counted_user_id, 1) - 1
            if left > 0:
                _open_notification_sockets[self.counted_user_id] = left
            self.counted_user_id = None
        await super().disconnect(code)

    async def notification_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["frame"])

    async def notification_budget_warning(self, message: dict[str, Any]) -> None:
        """A budget of the user passed its warning share: the notice as this page would
        show it on a reload, in its language (``budget_warning``, agents/services/usage.py)."""
        text = await _in_database_thread(_budget_warning_text)(self.user_id, self.language)
        await self.send_json(budget_warning_frame(text))


def _unread_count(user_id: int) -> int:
    return notifications_unread_count(user_id=user_id)


class EvaluationConsumer(_GroupFollower):
    """`/ws/evaluations/<id>/`: an evaluation's progress, live, for staff allowed to view
    evaluations (docs/protocol.md, "Evaluation progress"). Checked as it opens: not signed
    in, 4401; not such staff, or no such evaluation, 4404. It joins the evaluation's group,
    then sends where the evaluation stands with every result, then each
    ``evaluation.progress`` published as a case starts or is checked (agents/events.py,
    after commit)."""

    async def connect(self) -> None:
        self.group = self.sign_in = ""
        user = await get_user(self.scope)
        eval_run_id = int(self.scope["url_route"]["kwargs"]["eval_run_id"])
        if not user.is_authenticated:
            await self.refuse(CLOSE_SIGNED_OUT)
            return
        if not await _in_database_thread(can_watch_evaluation)(user):
            await self.refuse(CLOSE_NOT_FOUND)
            return
        # Join, then read: a case checked after the read arrives live (and a frame that
        # repeats what the read saw changes nothing on the page).
        await self.follow(events.evaluation_group_name(eval_run_id))
        frame = await _in_database_thread(_evaluation_frame)(eval_run_id)
        if frame is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        await self.send_json(frame)

    async def evaluation_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["frame"])


def _evaluation_frame(eval_run_id: int) -> dict[str, Any] | None:
    progress = selectors.eval_run_progress(eval_run_id=eval_run_id)
    if progress is None:
        return None
    return evaluation_progress_frame(
        progress.eval_run, progress.results, checked=progress.checked, passed=progress.passed
    )


def _language_of(scope: dict[str, Any]) -> str:
    return socket_language(scope)


def _budget_warning_text(user_id: int, language: str) -> str:
    with translation.override(language):
        return budget_warning(user_id=user_id)
