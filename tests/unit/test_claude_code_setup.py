"""The Claude Code engine's setup rules: which CLI it runs, which versions it accepts, and how
a thread's permissions and tool results are translated. No CLI is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.claude_code import (
    PINNED_VERSION,
    _output,
    check,
    check_version,
    flags,
    resolve_binary,
)
from condensate.engine import ThreadSpec
from condensate.errors import ConfigError, Refused


def fake_cli(tmp_path: Path, version: str) -> str:
    path = tmp_path / f"claude-{version}"
    path.write_text(f"#!/bin/sh\necho '{version} (Claude Code)'\n")
    path.chmod(0o755)
    return str(path)


def test_a_missing_binary_names_what_to_install(tmp_path):
    """A configured CLI that does not exist is refused with the install commands."""
    with pytest.raises(ConfigError) as error:
        resolve_binary(str(tmp_path / "no-such-claude"))
    assert "npm ci" in str(error.value)
    assert f"@anthropic-ai/claude-code@{PINNED_VERSION}" in str(error.value)


def test_another_minor_version_is_refused(tmp_path):
    """A CLI of another major.minor than the pinned one is refused, naming both versions."""
    with pytest.raises(ConfigError) as error:
        check_version(fake_cli(tmp_path, "2.0.77"))
    assert "2.0.77" in str(error.value)
    assert PINNED_VERSION in str(error.value)


def test_a_patch_release_of_the_pinned_minor_is_accepted(tmp_path):
    """Only major.minor must match the pin."""
    assert check_version(fake_cli(tmp_path, "2.1.999")) == "2.1.999"


def spec(permissions: str = "default", tools: tuple[str, ...] = ()) -> ThreadSpec:
    return ThreadSpec(
        engine="claude",
        model="anthropic:claude-sonnet-4-5",
        cwd="/w",
        brief="b",
        tools=tools,
        permissions=permissions,
    )


def flag(args: list[str], name: str) -> str | None:
    """The value after ``name`` in ``args``, None when absent."""
    return args[args.index(name) + 1] if name in args else None


@pytest.mark.parametrize(
    ("permissions", "mode"),
    [
        ("default", "bypassPermissions"),
        ("workspace", "acceptEdits"),
        ("read-only", "dontAsk"),
        ("acceptEdits", "acceptEdits"),
        ("plan", "plan"),
    ],
)
def test_permissions_become_a_claude_mode(permissions, mode):
    """Default runs unattended, the confined values get their mode, Claude Code's own modes
    pass through."""
    assert flag(flags(spec(permissions), context_tools=False), "--permission-mode") == mode


def test_default_permissions_offer_every_tool_unless_the_thread_names_some():
    """Without a tools list no --tools is given (Claude Code's own set); with one, exactly
    those tools are offered, never through --allowedTools."""
    assert "--tools" not in flags(spec(), context_tools=False)
    args = flags(spec(tools=("Read", "Bash")), context_tools=False)
    assert flag(args, "--tools") == "Read,Bash"
    assert "--allowedTools" not in args


def test_workspace_is_restricted_to_cwd_without_code_running_tools_or_prompts():
    """workspace runs --restricted (file tools confined to cwd, no Bash), prompts denied; a
    tools list loses the tools that run code."""
    args = flags(spec("workspace", ("Read", "Write", "Bash", "WebFetch")), context_tools=False)
    assert "--restricted" in args
    assert flag(args, "--permission-prompts") == "none"
    assert flag(args, "--tools") == "Read,Write"
    assert "--tools" not in flags(spec("workspace"), context_tools=False)


def test_read_only_offers_only_the_read_only_tools():
    """read-only offers Read, Grep and Glob (those of the tools list, when there is one),
    restricted to cwd, prompts denied."""
    args = flags(spec("read-only"), context_tools=False)
    assert "--restricted" in args
    assert flag(args, "--permission-prompts") == "none"
    assert flag(args, "--tools") == "Glob,Grep,Read"
    assert (
        flag(flags(spec("read-only", ("Read", "Edit", "Bash")), context_tools=False), "--tools")
        == "Read"
    )


def test_a_confined_head_keeps_its_condensate_tools():
    """A head with a tools list keeps ToolSearch (its Condensate tools hide behind it), and
    outside bypassPermissions its Condensate tools are allowed without a prompt."""
    args = flags(spec("read-only"), context_tools=True)
    assert flag(args, "--tools") == "Glob,Grep,Read,ToolSearch"
    assert flag(args, "--allowedTools") == "mcp__condensate"
    assert "--allowedTools" not in flags(spec(), context_tools=True)


def test_unknown_permissions_are_refused_as_unsupported():
    """Permissions Claude Code cannot enforce are refused (422), listing the ones it can."""
    with pytest.raises(Refused) as refused:
        check(spec("everything"))
    assert refused.value.code == "unsupported-permissions"
    assert "workspace" in str(refused.value)
    assert "bypassPermissions" in str(refused.value)


def test_a_tool_claude_code_does_not_have_is_refused():
    """A tools list naming something that is not a Claude Code tool is refused (422),
    naming it."""
    with pytest.raises(Refused) as refused:
        check(spec(tools=("Read", "read_file")))
    assert refused.value.code == "unsupported-tools"
    assert "'read_file'" in str(refused.value)


def test_block_content_becomes_text():
    """A tool result's content blocks become one text; non-text blocks are named."""
    assert _output("plain") == "plain"
    assert _output([{"type": "text", "text": "a"}, {"type": "image"}]) == "a\n[image]"
    assert _output(None) == ""


def test_ask_sends_claude_codes_permission_prompts_to_condensate():
    """ask: Claude Code's prompting mode, its prompts sent over stdio to Condensate."""
    args = flags(spec("ask"), context_tools=False)
    assert flag(args, "--permission-mode") == "manual"
    assert flag(args, "--permission-prompt-tool") == "stdio"
