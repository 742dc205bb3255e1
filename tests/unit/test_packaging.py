"""What the distribution says of itself holds: its license is the file it ships, its version is
``condensate.__version__`` (for the installed metadata and ``condensate --version``), the CLI
versions the code pins (what ``condensate doctor`` tells an operator to install) are the ones
``package.json`` pins, and every development tool is pinned inside the dev extra's range."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import condensate
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


def test_the_installed_distribution_has_the_packages_version():
    """pyproject.toml reads its version from ``condensate.__version__`` alone, and the installed
    metadata carries it (after a bump, ``scripts/setup`` installs the package again)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "condensate.__version__"}
    assert metadata.version("condensate-sidecar") == condensate.__version__


def test_condensate_version_prints_the_packages_version():
    """The installed ``condensate`` command's ``--version`` prints ``condensate.__version__``."""
    command = Path(sys.executable).with_name("condensate")
    done = subprocess.run(
        [str(command), "--version"], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == condensate.__version__


def _pins() -> dict[str, Requirement]:
    lines = (ROOT / "requirements-dev.txt").read_text().splitlines()
    wanted = [line for line in lines if line.strip() and not line.startswith(("#", "-"))]
    return {canonicalize_name(r.name): r for r in map(Requirement, wanted)}


def test_every_development_tool_is_pinned_inside_the_dev_extras_range():
    """Each requirement of the dev extra has one exact pin in requirements-dev.txt that its
    range allows, and requirements-dev.txt installs the package with that extra."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["dev"]
    assert "-e .[dev]" in (ROOT / "requirements-dev.txt").read_text().splitlines()
    pins = _pins()
    for requirement in map(Requirement, extra):
        pin = pins[canonicalize_name(requirement.name)]
        (spec,) = pin.specifier
        assert spec.operator == "==", pin
        assert requirement.specifier.contains(spec.version), (requirement, pin)
