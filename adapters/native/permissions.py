"""What a native thread's ``permissions`` lets its tools do, decided here and nowhere else.

- ``default``: every tool, on any path the daemon's user can reach; relative paths resolve
  against cwd, absolute ones are used as given. The file tools are **not** a sandbox.
- ``workspace``: read, search, edit and write, on paths that resolve (symlinks included)
  inside cwd; no shell, because a shell cannot be confined to cwd.
- ``read-only``: read and search, inside cwd as under ``workspace``; no edit, write or shell.
- ``ask``: as ``default``, but every edit, write and shell call waits for an operator's
  allow (``condensate.runtime.approvals``); a deny or no answer by the deadline refuses it.

Under the two confined values, the daemon's state directory is refused even inside cwd.
``locate`` resolves paths (it reads symlinks, so it runs on the file tools' worker thread).
"""

from __future__ import annotations

import os
from pathlib import Path

from adapters.tool_contract import ToolContext

NATIVE_PERMISSIONS: tuple[str, ...] = ("default", "workspace", "read-only", "ask")
"""The ``permissions`` values the native engine enforces; any other is refused."""

_FORBIDDEN: dict[str, frozenset[str]] = {
    "default": frozenset(),
    "ask": frozenset(),
    "workspace": frozenset({"shell"}),
    "read-only": frozenset({"edit", "write", "shell"}),
}
_WHY = {
    "workspace": "a shell cannot be confined to cwd, so workspace allows none",
    "read-only": "read-only allows no edit, write or shell",
}


class OutsideCwd(Exception):
    """A path a confined thread may not touch; the message is the sentence the model reads."""


def permissions_problem(permissions: str) -> str | None:
    """Why ``permissions`` is not a value the native engine enforces, or None."""
    if permissions in _FORBIDDEN:
        return None
    known = ", ".join(repr(value) for value in NATIVE_PERMISSIONS)
    return f"The native engine cannot enforce permissions {permissions!r}; it enforces {known}."


def allows(permissions: str, tool: str) -> bool:
    """Whether ``tool`` may run; an unknown value allows nothing (the engine refuses one at
    thread creation, so only a context built by hand can carry it)."""
    forbidden = _FORBIDDEN.get(permissions)
    return forbidden is not None and tool not in forbidden


def refusal(permissions: str, tool: str) -> str | None:
    """The sentence refusing ``tool`` under ``permissions``, or None when it may run."""
    if allows(permissions, tool):
        return None
    if problem := permissions_problem(permissions):
        return f"{tool} is refused. {problem}"
    return f"{tool} is refused: this thread's permissions are {permissions!r}; {_WHY[permissions]}."


_ASKED = frozenset({"edit", "write", "shell"})
"""What changes something: under ``ask`` these wait for an operator; reads never do."""


def needs_approval(permissions: str, tool: str) -> bool:
    """Whether a call of ``tool`` must be allowed by an operator before it runs."""
    return permissions == "ask" and tool in _ASKED


def confined(ctx: ToolContext) -> bool:
    return ctx.permissions in ("workspace", "read-only")


def locate(ctx: ToolContext, raw: str) -> Path:
    """The path a file tool works on. Under a confined value it is the fully resolved path,
    so the tool acts on what was checked; raises ``OutsideCwd`` when that is outside cwd or
    inside the daemon's state directory."""
    path = Path(raw).expanduser()
    path = path if path.is_absolute() else ctx.cwd / path
    if not confined(ctx):
        return path
    real = Path(os.path.realpath(path))
    if problem := _outside(ctx, real):
        where = (
            f"{raw} resolves to {real}, {problem}" if str(real) != raw else f"{raw} is {problem}"
        )
        msg = (
            f"{where}; permissions {ctx.permissions!r} confine the file tools to cwd, "
            "the daemon's state directory excepted."
        )
        raise OutsideCwd(msg)
    return real


def reachable(ctx: ToolContext, path: Path) -> bool:
    """Whether a file met while walking a directory may be opened (a symlink in cwd may
    point anywhere)."""
    return not confined(ctx) or _outside(ctx, Path(os.path.realpath(path))) is None


def _outside(ctx: ToolContext, real: Path) -> str | None:
    root = Path(os.path.realpath(ctx.cwd))
    if not real.is_relative_to(root):
        return f"outside cwd ({root})"
    for private in ctx.off_limits:
        if real.is_relative_to(os.path.realpath(private)):
            return "inside the daemon's state directory"
    return None
