"""The Claude Code engine's setup rules: which CLI it runs, which versions it accepts, and how
a thread's permissions and tool results are translated. No CLI is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.claude_code import (
    PINNED_VERSION,
    _argument,
    _output,
    check_version,
    permission_mode,
    resolve_binary,
)
from condensate.errors import ConfigError


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


@pytest.mark.parametrize(
    ("permissions", "mode"),
    [("default", "bypassPermissions"), ("acceptEdits", "acceptEdits"), ("plan", "plan")],
)
def test_permissions_become_a_claude_mode(permissions, mode):
    """A thread's default permissions run unattended; Claude Code's own modes pass through."""
    assert permission_mode(permissions) == mode


def test_unknown_permissions_are_refused():
    """Permissions Claude Code has no mode for are refused, listing the ones it has."""
    with pytest.raises(ConfigError, match="bypassPermissions"):
        permission_mode("everything")


def test_a_result_names_its_path_command_or_pattern():
    """The receipt argument comes from the call's path, command or pattern, shortened."""
    assert _argument({"file_path": "/a/b.py", "limit": 3}) == "/a/b.py"
    assert _argument({"command": "ls", "description": "list"}) == "ls"
    assert _argument({"pattern": "x" * 300}).endswith("...")
    assert _argument({"other": 1}) == ""


def test_block_content_becomes_text():
    """A tool result's content blocks become one text; non-text blocks are named."""
    assert _output("plain") == "plain"
    assert _output([{"type": "text", "text": "a"}, {"type": "image"}]) == "a\n[image]"
    assert _output(None) == ""
