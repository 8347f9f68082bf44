"""The OpenAPI 3.1 document, built from the route table and the models' JSON schemas."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .. import api_models as am
from ..requests import Request
from .http import Call, Op, adapter, not_in_body

__all__ = ["openapi_document", "serve_openapi"]


async def serve_openapi(c: Call) -> Any:
    """this document"""
    return openapi_document(c.request.app.state.table)


def openapi_document(table: Sequence[Op]) -> dict[str, Any]:
    """OpenAPI 3.1 from the route table and the models' JSON schemas."""
    from .._version import __version__

    schemas: dict[str, Any] = {}

    def ref(model: type[Any]) -> dict[str, Any]:
        """A result's schema, by pydantic, as the API answers it (``class``, not ``class_``)."""
        schema = adapter(model).json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in schema.pop("$defs", {}).items():
            schemas.setdefault(name, sub)
        schemas.setdefault(model.__name__, schema)
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    def body(request: type[Request], path_names: Sequence[str]) -> dict[str, Any]:
        """A request's schema as a body: without the fields its path names or the API lacks."""
        schema = adapter(request).json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in schema.pop("$defs", {}).items():
            schemas.setdefault(name, sub)
        for name in not_in_body(request, path_names):
            schema["properties"].pop(name, None)
            if name in schema.get("required", ()):
                schema["required"].remove(name)
        schemas.setdefault(request.__name__, schema)
        return {"$ref": f"#/components/schemas/{request.__name__}"}

    error = {"content": {"application/json": {"schema": ref(am.ErrorBody)}}}
    paths: dict[str, Any] = {}
    for a in table:
        path = a.path.replace(":path}", "}")
        op: dict[str, Any] = {"summary": a.summary, "operationId": _op_id(a)}
        names = re.findall(r"{(\w+)}", path)
        params = [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in names
        ]
        params += [
            {"name": name, "in": "query", "required": False, "schema": {"type": kind}}
            for name, kind in a.query
        ]
        if params:
            op["parameters"] = params
        if a.body is not None:
            op["requestBody"] = {
                "required": False,
                "content": {"application/json": {"schema": body(a.body, names)}},
            }
        ok: dict[str, Any] = {"description": "OK"}
        if a.path.endswith("/events"):
            ok["content"] = {"text/event-stream": {"schema": {"type": "string"}}}
        elif a.answer is not None:
            schema = ref(a.answer)
            if a.many:
                schema = {"type": "array", "items": schema}
            ok["content"] = {"application/json": {"schema": schema}}
        op["responses"] = {
            str(a.status): ok,
            "4XX": {"description": "refused, not found or invalid", **error},
            "5XX": {"description": "the operation failed", **error},
        }
        paths.setdefault(path, {})[a.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "backendmgr", "version": __version__},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _op_id(a: Op) -> str:
    words = re.sub(r"[{}:]", "", a.path.removeprefix("/api/")).replace("/", "_").replace(".", "_")
    return f"{a.method.lower()}_{words or 'root'}"
