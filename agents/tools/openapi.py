"""Reading an OpenAPI 3 document into ``openapi`` tool configs, one per operation.

The document (JSON or YAML) is validated with ``openapi-spec-validator``; local ``$ref``s
are resolved with ``jsonschema``'s referencing registry. Each operation's arguments are its
path, query and header parameters plus a JSON request body; its auth comes from the
security scheme it requires (an API key in a header or the query, or an HTTP bearer token),
whose value staff enter once per scheme and which is stored as a write-only secret of each
tool. Pure Python: the admin's import page and ``services/openapi.py`` use it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from chatsite.server.json_limits import JsonTooDeep, loads_bounded

HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head")
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_]+")
_MAX_REF_DEPTH = 32
# Bounds on what an import reads: nesting, YAML aliases, values once aliases are followed,
# and values written while inlining the operations' schemas.
MAX_DOCUMENT_DEPTH = 100
MAX_YAML_ALIASES = 1000
MAX_DOCUMENT_NODES = 500_000
MAX_EXPANDED_VALUES = 200_000


class OpenApiDocumentError(ValueError):
    """The document cannot be read or is not a valid OpenAPI 3 document."""


@dataclass(frozen=True)
class SecurityScheme:
    """An auth scheme the importer can fill in: ``api_key`` (header or query) or ``bearer``."""

    key: str  # the scheme's name in the document
    style: str  # "api_key_header", "api_key_query" or "bearer"
    parameter: str  # the header or query parameter name ("Authorization" for bearer)

    @property
    def secret_name(self) -> str:
        return ("AUTH_" + _NOT_A_NAME.sub("_", self.key).upper())[:64]


@dataclass(frozen=True)
class Operation:
    key: str  # "GET /pets/{petId}"
    tool_name: str
    description: str
    method: str
    path: str
    server_url: str | None  # the operation's own server, if the document names one
    parameters: list[dict[str, Any]]
    body_schema: dict[str, Any]
    body_required: bool
    schemes: list[SecurityScheme] = field(default_factory=list)
    unsupported: str = ""  # why it cannot become a tool, if it cannot


def read_document(text: str) -> dict[str, Any]:
    """The validated document, or ``OpenApiDocumentError`` saying what is wrong.

    A document nested deeper than ``MAX_DOCUMENT_DEPTH``, with more than
    ``MAX_YAML_ALIASES`` YAML aliases, or that expands (aliases followed) to more than
    ``MAX_DOCUMENT_NODES`` values is refused before anything walks it."""
    try:
        document = loads_bounded(text, max_depth=MAX_DOCUMENT_DEPTH)
    except JsonTooDeep as exc:
        raise OpenApiDocumentError(f"the document is {exc}") from None
    except json.JSONDecodeError:
        document = _yaml_document(text)
    if not isinstance(document, dict):
        raise OpenApiDocumentError("the document must be a JSON or YAML object")
    if not str(document.get("openapi", "")).startswith("3."):
        raise OpenApiDocumentError("only OpenAPI 3 documents can be imported (openapi: 3.x)")
    # Imported when a document is read (an import in the admin), not with the module: the
    # validator is a large share of every daphne's and worker's memory otherwise
    # (docs/performance.md#start-up-imports).
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

    try:
        validate(document)
    except OpenAPIValidationError as exc:
        where = "/".join(str(part) for part in exc.path) or "the document"
        raise OpenApiDocumentError(
            f"not a valid OpenAPI document at {where}: {exc.message}"
        ) from None
    return document


def _yaml_document(text: str) -> Any:
    try:
        document = yaml.load(text, Loader=_BoundedYamlLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise OpenApiDocumentError(f"the document is neither JSON nor YAML: {exc}") from None
    except RecursionError:
        raise OpenApiDocumentError(
            f"the document is nested deeper than {MAX_DOCUMENT_DEPTH} levels"
        ) from None
    _check_shape(document)
    return document


class _BoundedYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a document with more than ``MAX_YAML_ALIASES``
    aliases: each one can double what a reader of the document walks."""

    aliases_seen = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases_seen += 1
            if self.aliases_seen > MAX_YAML_ALIASES:
                raise OpenApiDocumentError(
                    f"the document uses more than {MAX_YAML_ALIASES} YAML aliases"
                )
        return super().compose_node(parent, index)


def _check_shape(document: Any) -> None:
    """Refuse a loaded document too deep, or that expands to too many values (a value an
    alias shares counts once per place it appears). Counted once per distinct object, so
    the check itself stays linear in the text."""
    sizes: dict[int, tuple[int, int]] = {}  # id -> (values below and itself, depth)
    entered: set[int] = set()
    pending: list[tuple[Any, bool]] = [(document, False)]
    while pending:
        value, children_done = pending.pop()
        if id(value) in sizes or not isinstance(value, dict | list):
            continue
        children = list(value.values()) if isinstance(value, dict) else value
        containers = [child for child in children if isinstance(child, dict | list)]
        if not children_done:
            if id(value) in entered:  # reached again below itself: an alias of an ancestor
                raise OpenApiDocumentError("the document contains itself (a YAML alias loop)")
            entered.add(id(value))
            pending.append((value, True))
            pending.extend((child, False) for child in containers if id(child) not in sizes)
            continue
        below = [sizes.get(id(child), (1, 0)) for child in containers]
        size = 1 + len(children) - len(containers) + sum(count for count, _ in below)
        depth = 1 + max((level for _, level in below), default=0)
        if depth > MAX_DOCUMENT_DEPTH:
            raise OpenApiDocumentError(
                f"the document is nested deeper than {MAX_DOCUMENT_DEPTH} levels"
            )
        if size > MAX_DOCUMENT_NODES:
            raise OpenApiDocumentError(
                f"the document expands to more than {MAX_DOCUMENT_NODES} values"
            )
        sizes[id(value)] = (size, depth)


class _BoundedResolver:
    """The document's resolver, with a budget of schema values ``_inline`` may write: a
    schema that refers to itself several times per level would otherwise expand
    exponentially before the depth cut."""

    def __init__(self, resolver: Any) -> None:
        self._resolver = resolver
        self.values_left = MAX_EXPANDED_VALUES

    def lookup(self, reference: str) -> Any:
        return self._resolver.lookup(reference)

    def spend(self) -> None:
        self.values_left -= 1
        if self.values_left < 0:
            raise OpenApiDocumentError(
                f"the operations' schemas expand to more than {MAX_EXPANDED_VALUES} values "
                "($ref followed); simplify the schemas that refer to themselves"
            )


def operations(document: dict[str, Any]) -> list[Operation]:
    """Every operation of the document, in document order, with its arguments resolved."""
    # An OpenAPI document names no JSON-schema dialect; its "#/..." pointers are plain JSON
    # pointers, which any dialect resolves the same way.
    resource = Resource.from_contents(document, default_specification=DRAFT202012)
    resolver = _BoundedResolver(Registry().with_resource("", resource).resolver(""))
    schemes = _security_schemes(document, resolver)
    default_security = document.get("security")
    found: list[Operation] = []
    used_names: set[str] = set()
    for path, path_item in (document.get("paths") or {}).items():
        path_item = _resolved(path_item, resolver)
        shared = path_item.get("parameters") or []
        for method in HTTP_METHODS:
            if method not in path_item:
                continue
            operation = _resolved(path_item[method], resolver)
            name = _unique(_tool_name(operation, method, path), used_names)
            used_names.add(name)
            found.append(
                _operation(
                    operation,
                    method=method,
                    path=path,
                    name=name,
                    shared=shared,
                    path_servers=path_item.get("servers"),
                    schemes=schemes,
                    default_security=default_security,
                    resolver=resolver,
                )
            )
    return found


def tool_config(
    operation: Operation, *, server_url: str, allow_hosts: list[str], timeout_seconds: float
) -> dict[str, Any]:
    """The ``openapi`` kind's config for ``operation`` against ``server_url``.

    The operation's own server, when the document names an absolute one, wins over the
    staff-set URL; either way the SSRF guard checks it at import and on every call.
    """
    base = (operation.server_url or server_url).rstrip("/")
    headers: dict[str, str] = {}
    query_secrets: dict[str, str] = {}
    for scheme in operation.schemes:
        if scheme.style == "api_key_header":
            headers[scheme.parameter] = f"{{secret:{scheme.secret_name}}}"
        elif scheme.style == "api_key_query":
            query_secrets[scheme.parameter] = scheme.secret_name
        else:
            headers["Authorization"] = f"Bearer {{secret:{scheme.secret_name}}}"
    return {
        "operation": operation.key,
        "url_template": base + operation.path,
        "method": operation.method.upper(),
        "headers": headers,
        "query_secrets": query_secrets,
        "parameters": operation.parameters,
        "body_schema": operation.body_schema,
        "body_required": operation.body_required,
        "allow_hosts": allow_hosts,
        "timeout_seconds": min(300.0, max(0.1, timeout_seconds)),
    }


# -- helpers --------------------------------------------------------------------------


def _operation(
    operation: dict[str, Any],
    *,
    method: str,
    path: str,
    name: str,
    shared: list[Any],
    path_servers: Any,
    schemes: dict[str, SecurityScheme | str],
    default_security: Any,
    resolver: Any,
) -> Operation:
    unsupported: list[str] = []
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*shared, *(operation.get("parameters") or [])]:
        parameter = _resolved(raw, resolver)
        by_key[(parameter["name"], parameter["in"])] = parameter  # the operation's win
    parameters: list[dict[str, Any]] = []
    for (param_name, location), parameter in by_key.items():
        if location == "cookie":
            unsupported.append(f"cookie parameter {param_name}")
            continue
        if location == "path" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", param_name):
            unsupported.append(f"path parameter name {param_name!r}")
            continue
        entry: dict[str, Any] = {
            "name": param_name,
            "in": location,
            "required": bool(parameter.get("required")) or location == "path",
            "schema": _inline(parameter.get("schema") or {"type": "string"}, resolver),
        }
        if parameter.get("description"):
            entry["description"] = str(parameter["description"])[:1000]
        parameters.append(entry)
    body_schema: dict[str, Any] = {}
    body_required = False
    if "requestBody" in operation:
        body = _resolved(operation["requestBody"], resolver)
        content = body.get("content") or {}
        json_type = next((t for t in content if t.split(";")[0].strip().endswith("json")), None)
        if json_type is None:
            unsupported.append("a request body that is not JSON")
        else:
            body_schema = _inline(content[json_type].get("schema") or {}, resolver) or {
                "type": "object"
            }
            body_required = bool(body.get("required"))
    security = operation.get("security", default_security) or []
    chosen: list[SecurityScheme] = []
    if security:
        # The first alternative whose schemes are all supported.
        for requirement in security:
            candidates = [schemes.get(key, f"unknown scheme {key}") for key in requirement]
            if all(isinstance(scheme, SecurityScheme) for scheme in candidates):
                chosen = [scheme for scheme in candidates if isinstance(scheme, SecurityScheme)]
                break
        else:
            reasons = {str(s) for req in security for s in (schemes.get(k, k) for k in req)}
            unsupported.append("auth " + ", ".join(sorted(r for r in reasons if r)))
    description = operation.get("summary") or operation.get("description") or ""
    if operation.get("summary") and operation.get("description"):
        description = f"{operation['summary']}. {operation['description']}"
    return Operation(
        key=f"{method.upper()} {path}",
        tool_name=name,
        description=(description or f"{method.upper()} {path}")[:2000],
        method=method,
        path=path,
        server_url=_absolute_server(operation.get("servers") or path_servers),
        parameters=parameters,
        body_schema=body_schema,
        body_required=body_required,
        schemes=chosen,
        unsupported="; ".join(unsupported),
    )


def _security_schemes(document: dict[str, Any], resolver: Any) -> dict[str, SecurityScheme | str]:
    """Scheme name -> what the importer does with it, or why it cannot."""
    found: dict[str, SecurityScheme | str] = {}
    raw = ((document.get("components") or {}).get("securitySchemes")) or {}
    for key, value in raw.items():
        scheme = _resolved(value, resolver)
        kind = scheme.get("type")
        if kind == "apiKey" and scheme.get("in") in ("header", "query"):
            style = "api_key_header" if scheme["in"] == "header" else "api_key_query"
            found[key] = SecurityScheme(key=key, style=style, parameter=scheme["name"])
        elif kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer":
            found[key] = SecurityScheme(key=key, style="bearer", parameter="Authorization")
        else:
            found[key] = f"{key} ({kind}) is not supported"
    return found


def _resolved(value: Any, resolver: Any) -> Any:
    for _ in range(_MAX_REF_DEPTH):
        if not (isinstance(value, dict) and "$ref" in value):
            return value
        value = _lookup(value["$ref"], resolver)
    raise OpenApiDocumentError("a $ref chain is too long")


def _inline(schema: Any, resolver: Any, depth: int = 0) -> Any:
    """``schema`` with local ``$ref``s replaced by what they point at (recursion cut short)."""
    if depth > _MAX_REF_DEPTH:
        return {}
    resolver.spend()
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline(_lookup(schema["$ref"], resolver), resolver, depth + 1)
        return {key: _inline(item, resolver, depth + 1) for key, item in schema.items()}
    if isinstance(schema, list):
        return [_inline(item, resolver, depth + 1) for item in schema]
    return schema


def _lookup(reference: str, resolver: Any) -> Any:
    if not reference.startswith("#"):
        raise OpenApiDocumentError(
            f"only references inside the document are supported: {reference}"
        )
    try:
        return resolver.lookup(reference).contents
    except Unresolvable:
        raise OpenApiDocumentError(f"the reference {reference} points nowhere") from None


def _absolute_server(servers: Any) -> str | None:
    if isinstance(servers, list) and servers:
        url = str(servers[0].get("url", ""))
        if url.lower().startswith(("http://", "https://")):
            return url
    return None


def _tool_name(operation: dict[str, Any], method: str, path: str) -> str:
    raw = operation.get("operationId") or f"{method}_{path}"
    name = _NOT_A_NAME.sub("_", str(raw)).strip("_")
    if not name or not name[0].isalpha():
        name = f"op_{name}"
    return name[:64]


def _unique(name: str, used: set[str]) -> str:
    candidate, number = name, 2
    while candidate in used:
        suffix = f"_{number}"
        candidate, number = name[: 64 - len(suffix)] + suffix, number + 1
    return candidate
