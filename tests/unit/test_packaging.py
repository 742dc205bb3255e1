"""What the distribution says of itself holds: its license is the file it ships, and the CLI
versions the code pins (what ``condensate doctor`` tells an operator to install) are the ones
``package.json`` pins."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from adapters.claude_code import _cli as claude_cli
from adapters.codex import _cli as codex_cli

ROOT = Path(__file__).resolve().parents[2]


def test_the_license_file_is_mit_and_the_distribution_ships_it():
    """pyproject.toml declares MIT and names LICENSE as its license file, which holds the MIT
    text under The Condensate authors' copyright."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 The Condensate authors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_the_pinned_cli_versions_are_package_jsons():
    """Each CLI engine pins the version package.json installs (a pipx install has no
    package.json: the pin it checks and names is the code's)."""
    pins = json.loads((ROOT / "package.json").read_text())["dependencies"]
    for cli in (claude_cli.CLI, codex_cli.CLI):
        assert pins[cli.package] == cli.pinned
