"""The contract every native tool keeps: its context, its outcome, its JSON schema, and the
argument checks run before it. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ToolContext:
    """Where and how the tools run. ``output_cap`` is in characters, ``read_limit`` in lines.
    ``permissions`` is the thread's (see ``native_permissions``); ``off_limits`` are the
    directories a confined thread may not touch even inside cwd (the daemon's state)."""

    cwd: Path
    shell_timeout: float = 120.0
    output_cap: int = 30_000
    read_limit: int = 2_000
    permissions: str = "default"
    off_limits: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call produced. ``argument`` is what a receipt names: a path, a pattern,
    a command, cut to about 120 characters."""

    output: str
    is_error: bool
    argument: str


ToolFn = Callable[[ToolContext, Mapping[str, Any]], Awaitable[ToolOutcome]]


@dataclass(frozen=True)
class Tool:
    """A tool as the model sees it (name, description, JSON schema) and the function behind it."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolFn


def _schema(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


READ_PARAMETERS = _schema(
    ["path"],
    path={"type": "string", "description": "The file to read, absolute or relative to cwd."},
    offset={
        "type": "integer",
        "minimum": 1,
        "description": "The 1-based line to start at. Defaults to 1.",
    },
    limit={
        "type": "integer",
        "minimum": 1,
        "description": "How many lines to return at most. The default is large; "
        "the output says when lines were cut.",
    },
)
SEARCH_PARAMETERS = _schema(
    [],
    pattern={
        "type": "string",
        "description": "A Python regular expression matched against each line. "
        "Prefix with (?i) to ignore case. Omit it to list files by glob.",
    },
    path={
        "type": "string",
        "description": "The directory or file to search, absolute or relative to cwd. "
        "Defaults to cwd.",
    },
    glob={
        "type": "string",
        "description": "Only files matching this glob, e.g. '*.py' (any depth) or "
        "'src/**/*.{ts,tsx}' (relative to path). Alone, lists the matching files.",
    },
)
EDIT_PARAMETERS = _schema(
    ["path", "old_string", "new_string"],
    path={"type": "string", "description": "The file to edit, absolute or relative to cwd."},
    old_string={
        "type": "string",
        "description": "The exact text to replace, whitespace included. It must occur "
        "exactly once unless replace_all is true.",
    },
    new_string={"type": "string", "description": "The text to put in its place."},
    replace_all={
        "type": "boolean",
        "description": "Replace every occurrence instead of exactly one. Defaults to false.",
    },
)
WRITE_PARAMETERS = _schema(
    ["path", "content"],
    path={
        "type": "string",
        "description": "The file to create or overwrite, absolute or relative to cwd.",
    },
    content={"type": "string", "description": "The file's complete new content."},
)
SHELL_PARAMETERS = _schema(
    ["command"],
    command={
        "type": "string",
        "description": "A bash command line, run with `bash -lc` in cwd with no stdin.",
    },
)


# --- argument checks -------------------------------------------------------------------------

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


_A = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
}


def _json_name(value: object) -> str:
    """``value``'s JSON type with its article: 'an integer', 'null'."""
    if value is None:
        return "null"
    for name in ("boolean", "string", "integer", "number", "object", "array"):
        if isinstance(value, _JSON_TYPES[name]):
            return _A[name]
    return type(value).__name__


def argument_problem(tool: str, arguments: object, schema: Mapping[str, Any]) -> str | None:
    """The first way ``arguments`` breaks ``schema`` as a sentence, or None. A null optional
    argument counts as absent, so OpenAI-style strict schemas (nullable, all required) work."""
    if not isinstance(arguments, Mapping):
        return f"{tool}: arguments must be an object, got {_json_name(arguments)}."
    properties: Mapping[str, Any] = schema["properties"]
    for key in schema["required"]:
        if arguments.get(key) is None:
            return f"{tool}: missing required argument '{key}'."
    for key, value in arguments.items():
        spec = properties.get(key)
        if spec is None:
            return f"{tool}: unknown argument '{key}'; it takes {', '.join(properties)}."
        if value is None:
            continue
        expected: str = spec["type"]
        # bool is an int in Python, never in JSON
        if isinstance(value, bool) != (expected == "boolean") or not isinstance(
            value, _JSON_TYPES[expected]
        ):
            return f"{tool}: argument '{key}' must be {_A[expected]}, got {_json_name(value)}."
        minimum = spec.get("minimum")
        if minimum is not None and value < minimum:
            return f"{tool}: argument '{key}' must be at least {minimum}, got {value}."
    return None


def text_argument(arguments: object, key: str) -> str:
    value = arguments.get(key) if isinstance(arguments, Mapping) else None
    return value if isinstance(value, str) else ""


def failed(output: str, argument: str) -> ToolOutcome:
    return ToolOutcome(output, is_error=True, argument=argument)
