"""Admin input that crashed with a 500 or held a process for seconds (issue 37, N5 and N6):
JSON or YAML nested thousands deep in an OpenAPI import, a tool's config, Test tool's input
and an MCP server's args; an operation whose host does not resolve; a schema that refers to
itself several times per level; YAML aliases that multiply. Each is a clear form error."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agents.models import McpServer, ToolConfig
from agents.tools.openapi import OpenApiDocumentError, operations, read_document
from tests.admin.conftest import page_text

pytestmark = pytest.mark.django_db

DEEP = 5000
DEEP_JSON = '{"a": ' * DEEP + "1" + "}" * DEEP
DEEP_YAML = "openapi: 3.0.3\nx: " + "[" * DEEP + "]" * DEEP  # flow style: not JSON


@pytest.fixture
def admin_client(staff_client):
    staff_client.raise_request_exception = False  # a crash must show as the 500 it is
    return staff_client


def _import_form(document: str, server_url: str = "https://api.example.com") -> dict[str, str]:
    return {"document": document, "server_url": server_url, "timeout_seconds": "5"}


@pytest.mark.parametrize("document", [DEEP_JSON, DEEP_YAML], ids=["json", "yaml"])
def test_a_deeply_nested_document_is_refused_with_a_clear_error(admin_client, document):
    response = admin_client.post(
        reverse("admin:agents_toolconfig_import_openapi"), _import_form(document)
    )

    assert response.status_code == 200
    assert "nested deeper than 100 levels" in page_text(response)


def test_a_deeply_nested_tool_config_is_a_form_error(admin_client):
    response = admin_client.post(
        reverse("admin:agents_toolconfig_add"),
        {
            "name": "deep",
            "kind": "calculator",
            "description": "x",
            "config": DEEP_JSON,
            "timeout_seconds": "5",
        },
    )

    assert response.status_code == 200
    assert "The JSON is nested deeper than 64 levels." in page_text(response)
    assert not ToolConfig.objects.filter(name="deep").exists()


def test_a_deeply_nested_test_input_is_a_form_error(admin_client):
    tool = ToolConfig.objects.create(name="calc", kind="calculator", description="Adds.")

    response = admin_client.post(
        reverse("admin:agents_toolconfig_test", args=[tool.pk]), {"sample_input": DEEP_JSON}
    )

    assert response.status_code == 200
    assert "The JSON is nested deeper than 64 levels." in page_text(response)


def test_deeply_nested_mcp_args_are_a_form_error(admin_client):
    deep_list = "[" * DEEP + "]" * DEEP
    response = admin_client.post(
        reverse("admin:agents_mcpserver_add"),
        {
            "name": "deep",
            "transport": "stdio",
            "url": "",
            "headers": "",
            "command": "/bin/true",
            "args": deep_list,
            "timeout_seconds": "5",
        },
    )

    assert response.status_code == 200
    assert "The JSON is nested deeper than 64 levels." in page_text(response)
    assert not McpServer.objects.exists()


def test_an_operation_whose_host_does_not_resolve_is_refused_at_import(admin_client):
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/x": {"get": {"operationId": "getX", "responses": {"200": {"description": "ok"}}}}
        },
    }
    url = reverse("admin:agents_toolconfig_import_openapi")
    data = {
        **_import_form(json.dumps(document), server_url="http://no-such-host.invalid"),
        "step": "operations",
        "op_0": "on",
        "opname_0": "get_x",
    }

    response = admin_client.post(url, data)

    assert response.status_code == 200
    assert "GET /x is refused: could not resolve the host no-such-host.invalid" in page_text(
        response
    )
    assert not ToolConfig.objects.filter(kind="openapi").exists()


def test_a_schema_that_refers_to_itself_many_times_is_refused_quickly():
    node = {
        "type": "object",
        "properties": {f"p{i}": {"$ref": "#/components/schemas/N"} for i in range(4)},
    }
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "components": {"schemas": {"N": node}},
        "paths": {
            "/x": {
                "post": {
                    "operationId": "postX",
                    "requestBody": {
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/N"}}
                        }
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }

    with pytest.raises(OpenApiDocumentError, match="expand to more than"):
        operations(read_document(json.dumps(document)))


def test_yaml_aliases_that_multiply_are_refused():
    lines = ["openapi: 3.0.3", "a0: &a0 [x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        refs = ", ".join([f"*a{level - 1}"] * 8)
        lines.append(f"a{level}: &a{level} [{refs}]")

    with pytest.raises(OpenApiDocumentError, match="expands to more than"):
        read_document("\n".join(lines))
