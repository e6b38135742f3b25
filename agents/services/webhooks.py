"""Webhooks: a user's notifications POSTed to a URL of theirs, signed, retried, logged.

The URL is checked when it is saved and again before every attempt by the SSRF guard of the
``http_request`` tool (``checked_target``): it must be https:// and resolve only to public
addresses, unless its host is in ``WEBHOOK_ALLOW_HOSTS`` (which may also use http://). The
connection goes to the address that was checked, so a second DNS answer cannot swap in an
internal one, and redirects are not followed.

Each delivery's body is the notification as JSON; ``X-Chatsite-Timestamp`` is the Unix time
of the attempt and ``X-Chatsite-Signature`` is ``sha256=`` and the hex HMAC-SHA256, under the
webhook's secret, of ``<timestamp>.<body>``: a receiver checks it and refuses old timestamps.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

import httpx2 as httpx
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone
from django.utils.translation import gettext as _

from agents.models import Schedule, Webhook, WebhookDelivery
from agents.protocol import RefusalCode, RequestRefused, notification_payload
from agents.tools.base import ToolError
from agents.tools.builtin.http_request import checked_target

SIGNATURE_HEADER = "X-Chatsite-Signature"
TIMESTAMP_HEADER = "X-Chatsite-Timestamp"
WEBHOOKS_PER_USER = 10


@dataclass(frozen=True)
class NewWebhook:
    webhook: Webhook
    # Shown to the user once, as they create it; stored encrypted.
    secret: str


class DeliveryFailed(Exception):
    """An attempt that may succeed later (the task retries it with backoff)."""


def signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def webhook_url_check(url: str) -> httpx.URL:
    """The URL parsed, or ``RequestRefused`` saying why it may not be used."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise _refused(_("That is not a valid URL.")) from None
    host = (parsed.host or "").rstrip(".").lower()
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    allowed = {entry.lower() for entry in settings.WEBHOOK_ALLOW_HOSTS}
    host_allowed = host in allowed or f"{host}:{port}" in allowed
    if parsed.scheme != "https" and not (parsed.scheme == "http" and host_allowed):
        raise _refused(_("A webhook URL must start with https://."))
    try:
        checked_target(parsed, allow_hosts=settings.WEBHOOK_ALLOW_HOSTS)
    except ToolError as error:  # RefusedTarget included
        raise _refused(_("That URL may not be used: %(why)s.") % {"why": error}) from None
    return parsed


def _refused(message: str) -> RequestRefused:
    return RequestRefused(RefusalCode.WEBHOOK_URL_REFUSED, message)


def webhook_create(*, owner: User, url: str, schedule: Schedule | None = None) -> NewWebhook:
    url = url.strip()
    webhook_url_check(url)
    if schedule is not None and schedule.owner_id != owner.pk:
        raise RequestRefused(RefusalCode.NOT_FOUND, _("No such schedule."))
    if Webhook.objects.filter(owner=owner).count() >= WEBHOOKS_PER_USER:
        raise _refused(_("You have as many webhooks as you may; delete one first."))
    secret = secrets.token_urlsafe(32)
    webhook = Webhook(owner=owner, url=url, schedule=schedule)
    webhook.set_secret(secret)
    webhook.save()
    return NewWebhook(webhook=webhook, secret=secret)


def webhook_delete(*, webhook: Webhook, user: User) -> None:
    if webhook.owner_id != user.pk:
        raise RequestRefused(RefusalCode.NOT_FOUND, _("No such webhook."))
    webhook.delete()


def webhook_deliver(*, delivery_id: int) -> bool:
    """One attempt of a delivery. True once delivered (at once if it was already); False
    for one that can never succeed (gone, or its URL is now refused); raises
    ``DeliveryFailed`` for one worth another attempt."""
    delivery = (
        WebhookDelivery.objects.select_related("webhook", "notification")
        .filter(pk=delivery_id)
        .first()
    )
    if delivery is None:
        return False
    if delivery.status == WebhookDelivery.Status.DELIVERED:
        return True
    body = json.dumps(
        {"notification": notification_payload(delivery.notification)}, separators=(",", ":")
    ).encode()
    timestamp = str(int(time.time()))
    delivery.attempts += 1
    delivery.last_attempt_at = timezone.now()
    try:
        status = _post(
            delivery.webhook.url,
            body,
            {
                "Content-Type": "application/json",
                TIMESTAMP_HEADER: timestamp,
                SIGNATURE_HEADER: signature(delivery.webhook.get_secret(), timestamp, body),
            },
        )
    except RequestRefused as refusal:
        _record(delivery, WebhookDelivery.Status.FAILED, None, refusal.message)
        return False
    except DeliveryFailed as error:
        last = delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS
        status_now = WebhookDelivery.Status.FAILED if last else WebhookDelivery.Status.PENDING
        _record(delivery, status_now, None, str(error))
        if last:
            return False
        raise
    if 200 <= status < 300:
        _record(delivery, WebhookDelivery.Status.DELIVERED, status, "")
        return True
    last = delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS or 400 <= status < 500
    # A 4xx other than a timeout or a rate limit will not change: not retried.
    if status in (408, 429):
        last = delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS
    status_now = WebhookDelivery.Status.FAILED if last else WebhookDelivery.Status.PENDING
    _record(delivery, status_now, status, f"HTTP {status}")
    if last:
        return False
    raise DeliveryFailed(f"HTTP {status}")


def _record(
    delivery: WebhookDelivery, status: str, response_status: int | None, error: str
) -> None:
    delivery.status = status
    delivery.response_status = response_status
    delivery.error = error[:500]
    delivery.save(
        update_fields=["status", "attempts", "last_attempt_at", "response_status", "error"]
    )


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST to the checked address of ``url``; the response's status."""
    parsed = webhook_url_check(url)
    try:
        target = checked_target(parsed, allow_hosts=settings.WEBHOOK_ALLOW_HOSTS)
    except ToolError as error:
        raise DeliveryFailed(str(error)) from None
    pinned = target.url.copy_with(host=target.address)
    extensions = {"sni_hostname": target.url.host} if target.url.scheme == "https" else {}
    host_header = target.url.netloc.decode("ascii").rsplit("@", 1)[-1]
    try:
        with httpx.Client(follow_redirects=False, trust_env=False) as client:
            response = client.post(
                pinned,
                content=body,
                headers={**headers, "Host": host_header, "User-Agent": "chatsite-webhook"},
                timeout=settings.WEBHOOK_TIMEOUT_SECONDS,
                extensions=extensions,
            )
    except httpx.HTTPError as error:
        raise DeliveryFailed(f"{type(error).__name__}: {error}") from None
    return response.status_code
