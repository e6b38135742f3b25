"""``openapi``: one operation of an OpenAPI 3 document, imported in the admin.

Made by the import (``agents/tools/openapi.py``), one tool per chosen operation. The model's
arguments are the operation's parameters plus ``body`` for a JSON request body; they are
checked against the schemas the document gives. The call itself is ``http_request``'s: the
same SSRF guard (the host is resolved once and every address must be public, or named in
``allow_hosts`` / ``allow_networks``), one deadline for the whole call, the response cap and
the redaction of secrets in every encoding. A path argument stays one path segment.

Auth comes from the tool's write-only secrets: ``headers`` may use ``{secret:NAME}`` (an API
key header, ``Authorization: Bearer {secret:NAME}``), ``query_secrets`` put a secret into a
query parameter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from agents.react.tools import JsonDict, ToolInputError
from agents.tools.arguments import checked_arguments
from agents.tools.builtin import http_request
from agents.tools.builtin.http_request import HttpRequestTool

SECRET_NAMES = ("API_KEY", "API_TOKEN")
PARAMETER_LOCATIONS = ("path", "query", "header")
BODY_ARGUMENT = "body"

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **{
            name: spec
            for name, spec in http_request.CONFIG_SCHEMA["properties"].items()
            if name != "body_template"
        },
        "operation": {"type": "string", "maxLength": 300, "default": ""},
        "parameters": {
            "type": "array",
            "maxItems": 100,
            "default": [],
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 100},
                    "in": {"type": "string", "enum": list(PARAMETER_LOCATIONS)},
                    "required": {"type": "boolean"},
                    "description": {"type": "string"},
                    "schema": {"type": "object"},
                },
                "required": ["name", "in"],
                "additionalProperties": False,
            },
        },
        "body_schema": {"type": "object", "default": {}},
        "body_required": {"type": "boolean", "default": False},
        "query_secrets": {
            "type": "object",
            "additionalProperties": {"type": "string", "maxLength": 64},
            "maxProperties": 10,
            "default": {},
        },
    },
    "required": ["url_template"],
    "additionalProperties": False,
}


class OpenApiOperation(HttpRequestTool):
    """Calls one operation of an imported OpenAPI document, with http_request's protections."""

    name = "openapi_operation"
    description = "Calls one operation of a web API."

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> dict[str, str]:
        errors = HttpRequestTool.check_config({**config, "body_template": ""})
        declared = {
            parameter["name"] for parameter in config["parameters"] if parameter["in"] == "path"
        }
        for is_secret, name in http_request._PLACEHOLDER.findall(config["url_template"]):
            if not is_secret and name not in declared:
                errors["url_template"] = f"{{{name}}} is not a declared path parameter"
        names = [parameter["name"] for parameter in config["parameters"]]
        if BODY_ARGUMENT in names and config["body_schema"]:
            errors["parameters"] = f"a parameter may not be called {BODY_ARGUMENT!r}"
        if len(set(names)) != len(names):
            errors["parameters"] = "two parameters have the same name"
        return errors

    # -- the arguments come from the operation ------------------------------------------
    def argument_names(self) -> list[str]:
        names = [parameter["name"] for parameter in self.config["parameters"]]
        return [*names, BODY_ARGUMENT] if self.config["body_schema"] else names

    def args_schema(self) -> JsonDict:  # type: ignore[override]
        properties: dict[str, Any] = {}
        required: list[str] = []
        for parameter in self.config["parameters"]:
            schema = dict(parameter.get("schema") or {"type": "string"})
            if parameter.get("description"):
                schema.setdefault("description", parameter["description"])
            properties[parameter["name"]] = schema
            if parameter.get("required") or parameter["in"] == "path":
                required.append(parameter["name"])
        if self.config["body_schema"]:
            properties[BODY_ARGUMENT] = self.config["body_schema"]
            if self.config["body_required"]:
                required.append(BODY_ARGUMENT)
        return {"type": "object", "properties": properties, "required": required}

    def coerce_input(self, tool_input: str | JsonDict) -> JsonDict:
        return checked_arguments(self.name, tool_input, self.args_schema())

    def run(self, **arguments: Any) -> str:
        parameters = {parameter["name"]: parameter for parameter in self.config["parameters"]}
        unknown = set(arguments) - set(parameters) - {BODY_ARGUMENT}
        if unknown:
            raise ToolInputError(f"{self.name} has no argument(s) {sorted(unknown)}")
        missing = [
            name
            for name, parameter in parameters.items()
            if parameter["in"] == "path" and name not in arguments
        ]
        if missing:
            raise ToolInputError(f"{self.name} is missing argument(s) {missing}")
        url = http_request._fill(
            self.config["url_template"],
            lambda name: quote(_as_text(arguments[name]), safe=""),
            lambda name: quote(self.secret(name), safe=""),
        )
        http_request._refuse_dot_segments(url)
        query = [
            (name, _as_text(arguments[name]))
            for name, parameter in parameters.items()
            if parameter["in"] == "query" and name in arguments
        ]
        query += [
            (name, self.secret(secret)) for name, secret in self.config["query_secrets"].items()
        ]
        if query:
            url += ("&" if urlsplit(url).query else "?") + urlencode(query)
        headers = {name: self.fill_secrets(value) for name, value in self.config["headers"].items()}
        for name, parameter in parameters.items():
            if parameter["in"] == "header" and name in arguments:
                headers[name] = _as_text(arguments[name])
        body = None
        if BODY_ARGUMENT in arguments and self.config["body_schema"]:
            body = json.dumps(arguments[BODY_ARGUMENT], ensure_ascii=False).encode()
            headers.setdefault("Content-Type", "application/json")
        return self._fetch(self.config["method"], url, headers, body)


def _as_text(value: Any) -> str:
    """A parameter value as it goes into a URL or header: JSON for lists and objects."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)
