"""Each tool declared once, as a typed function: ``declare(fn)`` reads its signature into a ``Tool``.

A tool is ``def name(ctx: ToolContext, arg: Type = default, ...) -> Shown`` whose docstring is the description
a model reads. A parameter's type gives its JSON Schema type (``str``, ``int``, a ``Literal`` of choices, either
``| None`` when optional); ``Annotated[T, Arg(...)]`` adds what a type cannot say (its meaning, its bounds); a
default makes it optional. From that one declaration come the schema the agent loop and Bedrock show a model
(``Tool.parameters``), the check every call passes (``Tool.check``) and the plain signature the MCP server
registers (``Tool.signature``).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from retriever.agent.tools.results import ToolError

_JSON_TYPES = {str: "string", int: "integer"}


@dataclass(frozen=True)
class Arg:
    """What a parameter's type cannot say, as its JSON Schema says it: its meaning and its bounds."""

    description: str = ""
    max_length: int | None = None
    minimum: int | None = None
    maximum: int | None = None


@dataclass(frozen=True)
class Param:
    name: str
    annotation: Any  # the type without its Arg: what the MCP SDK derives its own schema from
    schema: dict[str, Any]  # the property's JSON Schema
    default: Any = inspect.Parameter.empty

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty


@dataclass(frozen=True)
class Tool:
    """One tool: its name, the description a model reads, its parameters and the function that runs it."""

    name: str
    description: str
    params: tuple[Param, ...]
    parameters: dict[str, Any]  # JSON Schema of the arguments
    fn: Callable[..., Any]

    def check(self, args: Mapping[str, Any]) -> None:
        """Refuse arguments the schema does not admit, with a message that says which and what it takes."""
        allowed = {p.name: p for p in self.params}
        unknown = sorted(set(args) - set(allowed))
        missing = [p.name for p in self.params if p.required and p.name not in args]
        if unknown or missing:
            takes = ", ".join(allowed) or "no arguments"
            wrong = f"unknown argument(s) {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"
            raise ToolError(f"{self.name}: {wrong}; it takes {takes}")
        for name, value in args.items():
            _check_value(self.name, name, value, allowed[name].schema)

    def signature(self, *extra: inspect.Parameter) -> inspect.Signature:
        """The tool's arguments as a plain Python signature (then ``extra``), returning the result's text."""
        params = [
            inspect.Parameter(
                p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=p.default, annotation=p.annotation
            )
            for p in self.params
        ]
        return inspect.Signature([*params, *extra], return_annotation=str)


def declare(fn: Callable[..., Any]) -> Tool:
    """The ``Tool`` that ``fn`` declares: every parameter after the first (the context the tool runs in)."""
    hints = get_type_hints(fn, include_extras=True)
    signature = list(inspect.signature(fn).parameters.values())[1:]
    params = tuple(_param(p.name, hints[p.name], p.default) for p in signature)
    parameters: dict[str, Any] = {"type": "object", "properties": {p.name: p.schema for p in params}}
    required = [p.name for p in params if p.required]
    if required:
        parameters["required"] = required
    description = " ".join((inspect.getdoc(fn) or "").split())
    return Tool(fn.__name__, description, params, parameters, fn)


def _param(name: str, hint: Any, default: Any) -> Param:
    annotation, arg = hint, Arg()
    if get_origin(hint) is Annotated:
        annotation, *extras = get_args(hint)
        arg = next((e for e in extras if isinstance(e, Arg)), arg)
    core = annotation
    if get_origin(core) in (Union, types.UnionType):
        (core,) = [a for a in get_args(core) if a is not type(None)]
    if get_origin(core) is Literal:
        choices = list(get_args(core))
        schema: dict[str, Any] = {"type": _JSON_TYPES[type(choices[0])], "enum": choices}
    else:
        schema = {"type": _JSON_TYPES[core]}
    bounds = {"minimum": arg.minimum, "maximum": arg.maximum, "maxLength": arg.max_length}
    schema.update({key: value for key, value in bounds.items() if value is not None})
    if arg.description:
        schema["description"] = arg.description
    if default is not inspect.Parameter.empty and default is not None:
        schema["default"] = default
    return Param(name, annotation, schema, default)


def _check_value(tool: str, name: str, value: Any, schema: Mapping[str, Any]) -> None:
    """The schema's type, bounds and choices, so every face refuses the same arguments."""
    if schema["type"] == "integer" and not (isinstance(value, int) and not isinstance(value, bool)):
        raise ToolError(f"{tool}: {name} must be a whole number, not {value!r}")
    if schema["type"] == "string" and not isinstance(value, str):
        raise ToolError(f"{tool}: {name} must be a string, not {value!r}")
    if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
        raise ToolError(f"{tool}: {name} is {len(value)} characters; the most is {schema['maxLength']}: say it shorter")
    if isinstance(value, int) and not schema.get("minimum", value) <= value <= schema.get("maximum", value):
        raise ToolError(
            f"{tool}: {name} must be between {schema.get('minimum')} and {schema.get('maximum')}, not {value}"
        )
    if "enum" in schema and value not in schema["enum"]:
        *first, last = (repr(choice) for choice in schema["enum"])
        raise ToolError(f"unknown {name} {value!r}: use {', '.join(first)} or {last}")
