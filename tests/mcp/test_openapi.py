"""OpenAPI actions: reading a document, importing operations as tools in the admin, calling
them against a local API (checking what it received), and refusing private addresses."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from django.urls import reverse

from agents.models import ToolConfig
from agents.react.tools import ToolInputError
from agents.services.openapi import ImportChoice, ImportRefused, openapi_tools_import
from agents.tools.base import REDACTED, ToolError
from agents.tools.builtin.http_request import RefusedTarget
from agents.tools.openapi import OpenApiDocumentError, operations, read_document
from agents.tools.registry import build_tool
from tests.admin.conftest import page_text
from tests.mcp.conftest import pet_api_document

pytestmark = pytest.mark.django_db

QUERY_KEY = "query-key-5be1c07d93"
HEADER_KEY = "header-key-0a4f7c11e2"
BEARER = "bearer-token-9d82e6f4a1"


def _base(api) -> str:
    return f"http://127.0.0.1:{api.server_address[1]}/v1"


def _import(api, *names, allow=True):
    found = {op.tool_name: op for op in operations(read_document(json.dumps(pet_api_document())))}
    port = api.server_address[1]
    return {
        tool.name: tool
        for tool in openapi_tools_import(
            choices=[ImportChoice(operation=found[name], tool_name=name) for name in names],
            server_url=_base(api),
            allow_hosts=[f"127.0.0.1:{port}"] if allow else [],
            secrets={
                "AUTH_QUERYKEY": QUERY_KEY,
                "AUTH_HEADERKEY": HEADER_KEY,
                "AUTH_BEARER": BEARER,
            },
            timeout_seconds=5,
        )
    }


def test_a_document_reads_into_operations_with_arguments_and_auth():
    found = {
        op.tool_name: op for op in operations(read_document(yaml.safe_dump(pet_api_document())))
    }

    assert set(found) == {"listPets", "createPet", "getPet", "internalStats"}
    assert found["getPet"].key == "GET /pets/{petId}"
    assert [(p["name"], p["in"], p["required"]) for p in found["getPet"].parameters] == [
        ("petId", "path", True),
        ("X-Trace", "header", False),
    ]
    # The $ref is resolved into the body schema the model sees.
    assert found["createPet"].body_schema["required"] == ["name"]
    assert found["createPet"].body_required is True
    assert [s.style for s in found["listPets"].schemes] == ["api_key_query"]
    assert [s.style for s in found["getPet"].schemes] == ["api_key_header"]
    assert [s.style for s in found["createPet"].schemes] == ["bearer"]
    assert found["internalStats"].server_url == "http://10.1.2.3/admin"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json: [", "neither JSON nor YAML"),
        ('{"swagger": "2.0", "info": {}, "paths": {}}', "only OpenAPI 3 documents"),
        ('{"openapi": "3.0.3", "paths": {}}', "not a valid OpenAPI document"),
        ("[1, 2]", "must be a JSON or YAML object"),
    ],
)
def test_a_bad_document_gets_a_clear_error(text, message):
    with pytest.raises(OpenApiDocumentError, match=message):
        read_document(text)


def test_imported_tools_call_the_api_with_both_auth_styles(pet_api):
    tools = _import(pet_api, "listPets", "getPet", "createPet")

    listed = build_tool(tools["listPets"], user=None)
    output = listed.run(**listed.coerce_input({"limit": 5}))
    assert '"pets": ["Rex"]' in output
    got = build_tool(tools["getPet"], user=None)
    assert '"id": "42"' in got.run(**got.coerce_input({"petId": "42", "X-Trace": "t-1"}))
    made = build_tool(tools["createPet"], user=None)
    made.run(**made.coerce_input({"body": {"name": "Tom", "kind": "cat"}}))

    first, second, third = pet_api.received
    assert (first["method"], first["path"]) == ("GET", "/v1/pets")
    assert first["query"] == {"limit": "5", "api_key": QUERY_KEY}
    assert (second["path"], second["headers"]["x-api-key"]) == ("/v1/pets/42", HEADER_KEY)
    assert second["headers"]["x-trace"] == "t-1"
    assert "api_key" not in second["query"]
    assert third["method"] == "POST"
    assert third["headers"]["authorization"] == f"Bearer {BEARER}"
    assert third["body"] == {"name": "Tom", "kind": "cat"}
    # Secrets are stored write-only, per tool, and only those the operation uses.
    assert tools["listPets"].get_secrets() == {"AUTH_QUERYKEY": QUERY_KEY}
    assert QUERY_KEY not in json.dumps(tools["listPets"].config)


def test_the_model_sees_the_arguments_and_bad_ones_are_refused(pet_api):
    tools = _import(pet_api, "getPet", "createPet")
    made = build_tool(tools["createPet"], user=None)

    schema = made.openai_schema()["function"]["parameters"]
    assert schema["required"] == ["body"]
    assert schema["properties"]["body"]["properties"]["name"] == {"type": "string"}
    with pytest.raises(ToolInputError, match="'name' is a required property"):
        made.coerce_input({"body": {"kind": "cat"}})
    got = build_tool(tools["getPet"], user=None)
    with pytest.raises(ToolInputError, match=r"cannot be '\.' or '\.\.'"):
        got.run(petId="..")
    assert pet_api.received == []


def test_a_path_argument_stays_one_segment(pet_api):
    got = build_tool(_import(pet_api, "getPet")["getPet"], user=None)

    got.run(petId="7/../../admin")

    assert pet_api.received[0]["path"] == "/v1/pets/7%2F..%2F..%2Fadmin"


def test_a_key_the_api_echoes_back_is_redacted(pet_api):
    listed = build_tool(_import(pet_api, "listPets")["listPets"], user=None)
    listed.config["url_template"] = listed.config["url_template"].replace("/pets", "/nowhere")

    with pytest.raises(ToolError) as raised:
        listed.run(limit=1)

    assert pet_api.received[0]["query"]["api_key"] == QUERY_KEY  # it was sent…
    message = str(raised.value)
    assert "HTTP 404" in message
    assert f"api_key={REDACTED}" in message  # …and is blanked where the API quoted it
    assert QUERY_KEY not in message


def test_an_operation_pointing_at_a_private_address_is_refused(pet_api):
    with pytest.raises(ImportRefused, match=r"GET /internal/stats is refused: .*10\.1\.2\.3"):
        _import(pet_api, "listPets", "internalStats")
    assert not ToolConfig.objects.filter(kind="openapi").exists()  # all or none


def test_a_private_server_url_is_refused_unless_allowed(pet_api):
    with pytest.raises(ImportRefused, match=r"127\.0\.0\.1, a loopback address"):
        _import(pet_api, "listPets", allow=False)
    assert not ToolConfig.objects.filter(kind="openapi").exists()


def test_a_call_is_checked_again_when_the_target_turns_private(pet_api):
    tool = build_tool(_import(pet_api, "listPets")["listPets"], user=None)
    tool.config["allow_hosts"] = []  # as if staff removed the allowance after the import

    with pytest.raises(RefusedTarget):
        tool.run()
    assert pet_api.received == []


def test_the_admin_imports_a_pasted_document_in_two_steps(staff_client, pet_api):
    url = reverse("admin:agents_toolconfig_import_openapi")
    port = pet_api.server_address[1]
    first = {
        "document": json.dumps(pet_api_document()),
        "server_url": _base(pet_api),
        "allow_hosts": f"127.0.0.1:{port}",
        "timeout_seconds": "5",
    }

    page = page_text(staff_client.post(url, first))

    assert 'data-key="GET /pets/{petId}"' in page
    assert "API key in query parameter api_key" in page
    assert "bearer token" in page
    second = {
        **first,
        "step": "operations",
        "op_0": "on",
        "opname_0": "list_pets",
        "op_2": "on",
        "opname_2": "get_pet",
        "opname_1": "createPet",
        "opname_3": "internalStats",
        "secret_AUTH_QUERYKEY": QUERY_KEY,
        "secret_AUTH_HEADERKEY": HEADER_KEY,
        "secret_AUTH_BEARER": "",
    }
    response = staff_client.post(url, second)

    assert response.status_code == 302, page_text(response)
    made = {tool.name: tool for tool in ToolConfig.objects.filter(kind="openapi")}
    assert set(made) == {"list_pets", "get_pet"}
    assert made["get_pet"].get_secrets() == {"AUTH_HEADERKEY": HEADER_KEY}
    listing = page_text(staff_client.get(reverse("admin:agents_toolconfig_changelist")))
    assert "Import OpenAPI" in listing
    assert HEADER_KEY not in listing


def test_the_admin_refuses_a_private_operation_and_keeps_the_form(staff_client, pet_api):
    url = reverse("admin:agents_toolconfig_import_openapi")
    data = {
        "document": json.dumps(pet_api_document()),
        "server_url": _base(pet_api),
        "allow_hosts": f"127.0.0.1:{pet_api.server_address[1]}",
        "timeout_seconds": "5",
        "step": "operations",
        "op_3": "on",
        "opname_3": "stats",
        "opname_0": "a",
        "opname_1": "b",
        "opname_2": "c",
    }

    response = staff_client.post(url, data)

    page = page_text(response)
    assert response.status_code == 200
    assert (
        "GET /internal/stats is refused: 10.1.2.3 resolves to 10.1.2.3, a private address" in page
    )
    assert not ToolConfig.objects.filter(kind="openapi").exists()


def test_the_admin_shows_why_a_document_is_invalid(staff_client):
    response = staff_client.post(
        reverse("admin:agents_toolconfig_import_openapi"),
        {
            "document": '{"openapi": "3.0.3"}',
            "server_url": "https://api.example.com",
            "timeout_seconds": "5",
        },
    )

    assert "not a valid OpenAPI document" in page_text(response)


def test_operations_that_change_something_need_approval_by_default(pet_api):
    made = _import(pet_api, "listPets", "createPet", "getPet")

    assert made["createPet"].needs_approval is True  # POST
    assert made["listPets"].needs_approval is False  # GET
    assert made["getPet"].needs_approval is False


def test_staff_may_switch_the_default_off_or_on_at_import(pet_api):
    found = {op.tool_name: op for op in operations(read_document(json.dumps(pet_api_document())))}

    made = openapi_tools_import(
        choices=[
            ImportChoice(operation=found["createPet"], tool_name="add", needs_approval=False),
            ImportChoice(operation=found["listPets"], tool_name="list", needs_approval=True),
        ],
        server_url=_base(pet_api),
        allow_hosts=[f"127.0.0.1:{pet_api.server_address[1]}"],
        secrets={},
        timeout_seconds=5,
    )

    assert {tool.name: tool.needs_approval for tool in made} == {"add": False, "list": True}


def test_the_admin_form_starts_with_the_method_default_and_keeps_the_choice(staff_client, pet_api):
    url = reverse("admin:agents_toolconfig_import_openapi")
    first = {
        "document": json.dumps(pet_api_document()),
        "server_url": _base(pet_api),
        "allow_hosts": f"127.0.0.1:{pet_api.server_address[1]}",
        "timeout_seconds": "5",
    }

    html = staff_client.post(url, first).content.decode()

    boxes = re.findall(r'<input type="checkbox" name="opapproval_(\d)"[^>]*>', html)
    assert boxes == ["0", "1", "2", "3"]
    ticked = re.findall(r'<input type="checkbox" name="opapproval_(\d)"[^>]*checked[^>]*>', html)
    assert ticked == ["1"]  # POST /pets only; the GETs start unticked
    assert "can change something (POST, PUT, PATCH, DELETE)" in html

    second = {
        **first,
        "step": "operations",
        "op_0": "on",
        "opname_0": "list_pets",
        "opapproval_0": "on",
        "op_1": "on",
        "opname_1": "add_pet",  # its box left unticked: staff switched the default off
        "opname_2": "getPet",
        "opname_3": "internalStats",
    }
    assert staff_client.post(url, second).status_code == 302
    made = dict(ToolConfig.objects.filter(kind="openapi").values_list("name", "needs_approval"))
    assert made == {"list_pets": True, "add_pet": False}
