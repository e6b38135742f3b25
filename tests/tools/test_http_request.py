"""http_request: refused SSRF targets, an allow-listed loopback server, caps and secrets."""

from __future__ import annotations

import base64
import json
import threading

import pytest

from agents.react.tools import CallInterrupt, ToolInputError, run_interruptibly
from agents.tools.base import REDACTED, ToolError
from agents.tools.builtin.http_request import CONFIG_SCHEMA, HttpRequestTool, RefusedTarget
from agents.tools.registry import validate_tool_config
from agents.tools.schema import with_defaults
from tests.silent_server import SilentServer

TOKEN = "tok-9f8e7d6c5b4a"


def _tool(secrets: dict[str, str] | None = None, **config) -> HttpRequestTool:
    errors = validate_tool_config("http_request", config)
    assert errors == {}
    return HttpRequestTool(
        name="api", config=with_defaults(CONFIG_SCHEMA, config), secrets=secrets or {}
    )


def _base(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


# -- refused targets ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.1/",
        "http://localhost/",
        "http://LOCALHOST./",
        "http://[::1]/",
        "http://0.0.0.0/",
        "http://[::]/",
        "http://10.1.2.3/",
        "http://172.16.0.1/",
        "http://172.31.255.254/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.1.1/",
        "http://100.100.100.200/",
        "http://[fd00:ec2::254]/",
        "http://[fe80::1]/",
        "http://224.0.0.1/",
        "http://240.0.0.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:169.254.169.254]/",
        "http://[::ffff:10.0.0.1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[2002:7f00:1::]/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0x7f.0x0.0x0.0x1/",
        "http://017700000001/",
        "https://metadata.google.internal/computeMetadata/v1/",
        "http://metadata/",
        "http://instance-data/latest/",
    ],
)
def test_refuses_internal_targets(url):
    with pytest.raises(RefusedTarget) as refused:
        _tool(url_template=url).run()
    message = str(refused.value)
    assert "metadata" in message or "allow_hosts or allow_networks" in message


def test_octal_dotted_ip_is_refused_as_an_invalid_url():
    errors = validate_tool_config("http_request", {"url_template": "http://0177.0.0.1/"})
    assert errors["url_template"].startswith("is not a valid URL")
    tool = HttpRequestTool(
        config=with_defaults(CONFIG_SCHEMA, {"url_template": "http://{host}/"}),
    )
    with pytest.raises(ToolInputError, match="the URL is not valid"):
        tool.run(host="0177.0.0.1")


def test_refusal_names_the_reason():
    with pytest.raises(RefusedTarget, match=r"127\.0\.0\.1, a loopback address"):
        _tool(url_template="http://2130706433/").run()
    with pytest.raises(RefusedTarget, match="metadata"):
        _tool(url_template="http://169.254.169.254/").run()
    with pytest.raises(RefusedTarget, match="embedded in IPv6"):
        _tool(url_template="http://[::ffff:192.168.0.1]/").run()


def test_a_placeholder_cannot_move_the_request_to_another_host(server):
    tool = _tool(url_template=_base(server) + "/hello?name={name}", allow_networks=["127.0.0.0/8"])
    output = tool.run(name="x@169.254.169.254/#")
    assert output == "HTTP 200 OK\n\nhello x@169.254.169.254/#"
    assert server.received[0]["path"] == "/hello?name=x%40169.254.169.254%2F%23"


def test_metadata_address_stays_refused_even_inside_an_allowed_network():
    tool = _tool(url_template="http://169.254.169.254/", allow_networks=["169.254.0.0/16"])
    with pytest.raises(RefusedTarget, match="metadata"):
        tool.run()


# -- an allow-listed loopback server ----------------------------------------------------


def test_allow_networks_lets_a_loopback_server_through(server):
    tool = _tool(url_template=_base(server) + "/hello?name={name}", allow_networks=["127.0.0.0/8"])
    assert tool.args_schema()["required"] == ["name"]
    assert tool.run(**tool.coerce_input("Ada Lovelace")) == "HTTP 200 OK\n\nhello Ada Lovelace"


def test_allow_hosts_by_name_connects_to_the_checked_address(server):
    port = server.server_address[1]
    tool = _tool(url_template=f"http://localhost:{port}/echo", allow_hosts=["localhost"])
    output = tool.run()
    # The connection went to the address that was checked; the Host header keeps the name.
    assert json.loads(output.split("\n\n", 1)[1])["headers"]["Host"] == f"localhost:{port}"


def test_tool_without_placeholders_ignores_the_input(server):
    tool = _tool(url_template=_base(server) + "/hello", allow_hosts=["127.0.0.1"])
    assert tool.coerce_input("anything at all") == {}
    assert tool.run() == "HTTP 200 OK\n\nhello"


def test_post_with_a_json_body_template(server):
    tool = _tool(
        url_template=_base(server) + "/echo",
        method="POST",
        body_template='{"city": {city}, "units": "metric"}',
        allow_networks=["127.0.0.1/32"],
    )
    output = tool.run(city='Paris "centre"')
    echoed = json.loads(output.split("\n\n", 1)[1])
    assert json.loads(echoed["body"]) == {"city": 'Paris "centre"', "units": "metric"}
    assert echoed["headers"]["Content-Type"] == "application/json"


def test_http_error_status_is_an_error_with_the_body(server):
    tool = _tool(url_template=_base(server) + "/missing", allow_networks=["127.0.0.0/8"])
    with pytest.raises(ToolError, match="HTTP 404 Not Found: no such page"):
        tool.run()


def test_binary_responses_are_described_not_dumped(server):
    tool = _tool(url_template=_base(server) + "/image", allow_networks=["127.0.0.0/8"])
    assert tool.run() == "HTTP 200 OK\n\n[image/png response of 6 bytes, not shown]"


def test_response_is_cut_at_the_cap(server):
    tool = _tool(
        url_template=_base(server) + "/big",
        allow_networks=["127.0.0.0/8"],
        max_response_bytes=1000,
    )
    output = tool.run()
    assert output.endswith("\n[response cut at 1000 bytes]")
    assert output.count("x") == 1000


def test_a_slow_server_times_out(server):
    tool = _tool(
        url_template=_base(server) + "/slow", allow_networks=["127.0.0.0/8"], timeout_seconds=0.3
    )
    with pytest.raises(ToolError, match=r"no response from 127\.0\.0\.1 within 0\.3 s"):
        tool.run()


def test_connection_refused_is_a_clear_error():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tool = _tool(url_template=f"http://127.0.0.1:{port}/", allow_networks=["127.0.0.0/8"])
    with pytest.raises(ToolError, match=r"request to 127\.0\.0\.1 failed"):
        tool.run()


# -- redirects --------------------------------------------------------------------------


def test_redirect_within_the_allowed_server_is_followed(server):
    tool = _tool(
        url_template=_base(server) + "/redirect?to=/hello%3Fname%3Dagain",
        allow_networks=["127.0.0.0/8"],
    )
    assert tool.run() == "HTTP 200 OK\n\nhello again"


def test_redirect_to_an_internal_address_is_refused(server):
    tool = _tool(
        url_template=_base(server) + "/redirect?to=http://169.254.169.254/latest/",
        allow_networks=["127.0.0.0/8"],
    )
    with pytest.raises(RefusedTarget, match="metadata"):
        tool.run()
    tool = _tool(
        url_template=_base(server) + "/redirect?to=http://10.0.0.1/",
        allow_networks=["127.0.0.0/8"],
    )
    with pytest.raises(RefusedTarget, match="private"):
        tool.run()


def test_redirect_to_another_scheme_is_refused(server):
    tool = _tool(
        url_template=_base(server) + "/redirect?to=file:///etc/passwd",
        allow_networks=["127.0.0.0/8"],
    )
    with pytest.raises(RefusedTarget, match="file URL"):
        tool.run()


def test_redirect_loops_stop(server):
    tool = _tool(
        url_template=_base(server) + "/redirect?to=/redirect%3Fto%3D/hello",
        allow_networks=["127.0.0.0/8"],
        max_redirects=1,
    )
    with pytest.raises(ToolError, match="more than 1 redirects"):
        tool.run()


# -- secrets ----------------------------------------------------------------------------


def test_secret_goes_into_the_header_and_nowhere_else(server):
    tool = _tool(
        secrets={"API_TOKEN": TOKEN},
        url_template=_base(server) + "/echo",
        headers={"Authorization": "Bearer {secret:API_TOKEN}"},
        allow_networks=["127.0.0.0/8"],
    )
    output = tool.run()
    assert server.received[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in output
    assert f"Bearer {REDACTED}" in output
    assert TOKEN not in tool.description
    assert TOKEN not in repr(tool)
    assert TOKEN not in json.dumps(tool.openai_schema())


def test_secret_is_absent_from_errors(server):
    tool = _tool(
        secrets={"API_TOKEN": TOKEN},
        url_template=_base(server) + "/denied",
        headers={"Authorization": "Bearer {secret:API_TOKEN}"},
        allow_networks=["127.0.0.0/8"],
    )
    with pytest.raises(ToolError) as failed:
        tool.run()
    assert "HTTP 401" in str(failed.value)
    assert TOKEN not in str(failed.value)
    assert failed.value.__cause__ is None
    assert failed.value.__context__ is None


def test_secret_in_the_url_is_absent_from_refusals_and_output(server):
    tool = _tool(
        secrets={"API_TOKEN": TOKEN},
        url_template=_base(server) + "/echo?key={secret:API_TOKEN}",
        allow_networks=["127.0.0.0/8"],
    )
    tool.run()
    assert server.received[0]["path"] == f"/echo?key={TOKEN}"
    refused = _tool(secrets={"API_TOKEN": TOKEN}, url_template="http://10.0.0.1/{secret:API_TOKEN}")
    with pytest.raises(RefusedTarget) as failed:
        refused.run()
    assert TOKEN not in str(failed.value)


def test_secret_headers_are_not_sent_to_another_origin(server):
    port = server.server_address[1]
    tool = _tool(
        secrets={"API_TOKEN": TOKEN},
        url_template=f"http://127.0.0.1:{port}/redirect?to=http://localhost:{port}/echo",
        headers={"Authorization": "Bearer {secret:API_TOKEN}"},
        allow_hosts=["127.0.0.1", "localhost"],
    )
    tool.run()
    first, second = server.received
    assert first["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert "Authorization" not in second["headers"]


def test_missing_secret_is_named():
    tool = _tool(
        url_template="https://api.example.com/",
        headers={"Authorization": "Bearer {secret:API_TOKEN}"},
    )
    with pytest.raises(ToolError, match="the secret API_TOKEN is not set"):
        tool.run()


# -- config validation -------------------------------------------------------------------


def test_config_field_errors():
    assert validate_tool_config("http_request", {}) == {"url_template": "this field is required"}
    assert validate_tool_config("http_request", {"url_template": "file:///etc/passwd"}) == {
        "url_template": "must start with http:// or https://"
    }
    errors = validate_tool_config(
        "http_request",
        {
            "url_template": "https://api.example.com/{q}",
            "method": "FETCH",
        },
    )
    assert set(errors) == {"method"}
    errors = validate_tool_config(
        "http_request",
        {
            "url_template": "https://api.example.com/{q}",
            "headers": {"Bad Header": "x"},
            "allow_networks": ["10.0.0.0/8", "not-a-net"],
            "body_template": "{}",
        },
    )
    assert errors == {
        "headers.Bad Header": "is not a valid header name",
        "allow_networks.1": "'not-a-net' is not an address or CIDR",
        "body_template": "a GET request has no body",
    }
    errors = validate_tool_config(
        "http_request",
        {"url_template": "https://a.example/", "method": "POST", "body_template": '{"q": "{q}"}'},
    )
    assert "write {name} without quotes" in errors["body_template"]


def test_post_redirected_with_302_becomes_a_get_without_body(server):
    tool = _tool(
        url_template=_base(server) + "/redirect?to=/echo",
        method="POST",
        body_template='{"q": {q}}',
        allow_networks=["127.0.0.0/8"],
    )
    output = tool.run(q="tea")
    first, second = server.received
    assert (first["method"], first["body"]) == ("POST", b'{"q": "tea"}')
    assert (second["method"], second["body"]) == ("GET", b"")
    assert "Content-Type" not in json.loads(output.split("\n\n", 1)[1])["headers"]


def _self_signed(tmp_path) -> tuple[str, str]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


def test_https_sends_the_hostname_for_tls_and_verifies_the_certificate(tmp_path):
    """The connection goes to the checked IP, but TLS still names (and verifies) the host."""
    import socket
    import ssl
    import threading

    cert, key = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server_names: list[str | None] = []
    context.sni_callback = lambda sock, server_name, ctx: server_names.append(server_name)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept_one() -> None:
        connection, _ = listener.accept()
        try:
            with context.wrap_socket(connection, server_side=True):
                pass
        except (ssl.SSLError, OSError):
            pass  # the client refuses our self-signed certificate, as it should

    thread = threading.Thread(target=accept_one, daemon=True)
    thread.start()
    try:
        tool = _tool(url_template=f"https://localhost:{port}/", allow_hosts=["localhost"])
        with pytest.raises(
            ToolError, match=r"request to localhost failed.*CERTIFICATE_VERIFY_FAILED"
        ):
            tool.run()
    finally:
        thread.join(timeout=5)
        listener.close()
    assert server_names == ["localhost"]


# -- secrets in the forms the request carried them --------------------------------------

# Characters that percent-, form-, JSON- and HTML-encoding all change.
AWKWARD_SECRET = 'k+y/9=z&w%41"q<t>'


def _leaked_forms(text: str) -> list[str]:
    from urllib.parse import quote, quote_plus

    forms = {
        "literal": AWKWARD_SECRET,
        "url-encoded": quote(AWKWARD_SECRET, safe=""),
        "form-encoded": quote_plus(AWKWARD_SECRET),
        "json-escaped": json.dumps(AWKWARD_SECRET)[1:-1],
        "in base64": base64.b64encode(AWKWARD_SECRET.encode()).decode()[:12],
    }
    return [name for name, form in forms.items() if form in text or form.lower() in text]


def test_a_secret_in_the_url_never_comes_back_in_any_encoding(server):
    tool = _tool(
        secrets={"API_TOKEN": AWKWARD_SECRET},
        url_template=_base(server) + "/reflect?key={secret:API_TOKEN}",
        allow_networks=["127.0.0.0/8"],
    )
    output = tool.run()
    # The server got the real secret, and quoted it back in five encodings.
    from urllib.parse import parse_qs, urlsplit

    assert parse_qs(urlsplit(server.received[0]["path"]).query)["key"] == [AWKWARD_SECRET]
    assert _leaked_forms(output) == []
    assert output.count(REDACTED) >= 6, output


def test_a_secret_in_a_json_body_and_a_header_never_comes_back(server):
    tool = _tool(
        secrets={"API_TOKEN": AWKWARD_SECRET},
        url_template=_base(server) + "/echo",
        method="POST",
        headers={"X-Key": "{secret:API_TOKEN}"},
        body_template='{"key": "{secret:API_TOKEN}"}',
        allow_networks=["127.0.0.0/8"],
    )
    output = tool.run()
    assert json.loads(server.received[0]["body"]) == {"key": AWKWARD_SECRET}
    assert server.received[0]["headers"]["X-Key"] == AWKWARD_SECRET
    # /echo returns body and headers inside JSON: the secret comes back JSON-escaped.
    assert _leaked_forms(output) == []
    assert REDACTED in json.loads(output.split("\n\n", 1)[1])["headers"]["X-Key"]


def test_an_error_that_echoes_the_url_does_not_carry_the_secret(server):
    tool = _tool(
        secrets={"API_TOKEN": AWKWARD_SECRET},
        url_template=_base(server) + "/missing?key={secret:API_TOKEN}",
        allow_networks=["127.0.0.0/8"],
    )
    with pytest.raises(ToolError) as failed:
        tool.run()
    assert str(failed.value).startswith("HTTP 404 Not Found: no such page /missing?key=")
    assert _leaked_forms(str(failed.value)) == []
    assert str(failed.value).endswith(REDACTED)


# -- path arguments stay one segment ------------------------------------------------------


@pytest.mark.parametrize("value", ["..", "."])
def test_a_dot_segment_argument_is_refused_and_nothing_is_sent(server, value):
    tool = _tool(
        url_template=_base(server) + "/users/{id}/profile",
        headers={"Authorization": "Bearer x"},
        allow_networks=["127.0.0.0/8"],
    )
    with pytest.raises(ToolInputError, match=r"a path argument cannot be '\.' or '\.\.'"):
        tool.run(id=value)
    assert server.received == []


@pytest.mark.parametrize(
    ("value", "received"),
    [
        ("42", "/users/42/profile"),
        ("...", "/users/.../profile"),
        ("../admin", "/users/..%2Fadmin/profile"),
        ("a/../../b", "/users/a%2F..%2F..%2Fb/profile"),
        ("%2e%2e", "/users/%252e%252e/profile"),
    ],
)
def test_a_path_argument_reaches_the_server_as_one_segment(server, value, received):
    tool = _tool(url_template=_base(server) + "/users/{id}/profile", allow_networks=["127.0.0.0/8"])
    with pytest.raises(ToolError, match="HTTP 404"):  # the test server has no /users
        tool.run(id=value)
    assert server.received[0]["path"] == received


def test_dots_in_a_query_argument_are_just_text(server):
    tool = _tool(url_template=_base(server) + "/hello?name={name}", allow_networks=["127.0.0.0/8"])
    assert tool.run(name="..") == "HTTP 200 OK\n\nhello .."


# -- one deadline for the whole call ------------------------------------------------------


@pytest.mark.parametrize("path", ["/drip-headers", "/drip-body"])
def test_one_deadline_covers_a_server_that_drips_bytes(server, path):
    tool = _tool(
        url_template=_base(server) + path, allow_networks=["127.0.0.0/8"], timeout_seconds=0.5
    )
    with pytest.raises(ToolError, match=r"no response from 127\.0\.0\.1 within 0\.5 s"):
        tool.run()
    # The request really ended: the server found its client gone before it had finished.
    assert server.drip_abandoned.wait(10)
    assert not server.drip_finished.is_set()


def test_the_deadline_is_never_past_the_timeout_the_engine_waits_for(server):
    """The engine abandons a call after the tool's own timeout; the request ends then too."""
    tool = HttpRequestTool(
        name="api",
        config=with_defaults(
            CONFIG_SCHEMA,
            {"url_template": _base(server) + "/drip-headers", "allow_networks": ["127.0.0.0/8"]},
        ),
        timeout_seconds=0.4,
    )
    assert tool.config["timeout_seconds"] == 10
    with pytest.raises(ToolError, match=r"within 0\.4 s"):
        tool.run()
    assert server.drip_abandoned.wait(10)
    assert not server.drip_finished.is_set()


# -- stopped by the run ------------------------------------------------------------------


def _silent_tool(silent: SilentServer) -> HttpRequestTool:
    return _tool(
        url_template=f"http://127.0.0.1:{silent.port}/slow",
        allow_hosts=["127.0.0.1"],
        timeout_seconds=300,
    )


def _run_in_thread(
    tool: HttpRequestTool, interrupt: CallInterrupt
) -> tuple[threading.Thread, list]:
    outcome: list = []

    def call() -> None:
        try:
            outcome.append(run_interruptibly(interrupt, tool.run))
        except ToolError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, outcome


def test_an_interrupt_closes_the_request_in_progress_at_once():
    """The engine interrupts the call when the run is stopped: the socket is shut down then,
    not at the 300 s deadline."""
    silent = SilentServer()
    interrupt = CallInterrupt()
    try:
        thread, outcome = _run_in_thread(_silent_tool(silent), interrupt)
        assert silent.called.wait(10), "the request never arrived"
        assert not silent.hung_up.is_set()
        interrupt.interrupt()
        assert silent.hung_up.wait(10), "the server still holds the request"
        thread.join(10)
    finally:
        silent.close()
    assert not thread.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], ToolError)
    assert "stopped" in str(outcome[0])


def test_an_interrupt_before_the_request_keeps_it_from_being_sent():
    silent = SilentServer()
    interrupt = CallInterrupt()
    interrupt.interrupt()
    try:
        with pytest.raises(ToolError, match="stopped"):
            run_interruptibly(interrupt, _silent_tool(silent).run)
    finally:
        silent.close()
    assert silent.calls == 0


def test_a_request_that_ended_is_not_disturbed_by_a_later_interrupt(server):
    interrupt = CallInterrupt()
    tool = _tool(url_template=_base(server) + "/hello", allow_networks=["127.0.0.0/8"])
    first = run_interruptibly(interrupt, tool.run)
    interrupt.interrupt()
    assert first.startswith("HTTP 200")


# -- allow_hosts with a port --------------------------------------------------------------


def test_an_allow_hosts_entry_with_a_port_allows_only_that_port(server):
    port = server.server_address[1]
    allowed = _tool(
        url_template=f"http://127.0.0.1:{port}/hello", allow_hosts=[f"127.0.0.1:{port}"]
    )
    assert allowed.run() == "HTTP 200 OK\n\nhello"
    by_name = _tool(
        url_template=f"http://localhost:{port}/hello", allow_hosts=[f"LOCALHOST.:{port}"]
    )
    assert by_name.run() == "HTTP 200 OK\n\nhello"
    other_port = _tool(
        url_template=f"http://127.0.0.1:{port}/hello", allow_hosts=[f"127.0.0.1:{port + 1}"]
    )
    with pytest.raises(RefusedTarget, match="a loopback address"):
        other_port.run()
    default_port = _tool(url_template="http://127.0.0.1/hello", allow_hosts=[f"127.0.0.1:{port}"])
    with pytest.raises(RefusedTarget, match="a loopback address"):
        default_port.run()


def test_a_bare_allow_hosts_entry_still_allows_every_port(server):
    port = server.server_address[1]
    tool = _tool(url_template=f"http://127.0.0.1:{port}/hello", allow_hosts=["127.0.0.1"])
    assert tool.run() == "HTTP 200 OK\n\nhello"


def test_an_ipv6_allow_hosts_entry_takes_brackets_for_a_port():
    from agents.tools.builtin.http_request import _host_entry

    assert _host_entry("[::1]:8080") == ("::1", 8080)
    assert _host_entry("::1") == ("::1", None)
    assert _host_entry("[::1]") == ("::1", None)
    assert _host_entry("Api.Example.com.:443") == ("api.example.com", 443)


def test_allow_hosts_entries_are_checked():
    errors = validate_tool_config(
        "http_request",
        {
            "url_template": "https://api.example.com/",
            "allow_hosts": ["ok.example", "a.example:http", "b.example:70000", "[::1", "c/d:1"],
        },
    )
    assert errors == {
        "allow_hosts.1": "'a.example:http': the port must be a number from 1 to 65535",
        "allow_hosts.2": "'b.example:70000': the port must be a number from 1 to 65535",
        "allow_hosts.3": "'[::1' is not a host, host:port or [IPv6]:port",
        "allow_hosts.4": "'c/d:1' is not a host, host:port or [IPv6]:port",
    }


def test_a_secret_across_the_cap_is_redacted_before_the_cut(server):
    tool = _tool(
        secrets={"KEY": TOKEN},
        url_template=_base(server) + "/hello?name={pad}{secret:KEY}",
        allow_networks=["127.0.0.0/8"],
        # "hello " and the padding take 15 bytes: the cap falls on the token's last character.
        max_response_bytes=15 + len(TOKEN) - 1,
    )

    output = tool.run(pad="p" * 9)

    assert server.received[-1]["path"].endswith(TOKEN)  # it was sent…
    assert TOKEN[:-1] not in output  # …and not shown but for its last character
    assert output.startswith(f"HTTP 200 OK\n\nhello {'p' * 9}[secr")
    assert output.endswith(f"\n[response cut at {15 + len(TOKEN) - 1} bytes]")
