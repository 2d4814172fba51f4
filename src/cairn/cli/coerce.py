"""Typer's parameter coercion, without importing pydantic for the values a command line mostly holds.

typer (0.29) turns every parsed argument into its annotated type through a pydantic ``TypeAdapter``
built per parameter: importing pydantic for that is a large share of a cold ``cairn write`` whose
arguments are all strings (bench/README.md). For a ``str`` that is already a string, an ``int``
written as plain decimal digits, a ``bool`` that is one (``--help``'s unset ``None`` never reaches
coercion, but typer builds the adapter first) and a ``list[str]`` of strings, typer's own adapters
return ``str(value)``, ``int(value)``, the bool and ``list(value)``; those values are answered here. Anything else
(a sign, spaces, underscores, a constraint, an enum, a path, a date) goes to the adapter typer
would have built, so what a command accepts and every error it prints stay typer's
(``tests/cli/test_coerce.py`` holds both side by side).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param

# Plain decimal digits up to this length are an int to pydantic exactly as to ``int()``.
_DIGITS = 18


@dataclass(frozen=True)
class PlainRuntimeParam(RuntimeParam):
    """A ``str``, ``int``, ``bool`` or ``list[str]`` parameter: the common values directly, the rest through typer."""

    descriptor: TypeDescriptor

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        annotation = self.annotation
        if (annotation is str and type(value) is str) or (annotation is bool and type(value) is bool):
            return value
        if annotation is int:
            if type(value) is int:
                return value
            if type(value) is str and value.isascii() and value.isdigit() and len(value) <= _DIGITS:
                return int(value)
        elif annotation == list[str] and isinstance(value, (list, tuple)) and all(type(v) is str for v in value):
            return list(value)
        return build_runtime_param(self.descriptor)._coerce_value(value, param=param, ctx=ctx)


def plain(descriptor: TypeDescriptor) -> PlainRuntimeParam | None:
    """The shortcut for a parameter typer would coerce with nothing but its type, else None."""
    info = descriptor.parameter_info
    if info.parser is not None or descriptor.is_choice or descriptor.is_file or descriptor.is_path:
        return None
    if descriptor.annotation is int and (info.min is not None or info.max is not None or info.clamp):
        return None
    if descriptor.annotation not in (str, int, bool) and descriptor.annotation != list[str]:
        return None
    return PlainRuntimeParam(parameter_info=info, annotation=descriptor.annotation, descriptor=descriptor)


def install(command: Any) -> None:
    """Give every parameter of a click command (and of its subcommands) the shortcut where it applies,
    ``--help`` included: click makes that option on first use and keeps it, so it is made here."""
    from typer._click import Context

    params = list(getattr(command, "params", ()))
    help_option = command.get_help_option(Context(command, **(command.context_settings or {})))
    if help_option is not None:
        params.append(help_option)
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is not None and getattr(param, "_runtime_param", None) is None:
            runtime = plain(descriptor)
            if runtime is not None:
                param._runtime_param = runtime
    for sub in getattr(command, "commands", {}).values():
        install(sub)
