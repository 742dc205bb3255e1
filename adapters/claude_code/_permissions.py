"""A thread's ``tools`` and ``permissions`` as Claude Code's own flags; pure.

- ``default``: ``--permission-mode bypassPermissions`` (Condensate answers no permission
  prompts, and a headless Claude Code in its own ``default`` mode silently denies every write
  and every command that is not read-only, so an unattended thread could do nothing).
- ``workspace``: ``--restricted`` (Claude Code removes its code-running tools, Bash among
  them, and confines its file tools to cwd, symlinks resolved) with ``--permission-mode
  acceptEdits`` (edits inside cwd need no prompt) and ``--permission-prompts none`` (whatever
  would prompt is denied). As on the native loop: files inside cwd, no shell.
- ``read-only``: ``--restricted`` with only the read-only tools (Read, Grep, Glob) offered,
  ``--permission-mode dontAsk`` and no prompts: reads inside cwd, no edit, write or shell.
- ``ask``: Claude Code's own prompting mode (``--permission-mode manual``) with its prompts
  sent to Condensate (``--permission-prompt-tool stdio``): each ``can_use_tool`` request is
  an approval the operator answers (``condensate.runtime.approvals``), denied at its deadline. Reads
  inside cwd run unasked, as Claude Code decides; writes and commands wait for an answer.
- Claude Code's own mode names (``acceptEdits``, ``plan``, ...) pass through, unconfined.

A thread's ``tools`` become ``--tools``: the built-in tools Claude Code offers the model and
may run (``--allowedTools`` only skips prompts, which ``bypassPermissions`` skips anyway). A
tool the permissions forbid is left out, as the native loop leaves it out; a name that is
not one of Claude Code's tools is refused when the thread is created.
"""

from __future__ import annotations

from condensate.engine import mcp
from condensate.engine import ThreadSpec
from condensate.errors import Refused

CLAUDE_MODES = frozenset({"acceptEdits", "bypassPermissions", "plan", "dontAsk", "auto"})
"""Claude Code's own permission modes, passed through as given."""
CONFINED = frozenset({"workspace", "read-only"})
PERMISSIONS = ("default", "workspace", "read-only", "ask", *sorted(CLAUDE_MODES))
TOOLS = frozenset(
    {
        "Bash",
        "CronCreate",
        "CronDelete",
        "CronList",
        "Edit",
        "EnterWorktree",
        "ExitWorktree",
        "Glob",
        "Grep",
        "ListAgents",
        "Monitor",
        "NotebookEdit",
        "Read",
        "ReportFindings",
        "ScheduleWakeup",
        "SendMessage",
        "Skill",
        "Task",
        "TaskCreate",
        "TaskGet",
        "TaskList",
        "TaskStop",
        "TaskUpdate",
        "ToolSearch",
        "WebFetch",
        "WebSearch",
        "Workflow",
        "Write",
    }
)
"""Claude Code 2.1.332's built-in tools (its ``system/init`` line, with and without
``--restricted``)."""
RUNS_CODE = frozenset({"Bash", "CronCreate", "Monitor", "Workflow", "WebFetch"})
"""The tools ``--restricted`` removes: they run commands or code, which cwd cannot confine."""
READ_ONLY = ("Glob", "Grep", "Read")
CONTEXT_TOOLS = f"mcp__{mcp.SERVER_NAME}"
"""The thread's Condensate tools, which Claude Code defers behind its ToolSearch tool."""


def check(spec: ThreadSpec) -> None:
    """Refuse, before the thread exists, what Claude Code cannot enforce: a permissions value
    it has no mapping for, or a tool it does not have."""
    if spec.permissions not in PERMISSIONS:
        known = ", ".join(repr(p) for p in PERMISSIONS)
        raise Refused(
            code="unsupported-permissions",
            detail=f"The claude engine cannot enforce permissions {spec.permissions!r}; it "
            f"enforces {known}.",
            status=422,
        )
    unknown = sorted(set(spec.tools) - TOOLS)
    if unknown:
        raise Refused(
            code="unsupported-tools",
            detail=f"Claude Code has no tool {', '.join(map(repr, unknown))}; its tools are "
            f"{', '.join(sorted(TOOLS))}.",
            status=422,
        )


def offered(spec: ThreadSpec) -> list[str] | None:
    """The built-in tools to offer (``--tools``), or None for Claude Code's own set (all of
    them, or under ``workspace`` all that ``--restricted`` keeps)."""
    if spec.permissions == "read-only":
        wanted = spec.tools or READ_ONLY
        return [t for t in wanted if t in READ_ONLY]
    if not spec.tools:
        return None
    if spec.permissions == "workspace":
        return [t for t in spec.tools if t not in RUNS_CODE]
    return list(spec.tools)


def flags(spec: ThreadSpec, *, context_tools: bool) -> list[str]:
    """The command-line flags that carry the thread's permissions and tools. A thread with
    its Condensate tools keeps them: ToolSearch (which they hide behind) stays offered, and
    they are allowed without a prompt where prompts are denied."""
    check(spec)
    match spec.permissions:
        case "default":
            args = ["--permission-mode", "bypassPermissions"]
        case "workspace":
            args = ["--restricted", "--permission-mode", "acceptEdits"]
        case "read-only":
            args = ["--restricted", "--permission-mode", "dontAsk"]
        case "ask":
            args = ["--permission-mode", "manual", "--permission-prompt-tool", "stdio"]
        case mode:
            args = ["--permission-mode", mode]
    if spec.permissions in CONFINED:
        args += ["--permission-prompts", "none"]
    tools = offered(spec)
    if tools is not None:
        if context_tools and "ToolSearch" not in tools:
            tools.append("ToolSearch")
        args += ["--tools", ",".join(tools)]
    if context_tools and spec.permissions != "default":
        args += ["--allowedTools", CONTEXT_TOOLS]
    return args
