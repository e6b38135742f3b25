"""``http_request``: calls an admin-defined HTTP endpoint, safely.

The admin writes a URL template such as ``https://api.example.com/weather?city={city}``; each
``{name}`` is an argument the model fills (URL-encoded), each ``{secret:NAME}`` a stored
secret. Requests are SSRF-safe: the host is resolved once, every address it resolves to must
be public (or named by ``allow_hosts`` / ``allow_networks``), and the connection goes to the
address that was checked, so a second DNS answer cannot swap in an internal one. Redirects
are followed only after the same check, responses are cut at ``max_response_bytes``.

One deadline, the shorter of ``timeout_seconds`` and the tool's own timeout, covers the
whole call: connecting, sending, every header and body byte, every redirect. When it
passes, the socket is shut down under the request, so a server that drips bytes cannot hold
the tool's thread after the engine has given up on it. A run that is stopped ends the call
the same way at once: the engine interrupts the call (``current_interrupt()``), which shuts
the socket down (or keeps it from being opened).

An argument in the URL's path stays one segment: it is percent-encoded (``/`` included),
and ``.`` or ``..``, which a client or server would resolve to another path, is refused.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import httpx2 as httpx

from agents.react.tools import JsonDict, ToolInputError, current_interrupt
from agents.tools.base import ConfiguredTool, ToolError

SECRET_NAMES = ("API_TOKEN",)
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
_METHODS_WITH_BODY = {"POST", "PUT", "PATCH", "DELETE"}

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url_template": {"type": "string", "minLength": 1, "maxLength": 2000},
        "method": {"type": "string", "enum": METHODS, "default": "GET"},
        "headers": {
            "type": "object",
            "additionalProperties": {"type": "string", "maxLength": 4000},
            "maxProperties": 50,
            "default": {},
        },
        "body_template": {"type": "string", "maxLength": 20000, "default": ""},
        "allow_hosts": {
            "type": "array",
            "items": {"type": "string", "maxLength": 300},
            "default": [],
            "description": (
                "Hosts that may be internal addresses: 'name' allows every port of the host, "
                "'name:port' (or '[ipv6]:port') only that port."
            ),
        },
        "allow_networks": {"type": "array", "items": {"type": "string"}, "default": []},
        "timeout_seconds": {"type": "number", "minimum": 0.1, "maximum": 300, "default": 10},
        "max_response_bytes": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10_000_000,
            "default": 65536,
        },
        "max_redirects": {"type": "integer", "minimum": 0, "maximum": 10, "default": 3},
    },
    "required": ["url_template"],
    "additionalProperties": False,
}

# Hostnames of cloud metadata services: refused by name even before DNS, since inside a
# cloud they resolve to link-local or private addresses an allow-list might cover.
METADATA_HOSTNAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
        "metadata.platformequinix.com",
    }
)
# Metadata addresses that are not link-local, refused even when an allowed network covers them.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

_PLACEHOLDER = re.compile(r"\{(secret:)?([A-Za-z_][A-Za-z0-9_]*)\}")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript")


class RefusedTarget(ToolError):
    """The URL points somewhere this tool must not reach."""


@dataclass(frozen=True)
class _Target:
    url: httpx.URL  # as written, with the hostname
    address: str  # the checked IP the connection goes to


class HttpRequestTool(ConfiguredTool):
    """Calls an HTTP API the admin defines, with SSRF protection."""

    name = "http_request"
    description = "Calls a web API and returns its response."

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> dict[str, str]:
        errors: dict[str, str] = {}
        template: str = config["url_template"]
        if not template.lower().startswith(("http://", "https://")):
            errors["url_template"] = "must start with http:// or https://"
        else:
            try:
                httpx.URL(_fill(template, lambda name: "x", lambda name: "x"))
            except httpx.InvalidURL as exc:
                errors["url_template"] = f"is not a valid URL: {exc}"
        for name in config["headers"]:
            if not _HEADER_NAME.match(name):
                errors[f"headers.{name}"] = "is not a valid header name"
        if config["body_template"]:
            if config["method"] not in _METHODS_WITH_BODY:
                errors["body_template"] = f"a {config['method']} request has no body"
            else:
                try:
                    json.loads(_fill(config["body_template"], json.dumps, lambda name: "x"))
                except json.JSONDecodeError as exc:
                    errors["body_template"] = (
                        "must be JSON once each {name} is replaced by a JSON string "
                        f"(write {{name}} without quotes): {exc.msg}"
                    )
        for index, entry in enumerate(config["allow_hosts"]):
            try:
                _host_entry(entry)
            except ValueError as exc:
                errors[f"allow_hosts.{index}"] = str(exc)
        for index, network in enumerate(config["allow_networks"]):
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError:
                errors[f"allow_networks.{index}"] = f"{network!r} is not an address or CIDR"
        return errors

    # -- the arguments come from the URL template, not from a fixed signature ----------
    def argument_names(self) -> list[str]:
        templates = (self.config["url_template"], self.config.get("body_template", ""))
        names: list[str] = []
        for template in templates:
            for is_secret, name in _PLACEHOLDER.findall(template):
                if not is_secret and name not in names:
                    names.append(name)
        return names

    def args_schema(self) -> JsonDict:  # type: ignore[override]
        names = self.argument_names()
        return {
            "type": "object",
            "properties": {name: {"type": "string"} for name in names},
            "required": names,
        }

    def coerce_input(self, tool_input: str | JsonDict) -> JsonDict:
        if not self.argument_names():
            return {}  # nothing to fill in: whatever the model wrote is irrelevant
        return super().coerce_input(tool_input)

    def run(self, **arguments: str) -> str:
        expected = self.argument_names()
        missing = [name for name in expected if name not in arguments]
        if missing:
            raise ToolInputError(f"{self.name} is missing argument(s) {missing}")
        url = _fill(
            self.config["url_template"],
            lambda name: quote(str(arguments[name]), safe=""),
            lambda name: quote(self.secret(name), safe=""),
        )
        _refuse_dot_segments(url)
        body = None
        if self.config.get("body_template"):
            body = _fill(
                self.config["body_template"],
                lambda name: json.dumps(str(arguments[name])),
                lambda name: json.dumps(self.secret(name))[1:-1],
            ).encode()
        headers = {name: self.fill_secrets(value) for name, value in self.config["headers"].items()}
        if body is not None:
            headers.setdefault("Content-Type", "application/json")
        return self._fetch(self.config["method"], url, headers, body)

    # -- the exchange ------------------------------------------------------------------
    def _fetch(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> str:
        # The engine abandons the call after its own timeout: end the request by then too.
        timeout = min(float(self.config["timeout_seconds"]), float(self.timeout_seconds))
        deadline = _Deadline(timeout)
        try:
            target = self._checked(httpx.URL(url))
        except httpx.InvalidURL as exc:
            raise ToolInputError(f"the URL is not valid: {exc}") from None
        origin = _origin(target.url)
        if deadline.stopped():
            raise ToolError("the request was stopped before it was sent")
        with httpx.Client(follow_redirects=False, trust_env=False) as client, deadline:
            for _ in range(int(self.config["max_redirects"]) + 1):
                # Admin headers (they may carry secrets) go only to the configured origin.
                sent_headers = dict(headers) if _origin(target.url) == origin else {}
                status, reason, location, text = self._exchange(
                    client, method, target, sent_headers, body, deadline
                )
                if location is None:
                    if status >= 400:
                        raise ToolError(f"HTTP {status} {reason}: {text}".strip())
                    return f"HTTP {status} {reason}\n\n{text}".rstrip()
                next_url = target.url.join(location)
                if next_url.scheme not in ("http", "https"):
                    raise RefusedTarget(f"refused a redirect to a {next_url.scheme} URL")
                target = self._checked(next_url)
                if status in (301, 302, 303) and method not in ("GET", "HEAD"):
                    method, body = "GET", None
                    headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        raise ToolError(f"more than {self.config['max_redirects']} redirects")

    def _exchange(
        self,
        client: httpx.Client,
        method: str,
        target: _Target,
        headers: dict[str, str],
        body: bytes | None,
        deadline: _Deadline,
    ) -> tuple[int, str, str | None, str]:
        """One request to the checked address; (status, reason, redirect location, text)."""
        host_header = target.url.netloc.decode("ascii").rsplit("@", 1)[-1]
        pinned = target.url.copy_with(host=target.address)
        extensions = {"sni_hostname": target.url.host} if target.url.scheme == "https" else {}
        request_headers = {
            # Uncompressed, so the size cap counts what is actually read into memory.
            "Accept-Encoding": "identity",
            "User-Agent": "chatsite-http-tool",
            **headers,
            "Host": host_header,  # the name, while the connection goes to the checked address
        }
        cap = int(self.config["max_response_bytes"])
        timed_out = ToolError(f"no response from {target.url.host} within {deadline.seconds:g} s")
        try:
            with client.stream(
                method,
                pinned,
                headers=request_headers,
                content=body,
                # Each socket operation gets what is left; the deadline's watchdog ends the
                # one in progress when nothing is left.
                timeout=httpx.Timeout(deadline.remaining()),
                extensions={**extensions, "trace": deadline.watch_connection},
            ) as response:
                if response.is_redirect and "location" in response.headers:
                    deadline.check(timed_out)
                    return (
                        response.status_code,
                        response.reason_phrase,
                        response.headers["location"],
                        "",
                    )
                # Read past the cap by the longest form a secret can take, and redact before
                # cutting: a secret across the edge is then blanked whole, not shown but
                # for its last characters.
                limit = cap + self.longest_secret_form()
                received = bytearray()
                truncated = False
                for chunk in response.iter_bytes():
                    received += chunk
                    if len(received) > limit:
                        del received[limit:]
                        truncated = True
                        break
                # A shut-down socket reads as the end of a body that had no length.
                deadline.check(timed_out)
                text = self.redact(_as_text(response, bytes(received)))
                if truncated or len(received) > cap:
                    text = text.encode()[:cap].decode(errors="ignore")
                    text += f"\n[response cut at {cap} bytes]"
                return response.status_code, response.reason_phrase, None, text
        except httpx.TimeoutException:
            deadline.check(timed_out)
            raise timed_out from None
        except httpx.LocalProtocolError:
            # The request itself was malformed; the library's message quotes it, secrets and all.
            raise ToolError(
                f"the request to {target.url.host} could not be sent: a header value or the "
                "URL is not valid HTTP"
            ) from None
        except httpx.HTTPError as exc:
            deadline.check(timed_out)
            raise ToolError(f"request to {target.url.host} failed: {exc}") from None

    def _checked(self, url: httpx.URL) -> _Target:
        return checked_target(
            url,
            allow_hosts=self.config["allow_hosts"],
            allow_networks=self.config["allow_networks"],
        )


def checked_target(
    url: httpx.URL, *, allow_hosts: Sequence[str], allow_networks: Sequence[str] = ()
) -> _Target:
    """The SSRF guard: ``url``'s host resolved once, every address public or allowed.

    Raises ``RefusedTarget`` for a host that must not be reached and ``ToolError`` for one
    that does not resolve. Every client of an admin-set URL goes through it: this tool, the
    OpenAPI operations and their import, MCP servers."""
    if url.scheme not in ("http", "https"):
        raise RefusedTarget("only http:// and https:// URLs are allowed")
    host = url.host.rstrip(".").lower()
    if not host:
        raise RefusedTarget("the URL has no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    allowed_hosts = {_host_entry(entry) for entry in allow_hosts}
    host_allowed = (host, None) in allowed_hosts or (host, port) in allowed_hosts
    if host in METADATA_HOSTNAMES and not host_allowed:
        raise RefusedTarget(f"{host} is a cloud metadata service")
    addresses = _resolve(host, port)
    networks = [ipaddress.ip_network(net, strict=False) for net in allow_networks]
    for address in addresses:
        refusal = _refusal(address)
        if refusal is None:
            continue
        if address in METADATA_ADDRESSES and not host_allowed:
            raise RefusedTarget(f"{host} resolves to {_shown(address)}, a cloud metadata address")
        if host_allowed or any(_within(address, network) for network in networks):
            continue
        article = "an" if refusal[0] in "aeiou" else "a"
        raise RefusedTarget(
            f"{host} resolves to {_shown(address)}, {article} {refusal} address; an "
            "administrator can allow it with allow_hosts or allow_networks"
        )
    return _Target(url=url, address=str(addresses[0]))


class _Deadline:
    """One deadline for a whole call, enforced by shutting the socket down under it.

    A timeout per socket operation restarts with every byte, so a server dripping one
    byte a second never trips it; this watchdog does not care how bytes arrive. The call's
    interrupt (the run was stopped) ends it the same way, at once.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ends_at = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._expired = threading.Event()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._interrupt = current_interrupt()
        self._forget_interrupt: Callable[[], None] = lambda: None

    def __enter__(self) -> _Deadline:
        self._timer.start()
        self._forget_interrupt = self._interrupt.on_interrupt(self._expire)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()
        self._forget_interrupt()

    def stopped(self) -> bool:
        """Whether the run stopped the call (rather than the deadline ending it)."""
        return self._interrupt.interrupted

    def remaining(self) -> float:
        return max(0.001, self._ends_at - time.monotonic())

    def check(self, timed_out: ToolError) -> None:
        if self.stopped():
            raise ToolError("the request was stopped")
        if self._expired.is_set() or time.monotonic() >= self._ends_at:
            raise timed_out

    def watch_connection(self, event: str, info: dict[str, Any]) -> None:
        """httpx's ``trace`` hook: remember the socket of the connection (TLS once wrapped)."""
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            with self._lock:
                self._socket = sock
                expired = self._expired.is_set()
            if expired:
                self._shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self._expired.set()
            sock = self._socket
        self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket | None) -> None:
        # shutdown, unlike close, wakes a recv() blocked in another thread.
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: the request ended by itself
                sock.shutdown(socket.SHUT_RDWR)


def _host_entry(entry: str) -> tuple[str, int | None]:
    """An ``allow_hosts`` entry as (host, port or None for every port)."""
    text = entry.strip().rstrip(".").lower()
    port_text = None
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"{entry!r} is not a host, host:port or [IPv6]:port")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
        host = host.rstrip(".")
    else:
        host = text  # a name, an IPv4 address or a bare IPv6 address
    if not host or any(char in host for char in "/?#@ "):
        raise ValueError(f"{entry!r} is not a host, host:port or [IPv6]:port")
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535")
    return host, int(port_text)


def _refuse_dot_segments(url: str) -> None:
    """Refuse a URL whose path has a ``.`` or ``..`` segment (an argument's, once filled).

    Clients and servers resolve those segments, so ``/users/{id}/profile`` with ``id=..``
    would reach ``/profile``, with the tool's credentials.
    """
    segments = urlsplit(url).path.split("/")
    if any(segment in (".", "..") for segment in segments):
        raise ToolInputError(
            "a path argument cannot be '.' or '..': it would move the request to another path"
        )


def _fill(template: str, argument: Callable[[str], str], secret: Callable[[str], str]) -> str:
    def replace(match: re.Match[str]) -> str:
        return secret(match.group(2)) if match.group(1) else argument(match.group(2))

    return _PLACEHOLDER.sub(replace, template)


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host.lower(), url.port)


def _resolve(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Every address ``host`` resolves to (numeric forms like 0x7f000001 included)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise ToolError(f"could not resolve the host {host}") from None
    addresses = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise ToolError(f"could not resolve the host {host}")
    return addresses


def _refusal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why ``address`` is not a public destination, or None when it is."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.teredo:
            embedded = address.teredo[1]
        if embedded is not None:
            inner = _refusal(embedded)
            return f"{inner} (embedded in IPv6)" if inner else None
    if address in METADATA_ADDRESSES:
        return "cloud metadata"
    for label, flag in (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if flag:
            return label
    if not address.is_global:
        return "non-public"
    return None


def _shown(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return f"::ffff:{address.ipv4_mapped}"
    return str(address)


def _within(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
    network: ipaddress.IPv4Network | ipaddress.IPv6Network,
) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.version == network.version and address in network


def _as_text(response: httpx.Response, body: bytes) -> str:
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type and not content_type.startswith(_TEXT_TYPES) and "+json" not in content_type:
        return f"[{content_type} response of {len(body)} bytes, not shown]"
    return body.decode(response.encoding or "utf-8", errors="replace")
