"""What a call names and what its receipt says (``condensate.core.receipts``): one rule for every
engine, and a receipt that retention can read back."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from condensate.core.receipts import ARGUMENT_CHARS, argument_of, files_named, named_by, receipt
from condensate.events import ToolResult, now_utc


def test_a_call_names_its_file_before_its_command_pattern_or_query():
    """The first of file_path, path, notebook_path, command, cmd, pattern, url, query wins:
    Claude Code's Grep names its path, a shell call its command; nothing else names none."""
    assert argument_of("Read", {"file_path": "/a/b.py", "limit": 3}) == "/a/b.py"
    assert argument_of("Grep", {"pattern": "TODO", "path": "src"}) == "src"
    assert argument_of("Bash", {"command": "ls", "description": "list"}) == "ls"
    assert argument_of("exec_command", {"cmd": ["git", "status"]}) == "git status"
    assert argument_of("WebFetch", {"url": "https://x.test", "prompt": "p"}) == "https://x.test"
    assert argument_of("other", {"other": 1}) == ""


def test_a_long_argument_is_one_short_line():
    """Newlines fold to spaces and a long argument is cut to ARGUMENT_CHARS with an ellipsis."""
    named = argument_of("Bash", {"command": "echo one\n" + "x" * 300})
    assert len(named) == ARGUMENT_CHARS
    assert named.startswith("echo one x")
    assert named.endswith("…")


def test_a_patch_names_its_files_from_its_paths_or_its_text():
    """An apply_patch call names every file it touches: Codex's list of paths, or the files
    a patch's text updates, adds or deletes; files_named reads them back."""
    codex = argument_of("apply_patch", {"path": "a.py", "paths": ["a.py", "b/c.py"]})
    assert codex == "a.py, b/c.py"
    text = "*** Begin Patch\n*** Update File: x.py\n@@\n*** Add File: y.py\n*** End Patch"
    assert argument_of("apply_patch", {"input": text}) == "x.py, y.py"
    assert files_named("apply_patch", codex) == ["a.py", "b/c.py"]
    assert files_named("Read", "/a/b, c.py") == ["/a/b, c.py"]


@given(
    tool=st.sampled_from(["read", "Bash", "mcp__fs__read_file", "apply_patch"]),
    argument=st.text(st.characters(blacklist_characters="\n\r"), max_size=120),
    seq=st.integers(1, 10**9),
    tokens=st.integers(0, 10**7),
    failed=st.booleans(),
)
def test_a_receipt_names_what_it_cleared(tool, argument, seq, tokens, failed):
    """named_by reads back the tool and the argument a receipt was written with (an
    argument that itself spells a receipt's ending aside); a call that named nothing has a
    receipt that names nothing."""
    assume("tokens cleared" not in argument)
    result = ToolResult(
        at=now_utc(), call_id="c", tool=tool, argument=argument, output="o", is_error=failed
    )
    line = receipt(result, seq, tokens)
    assert named_by(line) == ((tool, argument) if argument else None)
