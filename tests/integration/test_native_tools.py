"""The native loop's file and shell tools against real files under tmp_path and real bash
processes: success paths, every named error, timeouts, output caps and argument checks."""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from adapters.native.tools import (
    MAX_FILES,
    MAX_MATCHES,
    TOOLS,
    edit,
    read,
    run_tool,
    search,
    shell,
    write,
)
from adapters.tool_contract import Tool, ToolContext, ToolOutcome
from condensate.core.receipts import categorize


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=tmp_path)


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer runs; a zombie waiting for init to reap it counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def _wait_gone(pid: int, within: float = 2.0) -> bool:
    with anyio.move_on_after(within):
        while not _gone(pid):  # noqa: ASYNC110 - procfs has no event to wait on
            await anyio.sleep(0.02)
    return _gone(pid)


def _pids(outcome: ToolOutcome) -> list[int]:
    return [int(pid) for pid in re.findall(r"PID=(\d+)", outcome.output)]


# --- read ------------------------------------------------------------------------------------


async def test_read_numbers_lines_like_cat_n(ctx: ToolContext) -> None:
    """read returns every line with a right-aligned number and a tab, like cat -n."""
    (ctx.cwd / "a.txt").write_text("alpha\nbeta\n")
    outcome = await read(ctx, {"path": "a.txt"})
    assert outcome == ToolOutcome("     1\talpha\n     2\tbeta", is_error=False, argument="a.txt")


async def test_read_offset_and_limit_select_lines_and_say_how_to_read_on(
    ctx: ToolContext,
) -> None:
    """read starts at a 1-based offset, stops at limit and names the offset to continue from."""
    (ctx.cwd / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    outcome = await read(ctx, {"path": "n.txt", "offset": 4, "limit": 2})
    lines = outcome.output.splitlines()
    assert lines[:2] == ["     4\tline 4", "     5\tline 5"]
    assert lines[2] == "[lines 4-5 of 10, cut by the line limit; read on with offset=6]"
    assert not outcome.is_error


async def test_read_stops_at_the_context_read_limit(tmp_path: Path) -> None:
    """Without a limit, read returns at most the context's read_limit lines and notes the cut."""
    (tmp_path / "n.txt").write_text("x\n" * 10)
    outcome = await read(ToolContext(cwd=tmp_path, read_limit=3), {"path": "n.txt"})
    assert outcome.output.count("\tx") == 3
    assert "of 10" in outcome.output
    assert "offset=4" in outcome.output


async def test_read_stops_at_the_output_cap(tmp_path: Path) -> None:
    """read stops adding lines at the output cap and says where to read on."""
    (tmp_path / "wide.txt").write_text(("y" * 90 + "\n") * 100)
    outcome = await read(ToolContext(cwd=tmp_path, output_cap=1_000), {"path": "wide.txt"})
    assert len(outcome.output) < 1_200
    assert "cut by the output cap" in outcome.output
    assert "offset=11" in outcome.output


async def test_read_missing_file_names_the_path(ctx: ToolContext) -> None:
    """read of a missing file is an error that names the path."""
    outcome = await read(ctx, {"path": "nope/missing.txt"})
    assert outcome.is_error
    assert "no such file: nope/missing.txt" in outcome.output


async def test_read_refuses_a_directory(ctx: ToolContext) -> None:
    """read of a directory is an error that points to search."""
    (ctx.cwd / "src").mkdir()
    outcome = await read(ctx, {"path": "src"})
    assert outcome.is_error
    assert "src is a directory" in outcome.output
    assert "search" in outcome.output


async def test_read_refuses_a_binary_file(ctx: ToolContext) -> None:
    """read of a file with NUL bytes is an error saying it looks binary."""
    (ctx.cwd / "blob.bin").write_bytes(b"\x89PNG\x00\x00\x01")
    outcome = await read(ctx, {"path": "blob.bin"})
    assert outcome.is_error
    assert "blob.bin looks binary" in outcome.output


async def test_read_offset_past_the_end_is_an_error(ctx: ToolContext) -> None:
    """read with an offset past the last line is an error giving the file's length."""
    (ctx.cwd / "short.txt").write_text("one\ntwo\n")
    outcome = await read(ctx, {"path": "short.txt", "offset": 5})
    assert outcome.is_error
    assert "has 2 lines" in outcome.output


async def test_read_empty_file_says_so(ctx: ToolContext) -> None:
    """read of an empty file succeeds and says the file is empty."""
    (ctx.cwd / "empty.txt").write_text("")
    outcome = await read(ctx, {"path": "empty.txt"})
    assert outcome == ToolOutcome("(empty.txt is empty)", is_error=False, argument="empty.txt")


async def test_read_accepts_absolute_paths_outside_cwd(tmp_path: Path) -> None:
    """An absolute path is used as given, even outside cwd; the tools are not a sandbox."""
    (tmp_path / "cwd").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("far away\n")
    outcome = await read(ToolContext(cwd=tmp_path / "cwd"), {"path": str(outside)})
    assert outcome.output == "     1\tfar away"


# --- search ----------------------------------------------------------------------------------


def _tree(root: Path) -> None:
    files = {
        "main.py": "import os\n# TODO: tidy\n",
        "src/pkg/util.py": "def helper():\n    return 1  # TODO later\n",
        "src/pkg/view.tsx": "// TODO in tsx\n",
        "src/pkg/style.ts": "export const x = 1\n",
        "README.md": "TODO in docs\n",
        ".git/config": "TODO git\n",
        "node_modules/dep/index.py": "# TODO dep\n",
        ".venv/lib/site.py": "# TODO venv\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "src/image.py").write_bytes(b"TODO\x00binary")


async def test_search_regex_with_glob_filter_returns_path_line_text(ctx: ToolContext) -> None:
    """A regex with a name glob matches only those files, at any depth, as path:line:text."""
    _tree(ctx.cwd)
    outcome = await search(ctx, {"pattern": r"TODO\b", "glob": "*.py"})
    assert not outcome.is_error
    assert outcome.argument == r"TODO\b"
    assert outcome.output.splitlines() == [
        "main.py:2:# TODO: tidy",
        "src/pkg/util.py:2:    return 1  # TODO later",
        "[2 matches in 2 files]",
    ]


async def test_search_regex_skips_vendored_dirs_and_binary_files(ctx: ToolContext) -> None:
    """A regex search skips .git, node_modules, .venv and files with NUL bytes."""
    _tree(ctx.cwd)
    outcome = await search(ctx, {"pattern": "TODO"})
    paths = [line.split(":")[0] for line in outcome.output.splitlines()[:-1]]
    assert paths == ["README.md", "main.py", "src/pkg/util.py", "src/pkg/view.tsx"]


async def test_search_glob_alone_lists_files(ctx: ToolContext) -> None:
    """A glob alone lists matching files relative to cwd, skipping vendored directories."""
    _tree(ctx.cwd)
    outcome = await search(ctx, {"glob": "*.py"})
    assert outcome.argument == "*.py"
    assert outcome.output.splitlines() == ["main.py", "src/image.py", "src/pkg/util.py"]


async def test_search_glob_with_a_slash_matches_the_path_under_path(ctx: ToolContext) -> None:
    """A glob with a slash matches the path under ``path``; ** spans dirs and {a,b} alternates."""
    _tree(ctx.cwd)
    outcome = await search(ctx, {"glob": "pkg/**/*.{ts,tsx}", "path": "src"})
    assert outcome.output.splitlines() == ["src/pkg/style.ts", "src/pkg/view.tsx"]


async def test_search_a_single_file(ctx: ToolContext) -> None:
    """search with path naming a file searches just that file."""
    _tree(ctx.cwd)
    outcome = await search(ctx, {"pattern": "helper", "path": "src/pkg/util.py"})
    assert outcome.output.splitlines()[0] == "src/pkg/util.py:1:def helper():"


async def test_search_without_matches_is_not_an_error(ctx: ToolContext) -> None:
    """A search that finds nothing succeeds and says so."""
    _tree(ctx.cwd)
    outcome = await search(ctx, {"pattern": "zebra"})
    assert outcome == ToolOutcome(
        "No lines match in 6 files searched under cwd.", is_error=False, argument="zebra"
    )


async def test_search_caps_matches(ctx: ToolContext) -> None:
    """A regex search stops at MAX_MATCHES lines and says it stopped."""
    (ctx.cwd / "many.txt").write_text("hit\n" * (MAX_MATCHES + 50))
    outcome = await search(ctx, {"pattern": "hit"})
    lines = outcome.output.splitlines()
    assert len(lines) == MAX_MATCHES + 1
    assert lines[-1].startswith(f"[stopped at {MAX_MATCHES} matches")


async def test_search_caps_listed_files(ctx: ToolContext) -> None:
    """A glob listing stops at MAX_FILES files and says it stopped."""
    for i in range(MAX_FILES + 5):
        (ctx.cwd / f"f{i:04d}.txt").write_text("")
    outcome = await search(ctx, {"glob": "*.txt"})
    lines = outcome.output.splitlines()
    assert len(lines) == MAX_FILES + 1
    assert lines[-1].startswith(f"[stopped at {MAX_FILES} files")


async def test_search_line_numbers_agree_with_read(ctx: ToolContext) -> None:
    """search counts lines on newlines alone, as read does, so its numbers work as offsets."""
    (ctx.cwd / "ff.txt").write_text("page one\f\r\nafter feed\r\nneedle\r\n")
    found = await search(ctx, {"pattern": "needle$"})
    assert found.output.splitlines()[0] == "ff.txt:3:needle"
    shown = await read(ctx, {"path": "ff.txt", "offset": 3, "limit": 1})
    assert shown.output == "     3\tneedle"


async def test_search_bad_glob_names_the_glob(ctx: ToolContext) -> None:
    """A glob that cannot be compiled is an error naming the glob."""
    outcome = await search(ctx, {"glob": "[z-a].py"})
    assert outcome.is_error
    assert "invalid glob '[z-a].py'" in outcome.output


async def test_search_bad_regex_names_the_pattern(ctx: ToolContext) -> None:
    """An invalid regex is an error naming the pattern."""
    outcome = await search(ctx, {"pattern": "foo(["})
    assert outcome.is_error
    assert "invalid regex 'foo(['" in outcome.output


async def test_search_missing_path_names_it(ctx: ToolContext) -> None:
    """A search under a missing path is an error naming the path."""
    outcome = await search(ctx, {"pattern": "x", "path": "ghost"})
    assert outcome.is_error
    assert "no such file or directory: ghost" in outcome.output


async def test_search_needs_a_pattern_or_a_glob(ctx: ToolContext) -> None:
    """search with neither pattern nor glob is an error asking for one."""
    outcome = await search(ctx, {"path": "."})
    assert outcome.is_error
    assert "give a pattern, a glob, or both" in outcome.output


# --- edit ------------------------------------------------------------------------------------


async def test_edit_replaces_a_unique_string_and_keeps_crlf(ctx: ToolContext) -> None:
    """edit replaces the one occurrence, names its line and leaves CRLF endings alone."""
    target = ctx.cwd / "app.py"
    target.write_bytes(b"a = 1\r\nb = 2\r\nc = 3\r\n")
    outcome = await edit(ctx, {"path": "app.py", "old_string": "b = 2", "new_string": "b = 20"})
    assert outcome == ToolOutcome(
        "Edited app.py: replaced 1 occurrence (at line 2).", is_error=False, argument="app.py"
    )
    assert target.read_bytes() == b"a = 1\r\nb = 20\r\nc = 3\r\n"


async def test_edit_refuses_an_ambiguous_string(ctx: ToolContext) -> None:
    """edit fails, counting the occurrences, when old_string is not unique; the file is kept."""
    target = ctx.cwd / "dup.txt"
    target.write_text("x\nx\nx\n")
    outcome = await edit(ctx, {"path": "dup.txt", "old_string": "x", "new_string": "y"})
    assert outcome.is_error
    assert "occurs 3 times in dup.txt" in outcome.output
    assert target.read_text() == "x\nx\nx\n"


async def test_edit_replace_all_replaces_every_occurrence(ctx: ToolContext) -> None:
    """edit with replace_all replaces every occurrence and says how many."""
    target = ctx.cwd / "dup.txt"
    target.write_text("keep\nx\nx\n")
    outcome = await edit(
        ctx, {"path": "dup.txt", "old_string": "x", "new_string": "y", "replace_all": True}
    )
    assert outcome.output == "Edited dup.txt: replaced 2 occurrences (first at line 2)."
    assert target.read_text() == "keep\ny\ny\n"


async def test_edit_missing_old_string_fails(ctx: ToolContext) -> None:
    """edit fails when old_string is not in the file, naming the file."""
    (ctx.cwd / "f.txt").write_text("hello\n")
    outcome = await edit(ctx, {"path": "f.txt", "old_string": "bye", "new_string": "x"})
    assert outcome.is_error
    assert "old_string was not found in f.txt" in outcome.output


async def test_edit_missing_file_names_the_path(ctx: ToolContext) -> None:
    """edit of a missing file is an error naming the path and pointing to write."""
    outcome = await edit(ctx, {"path": "gone.py", "old_string": "a", "new_string": "b"})
    assert outcome.is_error
    assert "no such file: gone.py" in outcome.output
    assert "write" in outcome.output


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [("", "x", "old_string is empty"), ("same", "same", "are the same")],
)
async def test_edit_refuses_empty_or_no_op_edits(
    ctx: ToolContext, old: str, new: str, problem: str
) -> None:
    """edit refuses an empty old_string and an edit that changes nothing."""
    (ctx.cwd / "f.txt").write_text("same\n")
    outcome = await edit(ctx, {"path": "f.txt", "old_string": old, "new_string": new})
    assert outcome.is_error
    assert problem in outcome.output


# --- write -----------------------------------------------------------------------------------


async def test_write_creates_parents_and_counts_bytes_and_lines(ctx: ToolContext) -> None:
    """write creates missing parent directories and reports bytes and lines written."""
    outcome = await write(ctx, {"path": "deep/er/new.txt", "content": "héllo\nworld"})
    assert outcome == ToolOutcome(
        "Created deep/er/new.txt: 12 bytes, 2 lines.", is_error=False, argument="deep/er/new.txt"
    )
    assert (ctx.cwd / "deep/er/new.txt").read_text() == "héllo\nworld"


async def test_write_overwrites_an_existing_file(ctx: ToolContext) -> None:
    """write over an existing file replaces its content and says it overwrote it."""
    (ctx.cwd / "f.txt").write_text("old content\n")
    outcome = await write(ctx, {"path": "f.txt", "content": "new\n"})
    assert outcome.output == "Overwrote f.txt: 4 bytes, 1 lines."
    assert (ctx.cwd / "f.txt").read_text() == "new\n"


async def test_write_onto_a_directory_fails(ctx: ToolContext) -> None:
    """write to a path that is a directory is an error naming it."""
    (ctx.cwd / "dir").mkdir()
    outcome = await write(ctx, {"path": "dir", "content": "x"})
    assert outcome.is_error
    assert "dir is a directory" in outcome.output


async def test_write_under_a_file_fails_with_the_os_reason(ctx: ToolContext) -> None:
    """write whose parent is a file is an error naming the path, not an exception."""
    (ctx.cwd / "plain").write_text("")
    outcome = await write(ctx, {"path": "plain/child.txt", "content": "x"})
    assert outcome.is_error
    assert outcome.output.startswith("write: cannot write plain/child.txt")


# --- shell -----------------------------------------------------------------------------------


async def test_shell_runs_in_cwd_and_reports_exit_code(ctx: ToolContext) -> None:
    """shell runs in cwd and returns its output followed by exit code 0."""
    outcome = await shell(ctx, {"command": "pwd"})
    assert outcome == ToolOutcome(f"{ctx.cwd}\n[exit code 0]", is_error=False, argument="pwd")


async def test_shell_nonzero_exit_is_an_error_with_stderr(ctx: ToolContext) -> None:
    """A non-zero exit is an error; stderr is interleaved with stdout in order."""
    outcome = await shell(ctx, {"command": "echo out; echo err >&2; echo more; exit 3"})
    assert outcome.is_error
    assert outcome.output == "out\nerr\nmore\n[exit code 3]"


async def test_shell_without_output_says_so(ctx: ToolContext) -> None:
    """A silent command reports that it printed nothing, then its exit code."""
    outcome = await shell(ctx, {"command": "true"})
    assert outcome.output == "(no output)\n[exit code 0]"


async def test_shell_timeout_kills_the_process_group(tmp_path: Path) -> None:
    """A command past the timeout is killed with its children within the timeout's reach."""
    ctx = ToolContext(cwd=tmp_path, shell_timeout=1.0)
    started = time.monotonic()
    outcome = await shell(ctx, {"command": "echo PID=$$; sleep 30 & echo PID=$!; wait"})
    elapsed = time.monotonic() - started
    assert outcome.is_error
    assert outcome.output.endswith("[timed out after 1 s; killed its process group]")
    assert 1.0 <= elapsed < 3.0
    pids = _pids(outcome)
    assert len(pids) == 2
    for pid in pids:
        assert await _wait_gone(pid), f"pid {pid} survived the timeout"


async def test_shell_kills_background_jobs_left_behind(ctx: ToolContext) -> None:
    """A background job left running is killed once the command exits, without a wait."""
    started = time.monotonic()
    outcome = await shell(ctx, {"command": "sleep 30 & echo PID=$!"})
    assert time.monotonic() - started < 3.0
    assert outcome.output.endswith("[exit code 0]")
    (pid,) = _pids(outcome)
    assert await _wait_gone(pid)


async def test_shell_cancelled_from_outside_leaves_nothing_running(ctx: ToolContext) -> None:
    """Cancelling a running shell call (as an interrupt cancels the turn) kills its process
    group at once: the shell and the ``sleep 30`` it waits on."""
    pidfile = ctx.cwd / "pid"
    command = f"sleep 30 & echo $$ $! > {pidfile}; wait"
    started = time.monotonic()
    with anyio.move_on_after(2.0):
        async with anyio.create_task_group() as group:
            group.start_soon(shell, ctx, {"command": command})
            while not pidfile.exists() or not pidfile.read_text().strip():  # noqa: ASYNC110
                await anyio.sleep(0.02)  # the pid file is written by another process
            group.cancel_scope.cancel()
    assert time.monotonic() - started < 2.0
    for pid in pidfile.read_text().split():
        assert await _wait_gone(int(pid), within=1.0), f"pid {pid} survived the cancellation"


async def test_shell_output_cap_keeps_head_and_tail(tmp_path: Path) -> None:
    """Output over the cap keeps its head and tail and says how many characters were cut."""
    ctx = ToolContext(cwd=tmp_path, output_cap=1_000)
    outcome = await shell(ctx, {"command": "seq 1 100000"})
    total = sum(len(f"{i}\n") for i in range(1, 100_001))
    assert outcome.output.startswith("1\n2\n3\n")
    assert outcome.output.endswith("99999\n100000\n[exit code 0]")
    assert f"[… {total - 1_000:,} of {total:,} characters cut …]" in outcome.output
    assert len(outcome.output) < 1_100


async def test_shell_argument_is_one_short_line(ctx: ToolContext) -> None:
    """The receipt argument is the command on one line, cut to 120 characters."""
    command = "echo start\n" + "true && " * 40 + "echo end"
    outcome = await shell(ctx, {"command": command})
    assert len(outcome.argument) == 120
    assert outcome.argument.startswith("echo start true && ")
    assert outcome.argument.endswith("…")


async def test_shell_empty_command_is_an_error(ctx: ToolContext) -> None:
    """A blank command is an error, not a shell started for nothing."""
    outcome = await shell(ctx, {"command": "   "})
    assert outcome.is_error
    assert "command is empty" in outcome.output


async def test_shell_missing_cwd_is_an_error(tmp_path: Path) -> None:
    """A cwd that does not exist is an error naming it."""
    ctx = ToolContext(cwd=tmp_path / "gone")
    outcome = await shell(ctx, {"command": "true"})
    assert outcome.is_error
    assert str(tmp_path / "gone") in outcome.output


# --- dispatch and schemas --------------------------------------------------------------------


async def test_run_tool_dispatches_by_name(ctx: ToolContext) -> None:
    """run_tool runs the named tool with the given arguments."""
    outcome = await run_tool("write", {"path": "x.txt", "content": "hi\n"}, ctx)
    assert outcome.output == "Created x.txt: 3 bytes, 1 lines."
    assert (await run_tool("read", {"path": "x.txt"}, ctx)).output == "     1\thi"


async def test_run_tool_unknown_tool_is_an_error(ctx: ToolContext) -> None:
    """An unknown tool name is an error that lists the tools there are."""
    outcome = await run_tool("delete", {"path": "x"}, ctx)
    assert outcome.is_error
    assert outcome.output == (
        "Unknown tool 'delete'; the tools are read, search, edit, write, shell."
    )


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("read", {}, "read: missing required argument 'path'."),
        ("edit", {"path": "f", "old_string": "a"}, "edit: missing required argument 'new_string'."),
        ("read", {"path": 3}, "read: argument 'path' must be a string, got an integer."),
        (
            "read",
            {"path": "f", "offset": "2"},
            "read: argument 'offset' must be an integer, got a string.",
        ),
        (
            "read",
            {"path": "f", "limit": True},
            "read: argument 'limit' must be an integer, got a boolean.",
        ),
        (
            "read",
            {"path": "f", "offset": 1.5},
            "read: argument 'offset' must be an integer, got a number.",
        ),
        ("read", {"path": "f", "offset": 0}, "read: argument 'offset' must be at least 1, got 0."),
        (
            "edit",
            {"path": "f", "old_string": "a", "new_string": "b", "replace_all": 1},
            "edit: argument 'replace_all' must be a boolean, got an integer.",
        ),
        (
            "shell",
            {"command": "ls", "timeout": 5},
            "shell: unknown argument 'timeout'; it takes command.",
        ),
        ("write", ["path", "content"], "write: arguments must be an object, got an array."),
    ],
)
async def test_run_tool_rejects_arguments_that_break_the_schema(
    ctx: ToolContext, name: str, arguments: dict[str, object], problem: str
) -> None:
    """Missing required keys, wrong types, unknown keys and values under a minimum are errors."""
    outcome = await run_tool(name, arguments, ctx)
    assert outcome.is_error
    assert outcome.output == problem


async def test_run_tool_turns_a_crash_into_an_outcome(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception escaping a tool becomes an error outcome and one logged event."""

    async def explode(ctx: ToolContext, arguments: object) -> ToolOutcome:
        msg = "kaboom"
        raise RuntimeError(msg)

    monkeypatch.setitem(TOOLS, "explode", Tool("explode", "Fails.", {}, explode))
    with capture_logs() as logs:
        outcome = await run_tool("explode", {}, ctx)
    assert outcome.is_error
    assert outcome.output == "explode failed unexpectedly: RuntimeError: kaboom"
    assert [entry["event"] for entry in logs] == ["tool_crashed"]


async def test_null_optional_arguments_count_as_absent(ctx: ToolContext) -> None:
    """A null optional argument is treated as omitted, as OpenAI strict schemas send it."""
    (ctx.cwd / "f.txt").write_text("one\n")
    outcome = await run_tool("read", {"path": "f.txt", "offset": None, "limit": None}, ctx)
    assert outcome.output == "     1\tone"


def test_schemas_are_strict_and_complete() -> None:
    """Every schema is a closed object whose properties all have a type and a description."""
    for name, tool in TOOLS.items():
        assert tool.name == name
        assert tool.description
        schema = tool.parameters
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])
        for spec in schema["properties"].values():
            assert spec["type"] in {"string", "integer", "boolean"}
            assert spec["description"]


def test_tool_names_carry_the_categories_windowing_expects() -> None:
    """read and search are re-readable; edit, write and shell are actions."""
    categories = {name: categorize(name) for name in TOOLS}
    assert categories == {
        "read": "reread",
        "search": "reread",
        "edit": "action",
        "write": "action",
        "shell": "action",
    }
