"""Where a pinned CLI is found when no setting names it and no checkout holds it (a ``pipx``
install, a systemd unit's short PATH): PATH first, then where ``npm install -g`` puts a CLI,
worked out from real files without running npm."""

from __future__ import annotations

from pathlib import Path

from adapters._pinned import find, npm_bin_dirs, npm_prefix


def executable(directory: Path, name: str = "claude") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_a_cli_in_local_bin_is_found_with_an_empty_path(tmp_path):
    """``~/.local/bin`` (where ``npm install -g --prefix ~/.local`` and pipx put commands) is
    searched even when PATH is empty."""
    cli = executable(tmp_path / ".local" / "bin")
    assert find("claude", {"PATH": ""}, tmp_path) == str(cli)


def test_path_comes_before_npms_places(tmp_path):
    """A CLI on PATH wins over one in ``~/.npm-global/bin``."""
    on_path = executable(tmp_path / "on-path")
    executable(tmp_path / ".npm-global" / "bin")
    assert find("claude", {"PATH": str(tmp_path / "on-path")}, tmp_path) == str(on_path)


def test_the_prefix_in_npmrc_is_read_with_its_tilde(tmp_path):
    """``prefix=~/tools`` in ``~/.npmrc`` makes ``~/tools/bin`` npm's global bin."""
    (tmp_path / ".npmrc").write_text("fund=false\nprefix = ~/tools\n")
    cli = executable(tmp_path / "tools" / "bin")
    assert npm_prefix({}, tmp_path) == tmp_path / "tools"
    assert find("claude", {}, tmp_path) == str(cli)


def test_the_prefix_variable_beats_the_npmrc(tmp_path):
    """NPM_CONFIG_PREFIX (``${VAR}`` expanded) is npm's prefix whatever ``~/.npmrc`` says."""
    (tmp_path / ".npmrc").write_text("prefix=/nowhere\n")
    environ = {"NPM_CONFIG_PREFIX": "${BASE}/npm", "BASE": str(tmp_path)}
    assert npm_prefix(environ, tmp_path) == tmp_path / "npm"
    assert npm_bin_dirs(environ, tmp_path)[0] == tmp_path / "npm" / "bin"


def test_the_bin_directory_of_the_node_on_path_is_searched(tmp_path):
    """npm's default prefix is node's own: the directory of the ``node`` found on PATH."""
    node_bin = tmp_path / "node" / "bin"
    executable(node_bin, "node")
    cli = executable(node_bin, "codex")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "node").symlink_to(node_bin / "node")
    assert find("codex", {"PATH": str(elsewhere)}, tmp_path) == str(cli)


def test_nvms_newest_node_comes_first(tmp_path):
    """Of nvm's nodes, the newest version's bin directory is searched first (by number, not
    by name: v20 before v9)."""
    versions = tmp_path / ".nvm" / "versions" / "node"
    executable(versions / "v9.11.2" / "bin")
    newest = executable(versions / "v20.10.0" / "bin")
    assert find("claude", {}, tmp_path) == str(newest)


def test_nothing_found_is_none(tmp_path):
    """With the CLI nowhere, nothing is found (the caller says what to install)."""
    assert find("claude", {"PATH": ""}, tmp_path) is None
