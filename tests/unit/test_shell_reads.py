"""Which shell commands only read (``shell_reads``): a read's output can be had again, so a
cheap tier clears it as it clears a file read; anything else is an action."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from condensate.core.receipts import categorize
from condensate.core.shell_reads import reads_only, words
from condensate.events import AssistantMessage, ToolCall, ToolResult
from condensate.testing.threads import ThreadBuilder

READS = [
    "cat src/app.py",
    "sed -n '1,120p' src/app.py",
    "head -50 README.md",
    "tail -n 20 log.txt",
    "grep -rn 'def main' src",
    "rg TODO -g '*.py'",
    "ls -la src",
    "find . -name '*.py' -not -path './.venv/*'",
    "git show HEAD~1:src/app.py",
    "git diff --stat",
    "git log --oneline -20",
    "git status",
    "cat a.txt 2>&1 | head -5",
    "grep -c x f 2>/dev/null || true",
    "cd src && ls",
    "wc -l *.py | sort -n",
    "bash -lc 'cat pyproject.toml'",
    "LC_ALL=C sort names.txt | uniq -c",
    "nl -ba src/app.py | sed -n 10,40p",
    "find src -type f | xargs grep -l import",
    "awk '{print $1}' data.csv",
]
ACTIONS = [
    "pytest -q",
    "python -m build",
    "grep -rn foo src > out.txt",
    "echo hi >> notes.md",
    "cat a | tee b",
    "sed -i 's/a/b/' f.py",
    "sed -ni '1p' f.py",
    "find . -name '*.pyc' -delete",
    "find . -name '*.py' -exec rm {} \\;",
    "cat $(ls)",
    "cat `ls`",
    "ls &",
    "(cd src && ls)",
    "git checkout main",
    "git branch -D old",
    "rm -rf build",
    "cat <(ls)",
    "awk '{print > \"out\"}' f",
    "bash -c 'rm -rf x'",
    "cat 'unclosed",
    "cat a.txt\nrm b.txt",
    "cat file_with_a_long_name_that_the_log_cut…",
    "",
]


@pytest.mark.parametrize("command", READS)
def test_a_command_that_only_reads_is_a_read(command: str) -> None:
    """Readers in pipelines and lists, redirections to a descriptor or /dev/null, harmless
    cd and assignments, shells read through."""
    assert reads_only(command)


@pytest.mark.parametrize("command", ACTIONS)
def test_a_command_that_writes_or_runs_anything_else_is_an_action(command: str) -> None:
    """A write by redirection or by the command itself, a substitution, a subshell, a job in
    the background, an unknown program, an unparsable or cut command."""
    assert not reads_only(command)


def test_shell_tools_take_their_category_from_the_command() -> None:
    """Claude Code's Bash, Codex's shell and the native shell: a read command's result is
    re-readable, any other an action; other tools keep their name's category."""
    assert categorize("Bash", "git diff") == "reread"
    assert categorize("shell", "cat a.py") == "reread"
    assert categorize("exec_command", "pytest -q") == "action"
    assert categorize("Bash") == "action"
    assert categorize("Read", "x.py") == "reread"
    assert categorize("Edit", "cat x") == "action"


def test_the_view_reads_a_shell_calls_whole_command() -> None:
    """The view takes a shell result's category from the command its call ran, not from the
    one-line argument logged with it: a script whose second line removes a file is an action
    even though its argument reads as a cat."""
    b = ThreadBuilder()
    b.user("look around", 20)
    read = ToolCall(id="r", name="Bash", arguments={"command": "cat a.py"})
    script = ToolCall(id="s", name="Bash", arguments={"command": "cat a.py\nrm b.py"})
    b.add(AssistantMessage(at=b.tick(), tool_calls=(read, script)), 30)
    for call in (read, script):
        b.add(
            ToolResult(at=b.tick(), call_id=call.id, tool="Bash", argument="cat a.py", output="x")
        )
    categories = {e.call_id: e.category for e in b.view.entries if e.role == "tool"}
    assert categories == {"r": "reread", "s": "action"}


def _lexed(command: str) -> list[str] | None:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:
        return None


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab-=./1 \t\r\x0b\u00a0'\"\\#;&|<>()$*~"), max_size=24))
@example("pytest -q")
@example("git status --short")
@example("a\u00a0b")
@example("a#b c")
def test_words_are_the_lexers_words(command: str) -> None:
    """Plain words split without the lexer come out as the lexer would give them; anything
    else goes through the lexer."""
    assert words(command) == _lexed(command)
