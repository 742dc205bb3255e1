"""What a cleared result is: its tool's category (re-readable, an action, control), and the
one-line receipt that stands in for it in the view. Pure: no I/O. The projector writes
receipts as it folds a window; the tiers choose what to clear by category.
"""

from __future__ import annotations

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


def categorize(tool: str) -> Category:
    """A tool's category from its name; unknown tools are actions (only collapse clears them)."""
    name = tool.rsplit("__", 1)[-1].lower()
    if name in _CONTROL or any(word in name for word in ("recall", "retain", "approv")):
        return "control"
    if name in _REREAD:
        return "reread"
    return "action"


def receipt(result: ToolResult, seq: int, tokens: int) -> str:
    """The one line that stands in for a cleared result: tool, argument, size, seq, and how
    to get it back."""
    what = f"{result.tool}({result.argument})" if result.argument else result.tool
    category = result.category or categorize(result.tool)
    if category == "reread":
        back = "run it again if you need it"
    else:
        back = "failed" if result.is_error else "completed"
        back = f"the action {back}; rerun or reread to see its effect"
    return f"[receipt seq {seq}: {what}, {tokens} tokens cleared; {back}]"
