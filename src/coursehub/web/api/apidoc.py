"""The OpenAPI description as a readable page, built on the server (no script, no CDN).

:func:`plan_api_doc` turns ``openapi.yaml`` into what the page
``GET /api/v1/`` shows: for each path and method its summary, parameters,
request body, responses, and every schema with its fields. The document
follows OpenAPI 3.0 (https://spec.openapis.org/oas/v3.0.3): ``paths`` ->
path item -> operation, ``$ref`` to ``#/components/...``. :func:`openapi_text`
reads the document, ``openapi.yaml`` beside this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

#: HTTP methods of a path item, in the order shown (OpenAPI 3.0 "Path Item Object").
METHODS = ("get", "post", "put", "patch", "delete")


@dataclass
class Operation:
    """One method of one path as the page shows it."""

    method: str
    path: str
    operation_id: str
    summary: str
    description: str
    parameters: list[tuple[str, str, str, bool]] = field(default_factory=list)
    request: str = ""
    responses: list[tuple[str, str, str]] = field(default_factory=list)
    public: bool = False


@dataclass
class ApiDoc:
    """The page: title, version, description, operations, schemas (name -> field rows)."""

    title: str
    version: str
    description: str
    operations: list[Operation]
    schemas: dict[str, list[tuple[str, str, bool, str]]]


def openapi_text() -> str:
    """The text of ``openapi.yaml``, shipped in this package (:mod:`coursehub.web.api`)."""
    return resources.files("coursehub.web.api").joinpath("openapi.yaml").read_text("utf-8")


def ref_name(ref: str) -> str:
    """``"#/components/schemas/NewCourse"`` -> ``"NewCourse"`` (pure)."""
    return ref.rsplit("/", 1)[-1]


def resolve(doc: dict[str, Any], node: Any) -> Any:
    """Follow a ``$ref`` to ``#/components/...`` (one level); other nodes pass through."""
    if isinstance(node, dict) and "$ref" in node:
        target: Any = doc
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return target
    return node


def render_type(schema: Any) -> str:
    """A schema as a short type: ``"string"``, ``"array of CourseSummary"``, ``"NewCourse"``."""
    if not isinstance(schema, dict):
        return ""
    if "$ref" in schema:
        return ref_name(schema["$ref"])
    kind = str(schema.get("type", "object"))
    if kind == "array":
        return f"array of {render_type(schema.get('items', {}))}"
    if "enum" in schema:
        return f"{kind}: one of {', '.join(str(v) for v in schema['enum'])}"
    return kind + (f" ({schema['format']})" if "format" in schema else "")


def body_type(doc: dict[str, Any], node: Any) -> str:
    """The JSON (or other) content's schema of a request body or response, as a type."""
    content = resolve(doc, node).get("content", {}) if isinstance(node, dict) else {}
    for media, value in content.items():
        return f"{media}: {render_type(value.get('schema', {}))}"
    return ""


def plan_api_doc(text: str) -> ApiDoc:
    """Return the page of the OpenAPI 3.0 description ``text`` (YAML).

    Raises
    ------
    yaml.YAMLError
        If ``text`` is not YAML (the shipped description always is; a test
        checks it).
    """
    doc: dict[str, Any] = yaml.safe_load(text)
    operations = []
    for path, item in (doc.get("paths") or {}).items():
        shared = item.get("parameters", [])
        for method in METHODS:
            if method not in item:
                continue
            op = item[method]
            parameters = [resolve(doc, p) for p in [*shared, *op.get("parameters", [])]]
            operations.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    operation_id=op.get("operationId", ""),
                    summary=op.get("summary", ""),
                    description=op.get("description", ""),
                    parameters=[
                        (
                            p.get("name", ""),
                            p.get("in", ""),
                            render_type(p.get("schema")),
                            bool(p.get("required")),
                        )
                        for p in parameters
                    ],
                    request=body_type(doc, op.get("requestBody")),
                    responses=[
                        (
                            str(code),
                            resolve(doc, answer).get("description", ""),
                            body_type(doc, answer),
                        )
                        for code, answer in op.get("responses", {}).items()
                    ],
                    public=op.get("security") == [],
                )
            )
    schemas = {}
    for name, schema in (doc.get("components", {}).get("schemas") or {}).items():
        required = set(schema.get("required", []))
        schemas[name] = [
            (prop, render_type(value), prop in required, value.get("description", ""))
            for prop, value in (schema.get("properties") or {}).items()
        ]
    info = doc.get("info", {})
    return ApiDoc(
        info.get("title", ""),
        str(info.get("version", "")),
        info.get("description", ""),
        operations,
        schemas,
    )
