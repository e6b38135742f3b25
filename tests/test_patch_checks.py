"""The system checks of chatsite/server/patches/: each fails at start-up when the library
attribute its patch replaces or relies on is gone or has changed shape, and none fails with
the libraries requirements.txt pins."""

from __future__ import annotations

import importlib

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from chatsite.server.patches.targets import Target, target_problem


def _ids(messages: list[checks.CheckMessage]) -> set[str]:
    return {message.id for message in messages if message.id}


def _patch_ids() -> set[str]:
    return {i for i in _ids(checks.run_checks()) if i.startswith("chatsite.server.")}


def test_the_installed_libraries_pass_every_patch_check():
    assert _patch_ids() == set()


def test_every_patch_module_has_a_registered_check():
    registered = {check.__name__ for check in checks.registry.registry.registered_checks}
    for library in ("autobahn", "kombu", "channels_redis", "openai", "mcp", "daphne", "channels"):
        assert f"check_{library}_patch" in registered


async def _dispatch_with_another_argument(self, message, extra):
    """Channels' dispatch as a release that changed it might take it."""


def _create_application_without_the_partial(self, protocol, scope):
    """daphne's create_application, building ``send`` another way."""
    return None


def _takes_nothing(self):
    return None


def _plain_function(self):
    return {}


# (check id, module, attribute path, how the library changed: None = gone, else the new value)
CHANGES = [
    ("chatsite.server.E001", "autobahn.websocket.protocol", "pformat", None),
    ("chatsite.server.E001", "autobahn.util", "hltype", lambda obj, colour: ""),
    ("chatsite.server.E002", "kombu.transport.redis", "Channel._create_client", _takes_nothing),
    ("chatsite.server.E002", "kombu.transport.redis", "Channel.pool", None),
    ("chatsite.server.E003", "channels_redis.utils", "_wrap_close", None),
    (
        "chatsite.server.E003",
        "channels_redis.pubsub",
        "RedisPubSubChannelLayer.__init__",
        _takes_nothing,  # no longer sets _layers, _args, _kwargs
    ),
    ("chatsite.server.E004", "openai", "AsyncOpenAI.auth_headers", _plain_function),
    (
        "chatsite.server.E004",
        "openai",
        "AsyncOpenAI._make_status_error_from_response",
        None,
    ),
    ("chatsite.server.E005", "mcp.shared._httpx_utils", "create_mcp_http_client", None),
    (
        "chatsite.server.E006",
        "daphne.server",
        "Server.create_application",
        _create_application_without_the_partial,
    ),
    ("chatsite.server.E006", "twisted.internet.abstract", "FileDescriptor.registerProducer", None),
    (
        "chatsite.server.E007",
        "channels.consumer",
        "AsyncConsumer.dispatch",
        _dispatch_with_another_argument,
    ),
    ("chatsite.server.E007", "channels.consumer", "get_handler_name", None),
]


@pytest.mark.parametrize(
    ("check_id", "module", "attribute", "replacement"),
    CHANGES,
    ids=[f"{c[0]}-{c[2]}" for c in CHANGES],
)
def test_a_changed_target_fails_its_check(monkeypatch, check_id, module, attribute, replacement):
    owner = importlib.import_module(module)
    *path, name = attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    if replacement is None:
        # Gone from the class that defines it (and so from every subclass too).
        for holder in getattr(owner, "__mro__", (owner,)):
            if name in vars(holder):
                monkeypatch.delattr(holder, name)
    else:
        monkeypatch.setattr(owner, name, replacement)

    messages = [m for m in checks.run_checks() if m.id == check_id]

    assert messages, f"{check_id} did not report {module}.{attribute}"
    assert all(message.level == checks.ERROR for message in messages)
    assert attribute.split(".")[-1] in messages[0].msg
    assert "requirements.txt" in messages[0].hint  # what to fix
    assert _patch_ids() == {check_id}  # the other patches are unaffected


def test_manage_py_check_stops_on_a_changed_target(monkeypatch):
    from kombu.transport import redis

    monkeypatch.setattr(redis.Channel, "conn_or_acquire", _takes_nothing)

    with pytest.raises(SystemCheckError, match=r"chatsite\.server\.E002"):
        call_command("check")


def test_a_missing_module_is_a_problem_not_a_crash():
    problem = target_problem(Target("chatsite_no_such_library", "anything"))

    assert problem is not None
    assert "cannot be imported" in problem


def test_a_target_is_checked_for_its_kind_and_its_parameters():
    assert target_problem(Target("json", "dumps")) is None
    assert "is a function now" in (target_problem(Target("json", "loads", kind=property)) or "")
    changed = target_problem(Target("json", "loads", parameters=("text",)))
    assert changed is not None
    assert changed.startswith("json.loads takes (s, ")
