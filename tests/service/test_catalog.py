"""The catalogue of operations is consistent with the facade it declares (no server needed).

Every surface is derived from these declarations, so a declaration that names a missing method,
model or field would break a surface; these checks say which one.
"""

from __future__ import annotations

import inspect

from cairn.service.api import Cairn
from cairn.service.catalog import OPERATIONS, input_model, output_model


def test_every_operation_names_a_facade_method_and_models_that_exist() -> None:
    for op in OPERATIONS:
        method = getattr(Cairn, op.name, None)
        assert callable(method), op.name
        model = input_model(op)
        assert output_model(op) is not None, op.name
        fields = set(model.model_fields)
        assert set(op.args) <= fields, (op.name, op.args)
        params = inspect.signature(method).parameters
        positional = [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD][2:]  # self, principal
        assert len(op.args) <= len(positional), (op.name, op.args, positional)
        if op.call is None:  # the fields map one-to-one: every one is an argument of the facade
            takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
            keywords = {op.rename.get(f, f) for f in fields - set(op.args)}
            assert takes_any or keywords <= set(params), (op.name, keywords - set(params))
        if op.http is not None:
            assert set(op.http.path_fields) <= fields, (op.name, op.http.path)
        if op.mcp is not None:
            assert set(op.mcp.fields or ()) <= fields and set(op.mcp.defaults) <= fields, op.name


def test_names_routes_ids_and_tools_are_unique() -> None:
    http = [op.http for op in OPERATIONS if op.http is not None]
    tools = [op.mcp.name for op in OPERATIONS if op.mcp is not None]
    assert len({op.name for op in OPERATIONS}) == len(OPERATIONS)
    assert len({(h.method, h.path) for h in http}) == len(http)
    assert len({h.operation_id for h in http}) == len(http)
    assert len(set(tools)) == len(tools)


def test_a_reading_operation_needs_no_write_permission_and_a_writing_one_does() -> None:
    for op in OPERATIONS:
        if op.writes:
            assert op.permission in ("write", "admin", "account"), op.name
            assert op.http is None or op.http.method != "GET", op.name  # a GET never changes anything
        if op.mcp is not None and not op.writes:
            assert not op.mcp.destructive, op.name
