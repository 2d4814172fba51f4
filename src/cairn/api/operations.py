"""The API's routes, derived from the catalogue of operations: one router per resource.

For each operation with an HTTP binding (``service/catalog``) this registers a route whose
parameters come from the operation's input model: the fields named in the path as path
parameters, the others as query parameters (GET, DELETE) or one JSON body (POST). The route
resolves the caller from the bearer token, runs the operation and answers with the service's
result, documented by the output model. Hand-written routes (``custom``) are only checked for.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, create_model

from cairn.api.auth import Caller
from cairn.api.routing import BoundedJsonRoute
from cairn.service.catalog import OPERATIONS, Operation, input_model, output_model
from cairn.service.catalog.inputs import Params, Strict


def _path_param(model: type[BaseModel], name: str) -> Any:
    """A path parameter with the field's bounds (FastAPI takes a path parameter one by one)."""
    info = model.model_fields[name]
    bounds: dict[str, Any] = {}
    for meta in info.metadata:
        for attr in ("min_length", "max_length", "ge", "le", "pattern"):
            if getattr(meta, attr, None) is not None:
                bounds[attr] = getattr(meta, attr)
    return Annotated[info.annotation, Path(**bounds)]


def _part(model: type[BaseModel], keep: list[str], base: type[BaseModel], suffix: str) -> type[BaseModel]:
    """The model itself when it has only ``keep``, else a model of those fields (path ones left out)."""
    if list(model.model_fields) == keep:
        return model
    fields: dict[str, Any] = {n: (model.model_fields[n].annotation, model.model_fields[n]) for n in keep}
    return create_model(model.__name__ + suffix, __base__=base, **fields)


def endpoint(op: Operation, run: Callable[[Operation, Any, dict[str, Any]], Any]) -> Callable[..., Any]:
    """The route function of ``op``: its signature is what FastAPI reads to parse the request."""
    assert op.http is not None
    model = input_model(op)
    in_path = list(op.http.path_fields)
    rest = [n for n in model.model_fields if n not in in_path]
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter(n, kw, annotation=_path_param(model, n)) for n in in_path]
    if rest and op.http.method in ("GET", "DELETE"):
        query = _part(model, rest, Params, "Params")
        params.append(inspect.Parameter("query", kw, annotation=Annotated[query, Query()]))
    elif rest:
        params.append(inspect.Parameter("body", kw, annotation=_part(model, rest, Strict, "Body")))
    params.append(inspect.Parameter("p", kw, annotation=Caller))

    def route(**given: Any) -> Any:
        caller = given.pop("p")
        values: dict[str, Any] = {}
        for name, value in given.items():
            values.update(dict(value) if isinstance(value, BaseModel) else {name: value})
        return run(op, caller, values)

    route.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    route.__name__ = op.name
    route.__doc__ = op.doc or None
    return route


def routers(run: Callable[[Operation, Any, dict[str, Any]], Any]) -> list[APIRouter]:
    """One router per resource (the OpenAPI tag), each with the derived routes of its operations."""
    by_tag: dict[str, APIRouter] = {}
    for op in OPERATIONS:
        if op.http is None or op.http.custom:
            continue
        router = by_tag.setdefault(op.http.tag, APIRouter(tags=[op.http.tag], route_class=BoundedJsonRoute))
        router.add_api_route(
            op.http.path,
            endpoint(op, run),
            methods=[op.http.method],
            response_model=output_model(op),
            operation_id=op.http.operation_id,
            name=op.name,
        )
    return list(by_tag.values())
