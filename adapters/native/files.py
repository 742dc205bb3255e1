"""The native loop's file tools: read, search, edit and write, with the path and text helpers
they share.

Each runs its blocking file work on a worker thread and never raises: every failure comes back
as an outcome with ``is_error`` set and a sentence naming the problem. Every path goes through
``native_permissions.locate``: under ``default`` relative paths resolve against cwd and absolute
ones are used as given, so these tools are **not** a sandbox; under ``workspace`` and
``read-only`` a path must resolve, symlinks included, inside cwd.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from adapters.native.output import capped
from adapters.native.permissions import OutsideCwd, locate, reachable
from adapters.tool_contract import (
    EDIT_PARAMETERS,
    READ_PARAMETERS,
    SEARCH_PARAMETERS,
    WRITE_PARAMETERS,
    ToolContext,
    ToolOutcome,
    argument_problem,
    failed,
    text_argument,
)
from condensate.core.receipts import short

_VCS_AND_VENDORED = {".git", ".hg", ".svn", "node_modules", ".venv", "venv"}
_CACHES = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"}
SKIP_DIRS = frozenset(_VCS_AND_VENDORED | _CACHES)
"""Directories search never descends into (it still searches inside one named as ``path``)."""
MAX_MATCHES = 200
MAX_FILES = 500
_LINE_CHARS = 2_000  # one minified line must not eat the whole read
_MATCH_LINE_CHARS = 300
_SNIFF_BYTES = 8_192
_SEARCH_FILE_BYTES = 10_000_000  # bigger files are logs or data, not source


async def _offload(
    tool: str,
    ctx: ToolContext,
    raw: str,
    argument: str,
    work: Callable[[Path], tuple[str, bool]],
) -> ToolOutcome:
    """Locate ``raw`` and run blocking file work on it in a thread; a path the permissions
    refuse, or an OSError the work did not expect (a stat refused on a parent directory,
    say), still comes back as an outcome."""
    try:
        output, is_error = await anyio.to_thread.run_sync(lambda: work(locate(ctx, raw)))
    except OutsideCwd as exc:
        return failed(f"{tool}: {exc}", argument)
    except OSError as exc:
        return failed(f"{tool}: cannot access {raw}: {exc.strerror or exc}.", argument)
    return ToolOutcome(output, is_error, argument)


# --- paths and text --------------------------------------------------------------------------


def _display(ctx: ToolContext, path: Path) -> str:
    """Paths under cwd relative to it, so the model can pass them straight back (a confined
    thread's paths are resolved, so they are tried against the resolved cwd too)."""
    for base in (ctx.cwd, Path(os.path.realpath(ctx.cwd))):
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix()
    return str(path)


def _looks_binary(head: bytes) -> bool:
    return b"\0" in head[:_SNIFF_BYTES]


def _clip_line(line: str, limit: int) -> str:
    return line if len(line) <= limit else f"{line[:limit]}… [{len(line) - limit:,} chars cut]"


# --- read ------------------------------------------------------------------------------------


async def read(ctx: ToolContext, arguments: Mapping[str, Any]) -> ToolOutcome:
    """Numbered lines of a text file, from ``offset`` for ``limit`` lines, like ``cat -n``."""
    argument = short(text_argument(arguments, "path"))
    if problem := argument_problem("read", arguments, READ_PARAMETERS):
        return failed(problem, argument)
    raw: str = arguments["path"]
    offset: int = arguments.get("offset") or 1
    limit: int = arguments.get("limit") or ctx.read_limit
    work = partial(_read, ctx, raw, offset=offset, limit=limit)
    return await _offload("read", ctx, raw, argument, work)


def _read(ctx: ToolContext, raw: str, path: Path, *, offset: int, limit: int) -> tuple[str, bool]:
    if path.is_dir():
        return f"read: {raw} is a directory; use search with a glob to list it.", True
    if not path.exists():
        return f"read: no such file: {raw} (looked at {path}).", True
    lines: list[str] = []
    budget = ctx.output_cap
    total = 0
    stopped_at: int | None = None  # the first wanted line the output cap left out
    try:
        with path.open("rb") as handle:
            if _looks_binary(handle.read(_SNIFF_BYTES)):
                return f"read: {raw} looks binary (it has NUL bytes); read shows text only.", True
            handle.seek(0)
            for number, data in enumerate(handle, start=1):
                total = number
                if number < offset or number >= offset + limit or stopped_at is not None:
                    continue
                text = data.decode("utf-8", errors="replace").rstrip("\r\n")
                entry = f"{number:6d}\t{_clip_line(text, _LINE_CHARS)}"
                if lines and budget < len(entry) + 1:
                    stopped_at = number
                    continue
                budget -= len(entry) + 1
                lines.append(entry)
    except OSError as exc:
        return f"read: cannot read {raw}: {exc.strerror or exc}.", True
    if total == 0:
        return f"({raw} is empty)", False
    if offset > total:
        return f"read: offset {offset} is past the end of {raw}, which has {total} lines.", True
    last = offset + len(lines) - 1
    if last < total:
        why = "the output cap" if stopped_at is not None else "the line limit"
        lines.append(
            f"[lines {offset}-{last} of {total}, cut by {why}; read on with offset={last + 1}]"
        )
    return "\n".join(lines), False


# --- search ----------------------------------------------------------------------------------


async def search(ctx: ToolContext, arguments: Mapping[str, Any]) -> ToolOutcome:
    """Lines matching a regex (``path:line:text``), or with only a glob, the matching files."""
    argument = short(text_argument(arguments, "pattern") or text_argument(arguments, "glob"))
    if problem := argument_problem("search", arguments, SEARCH_PARAMETERS):
        return failed(problem, argument)
    pattern: str | None = arguments.get("pattern")
    glob: str | None = arguments.get("glob")
    raw: str = arguments.get("path") or "."
    if pattern is None and glob is None:
        return failed("search: give a pattern, a glob, or both.", argument)
    try:
        regex = re.compile(pattern) if pattern is not None else None
    except re.error as exc:
        return failed(f"search: invalid regex {pattern!r}: {exc}.", argument)
    try:
        matcher = _glob_matcher(glob) if glob is not None else None
    except re.error as exc:
        return failed(f"search: invalid glob {glob!r}: {exc}.", argument)
    work = partial(_search, ctx, raw, regex=regex, matcher=matcher)
    return await _offload("search", ctx, raw, argument, work)


def _glob_matcher(glob: str) -> Callable[[str], bool]:
    """A glob without '/' matches file names at any depth; with one, the path under the root.
    ``**`` spans directories, ``{a,b}`` alternates, ``[!x]`` negates."""
    regex = re.compile(_glob_regex(glob) + r"\Z", re.DOTALL)
    if "/" not in glob:
        return lambda relative: regex.match(relative.rsplit("/", 1)[-1]) is not None
    return lambda relative: regex.match(relative) is not None


def _glob_regex(glob: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = end + 1
        elif char == "{" and (end := glob.find("}", i)) != -1:
            options = glob[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_glob_regex(option) for option in options) + ")")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _files(root: Path) -> Iterator[tuple[Path, str]]:
    """Files under ``root`` in path order, each with its path relative to root."""
    if not root.is_dir():
        yield root, root.name
        return
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        base = Path(directory)
        prefix = base.relative_to(root).as_posix()
        for name in sorted(filenames):
            yield base / name, name if prefix == "." else f"{prefix}/{name}"


def _search(
    ctx: ToolContext,
    raw: str,
    root: Path,
    *,
    regex: re.Pattern[str] | None,
    matcher: Callable[[str], bool] | None,
) -> tuple[str, bool]:
    if not root.exists():
        return f"search: no such file or directory: {raw} (looked at {root}).", True
    found: list[str] = []
    cap = MAX_FILES if regex is None else MAX_MATCHES
    searched = files = 0
    for path, relative in _files(root):
        if (matcher is not None and not matcher(relative)) or not reachable(ctx, path):
            continue
        if regex is None:
            found.append(_display(ctx, path))
        else:
            hits = _grep(path, regex, cap - len(found))
            searched += 1
            files += bool(hits)
            found.extend(f"{_display(ctx, path)}:{n}:{line}" for n, line in hits)
        if len(found) >= cap:
            what = "files" if regex is None else "matches"
            found.append(f"[stopped at {cap} {what}; narrow the pattern, path or glob]")
            break
    where = _display(ctx, root)
    where = "cwd" if where == "." else where
    if not found and regex is None:
        return f"No files under {where} match the glob.", False
    if not found:
        return f"No lines match in {searched} files searched under {where}.", False
    if regex is not None and len(found) < cap:
        found.append(f"[{len(found)} matches in {files} files]")
    return capped("\n".join(found), ctx.output_cap), False


def _grep(path: Path, regex: re.Pattern[str], room: int) -> list[tuple[int, str]]:
    """Up to ``room`` matching lines; unreadable, binary and huge files have none."""
    try:
        if path.stat().st_size > _SEARCH_FILE_BYTES:
            return []
        data = path.read_bytes()
    except OSError:
        return []
    if _looks_binary(data):
        return []
    # Split on "\n" alone, as read does, so line numbers agree between the two tools.
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    hits: list[tuple[int, str]] = []
    for number, raw_line in enumerate(lines, 1):
        line = raw_line.removesuffix("\r")
        if regex.search(line):
            hits.append((number, _clip_line(line, _MATCH_LINE_CHARS)))
            if len(hits) >= room:
                break
    return hits


# --- edit and write --------------------------------------------------------------------------


async def edit(ctx: ToolContext, arguments: Mapping[str, Any]) -> ToolOutcome:
    """Replace ``old_string`` with ``new_string`` in a file: exactly once, or everywhere."""
    argument = short(text_argument(arguments, "path"))
    if problem := argument_problem("edit", arguments, EDIT_PARAMETERS):
        return failed(problem, argument)
    raw: str = arguments["path"]
    old: str = arguments["old_string"]
    new: str = arguments["new_string"]
    replace_all: bool = arguments.get("replace_all") or False
    if not old:
        return failed("edit: old_string is empty; use write to create or replace a file.", argument)
    if old == new:
        return failed("edit: old_string and new_string are the same; nothing to change.", argument)
    work = partial(_edit, raw, old=old, new=new, replace_all=replace_all)
    return await _offload("edit", ctx, raw, argument, work)


def _edit(raw: str, path: Path, *, old: str, new: str, replace_all: bool) -> tuple[str, bool]:
    if path.is_dir():
        return f"edit: {raw} is a directory, not a file.", True
    if not path.exists():
        return f"edit: no such file: {raw} (looked at {path}); use write to create it.", True
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"edit: cannot read {raw}: {exc.strerror or exc}.", True
    if _looks_binary(data):
        return f"edit: {raw} looks binary (it has NUL bytes); edit changes text only.", True
    try:
        # Bytes in and out, so CRLF line endings survive the edit untouched.
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"edit: {raw} is not UTF-8 text; rewrite it with write instead.", True
    count = text.count(old)
    if count == 0:
        return f"edit: old_string was not found in {raw}; read the file and copy it exactly.", True
    if count > 1 and not replace_all:
        return (
            f"edit: old_string occurs {count} times in {raw}; include more surrounding "
            "lines to make it unique, or pass replace_all.",
            True,
        )
    line = text.count("\n", 0, text.index(old)) + 1
    try:
        path.write_bytes(text.replace(old, new).encode("utf-8"))
    except OSError as exc:
        return f"edit: cannot write {raw}: {exc.strerror or exc}.", True
    where = f"first at line {line}" if count > 1 else f"at line {line}"
    plural = "occurrence" if count == 1 else "occurrences"
    return f"Edited {raw}: replaced {count} {plural} ({where}).", False


async def write(ctx: ToolContext, arguments: Mapping[str, Any]) -> ToolOutcome:
    """Create or overwrite a file with ``content``, creating missing parent directories."""
    argument = short(text_argument(arguments, "path"))
    if problem := argument_problem("write", arguments, WRITE_PARAMETERS):
        return failed(problem, argument)
    raw: str = arguments["path"]
    content: str = arguments["content"]
    return await _offload("write", ctx, raw, argument, partial(_write, raw, content=content))


def _write(raw: str, path: Path, *, content: str) -> tuple[str, bool]:
    if path.is_dir():
        return f"write: {raw} is a directory; give a file path.", True
    existed = path.exists()
    data = content.encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        return f"write: cannot write {raw}: {exc.strerror or exc}.", True
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {raw}: {len(data):,} bytes, {lines:,} lines.", False
