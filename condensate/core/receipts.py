"""What a cleared result is: its tool's category (re-readable, an action, control), what its
call names (the argument every engine logs with its result), and the one-line receipt that
stands in for it in the view. Pure: no I/O. The engines name calls with ``argument_of``; the
projector writes receipts as it folds a window; the tiers choose what to clear by category;
retention reads receipts back with ``named_by``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from condensate.core.shell_reads import reads_only
from condensate.events import ToolCategory, ToolResult

Category = ToolCategory

_REREAD = {
    "read",
    "read_file",
    "view",
    "cat",
    "search",
    "grep",
    "glob",
    "find",
    "ls",
    "list",
    "list_dir",
    "list_files",
    "diff",
    "git_diff",
    "webfetch",
    "web_fetch",
    "fetch",
    "notebookread",
    "view_image",
    "toolsearch",
    "tool_search",
}
_CONTROL = {
    "compact_context",
    "compact_microcompact",
    "context_usage",
    "recall",
    "retain",
    "memory",
    "approve",
    "approval",
    "request_approval",
    "request_user_input",
    "spawn",
    "join",
    "task",
    "agent",
    "condense",
    "pin",
}


SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "run_shell_command"})
"""Tools that run a command: their category is the command's (``shell_reads``)."""


def categorize(tool: str, argument: str = "") -> Category:
    """A tool's category from its name, and for a shell tool from its command (its argument):
    one that only reads is re-readable. Unknown tools are actions (only collapse clears
    them)."""
    name = bare_tool(tool)
    if name in _CONTROL or any(word in name for word in ("recall", "retain", "approv")):
        return "control"
    if name in _REREAD or (name in SHELL_TOOLS and reads_only(argument)):
        return "reread"
    return "action"


ARGUMENT_CHARS = 120
ARGUMENT_KEYS = ("file_path", "path", "notebook_path", "command", "cmd", "pattern", "url", "query")
"""What names a call, first found first: a file, a command, a pattern, a URL, a query."""
PATCH_TOOL = "apply_patch"
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.M)
_RECEIPT = re.compile(r"\[receipt seq \d+: ([\w.-]+)\((.*?)\), \d+ tokens cleared")


def bare_tool(tool: str) -> str:
    """A tool's own name, lower case, without an MCP server's ``mcp__server__`` prefix."""
    return tool.rsplit("__", 1)[-1].lower()


def short(text: str) -> str:
    """One line of at most ``ARGUMENT_CHARS`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= ARGUMENT_CHARS else line[: ARGUMENT_CHARS - 1] + "…"


def argument_of(tool: str, arguments: Mapping[str, Any]) -> str:
    """What a call names, on one short line: a patch's files (joined by ", "), else the first
    of ``ARGUMENT_KEYS`` it has (a list joined by spaces); empty when it has none."""
    if bare_tool(tool) == PATCH_TOOL:
        paths = arguments.get("paths")
        if isinstance(paths, list):
            named = [str(p) for p in paths if p]
        else:
            raw = arguments.get("input") or arguments.get("patch") or ""
            named = [n.strip() for n in _PATCH_FILE.findall(str(raw))]
        if named:
            return short(", ".join(named))
    for key in ARGUMENT_KEYS:
        value = arguments.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value.strip():
            return short(value)
    return ""


def files_named(tool: str, argument: str) -> list[str]:
    """The files a call's argument names: a patch's several (joined by ", ", or as the
    patch's own text names them), another call's one."""
    if not argument:
        return []
    if bare_tool(tool) == PATCH_TOOL:
        in_text = [n.strip() for n in _PATCH_FILE.findall(argument)]
        return in_text or [n.strip() for n in argument.split(", ") if n.strip()]
    return [argument]


def read_key(result: ToolResult, arguments: Mapping[str, Any] | None) -> str:
    """What a re-readable result read: its tool and its call's whole arguments (else the
    argument logged with it). Two results of one key hold the same read, the later one the
    current one (a file read again after an edit, a search run again)."""
    what = result.argument if arguments is None else json.dumps(arguments, sort_keys=True)
    return f"{bare_tool(result.tool)}:{what}"


def receipt(
    result: ToolResult,
    seq: int,
    tokens: int,
    *,
    recall: bool = False,
    category: Category | None = None,
    superseded_by: int | None = None,
) -> str:
    """The one line that stands in for a cleared result: tool, argument, size, seq, and how
    to get it back (with ``recall``: the tool that returns the original). ``category`` is the
    view's (a shell call's comes from its whole command); ``superseded_by`` the seq of a later
    result of the same read, which the view still shows."""
    what = f"{result.tool}({result.argument})" if result.argument else result.tool
    category = category or result.category or categorize(result.tool, result.argument)
    if superseded_by is not None:
        return (
            f"[receipt seq {seq}: {what}, {tokens} tokens cleared; superseded by the same "
            f"read at seq {superseded_by}, shown below]"
        )
    if category == "reread":
        back = "run it again if you need it"
    else:
        back = "failed" if result.is_error else "completed"
        back = f"the action {back}; rerun or reread to see its effect"
    if recall:
        back = f"{back}, or recall(seq={seq}) for the original"
    return f"[receipt seq {seq}: {what}, {tokens} tokens cleared; {back}]"


def named_by(text: str) -> tuple[str, str] | None:
    """(tool, argument) of the first receipt in ``text``, or None."""
    found = _RECEIPT.search(text)
    return None if found is None else (found[1], found[2])
