"""``condensate doctor`` where the pinned CLIs are not beside the code: run from a copy of the
package (no checkout, no ``node_modules``, as after ``pipx install``) with an empty PATH (as
under systemd, or worse). A missing CLI is named with the exact command that installs the
pinned version and the setting that points at one; a CLI the setting names, or one in
``~/.local/bin``, is reported with its version."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.claude_code import PINNED_VERSION as CLAUDE_PINNED
from adapters.codex._cli import PINNED_VERSION as CODEX_PINNED
from tests.integration.daemon import REPO

CLAUDE = REPO / "node_modules" / ".bin" / "claude"
CODEX = REPO / "node_modules" / ".bin" / "codex"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two packages copied alone into a directory of their own: what a wheel installs."""
    root = tmp_path_factory.mktemp("site-packages")
    for package in ("condensate", "adapters"):
        shutil.copytree(
            REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return root


def doctor(installed: Path, home: Path, **settings: str) -> dict[str, Any]:
    """``condensate doctor --json`` from the copy, PATH empty, HOME ``home``."""
    home.mkdir(exist_ok=True)
    env = {
        "HOME": str(home),
        "PATH": "",
        "PYTHONPATH": str(installed),
        "CONDENSATE_HOME": str(home / "state"),
        **settings,
    }
    done = subprocess.run(
        [sys.executable, "-m", "condensate", "doctor", "--json"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_a_missing_cli_is_named_with_its_install_command_and_setting(installed, tmp_path):
    """With no CLI anywhere, doctor says for each: not found, where it looked, the npm command
    that installs the pinned version (and where a user without rights puts it), and the
    setting that names an existing binary; no checkout means no `npm ci` advice."""
    data = doctor(installed, tmp_path / "home")
    claude, codex = data["claude"], data["codex"]
    assert claude.startswith("unavailable: The Claude Code CLI (`claude`) was not found")
    assert f"`npm install -g @anthropic-ai/claude-code@{CLAUDE_PINNED}`" in claude
    assert f"`npm install -g --prefix ~/.local @anthropic-ai/claude-code@{CLAUDE_PINNED}`" in (
        claude
    )
    assert str(tmp_path / "home" / ".local" / "bin") in claude
    assert "CONDENSATE_CLAUDE_BINARY" in claude
    assert "npm ci" not in claude
    assert codex.startswith("unavailable: The Codex CLI (`codex`) was not found")
    assert f"`npm install -g @openai/codex@{CODEX_PINNED}`" in codex
    assert "CONDENSATE_CODEX_BINARY" in codex


def test_the_setting_names_the_pinned_binary_and_doctor_shows_its_version(installed, tmp_path):
    """CONDENSATE_CLAUDE_BINARY and CONDENSATE_CODEX_BINARY pointing at the real pinned CLIs:
    doctor runs each and reports its version and path, PATH empty."""
    data = doctor(
        installed,
        tmp_path / "home",
        CONDENSATE_CLAUDE_BINARY=str(CLAUDE),
        CONDENSATE_CODEX_BINARY=str(CODEX),
    )
    assert data["claude"] == f"{CLAUDE_PINNED} ({CLAUDE})"
    assert data["codex"].startswith(f"{CODEX_PINNED} (")
    assert data["codex"].endswith("/bin/codex)")  # the native binary npm's wrapper starts


def test_a_cli_in_local_bin_is_found_without_path_or_setting(installed, tmp_path):
    """The pinned claude linked into ~/.local/bin (npm install -g --prefix ~/.local) is found
    with PATH empty and no setting."""
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "claude").symlink_to(CLAUDE.resolve())
    data = doctor(installed, home)
    assert data["claude"] == f"{CLAUDE_PINNED} ({home / '.local' / 'bin' / 'claude'})"
