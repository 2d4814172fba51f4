"""The pydantic-free coercion of plain arguments answers exactly what typer's own adapters answer.

For every parameter of the real command tree that gets the shortcut, each value below goes through
both: the shortcut (``cairn.cli.coerce``) and the runtime param typer builds (pydantic). Same value,
same type, or the same refusal with the same message.
"""

from __future__ import annotations

from typing import Any

import pytest
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param

from cairn.cli.app import _command
from cairn.cli.coerce import PlainRuntimeParam, plain

STRINGS: list[Any] = ["", "x", " spaced ", "repo::acme/api", "é\u200b", "\udcff", "-", "0", b"bytes", 7]
INTS: list[Any] = [
    "0", "7", "007", "100", "123456789012345678", "1234567890123456789012", " 5", "5 ", "+5", "-5", "1_000",
    "5.0", "x", "", "٣", "²", 5, 0, True, 5.0,
]  # fmt: skip
LISTS: list[Any] = [["a", "b"], ("a",), [], ("a", 3), "a"]
BOOLS: list[Any] = [True, False, "true", "no", 1, "x"]


def _params() -> list[Any]:
    """Every typer parameter of the whole tree."""
    found = []

    def walk(cmd: Any) -> None:
        own = [*getattr(cmd, "params", ()), getattr(cmd, "_help_option", None)]  # --help, made by install
        found.extend(p for p in own if hasattr(p, "type_descriptor"))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(_command())
    return found


def _outcome(runtime: Any, value: Any, param: Any) -> tuple[str, Any]:
    try:
        got = runtime.coerce(value, param=param, ctx=None)
    except BadParameter as exc:
        return "refused", exc.format_message()
    return type(got).__name__, got


def test_the_shortcut_covers_the_plain_parameters_of_the_commands_agents_run() -> None:
    params = _params()
    shortcut = [p for p in params if isinstance(p._runtime_param, PlainRuntimeParam)]
    names = {p.name for p in shortcut}
    assert {"scope", "key", "value", "tag", "limit", "cursor", "query", "mode", "help"} <= names
    # An enum/choice, a path or a bounded number keeps typer's adapter.
    for p in params:
        d = p.type_descriptor
        if d.is_choice or d.is_path or d.is_file or d.parameter_info.min is not None:
            assert plain(d) is None, p.name


KINDS: dict[str, tuple[Any, list[Any]]] = {
    "str": (str, STRINGS), "int": (int, INTS), "bool": (bool, BOOLS), "list[str]": (list[str], LISTS),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_shortcut_and_typers_adapter_agree_value_by_value(kind: str) -> None:
    annotation, values = KINDS[kind]
    checked = 0
    for param in _params():
        runtime = param._runtime_param
        if not isinstance(runtime, PlainRuntimeParam) or runtime.annotation != annotation:
            continue
        typers = build_runtime_param(param.type_descriptor)
        assert not isinstance(typers, PlainRuntimeParam)
        for value in values:
            if param.multiple and isinstance(value, (str, bytes, int)):
                continue  # click hands a repeatable option a tuple
            assert _outcome(runtime, value, param) == _outcome(typers, value, param), (param.name, value)
            checked += 1
    assert checked > 0
