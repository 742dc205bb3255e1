"""The systemd user unit: it verifies with systemd-analyze and runs what the README says."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "condensate.service"


def test_unit_declares_notify_restart_and_an_environment_file():
    """The unit is Type=notify, restarts on failure, reads an optional environment file and
    runs `condensate serve`."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(UNIT)
    service = parser["Service"]
    assert service["Type"] == "notify"
    assert service["Restart"] == "on-failure"
    assert service["EnvironmentFile"].startswith("-")
    assert service["ExecStart"].endswith("condensate serve")
    assert parser["Install"]["WantedBy"] == "default.target"


def test_unit_raises_the_file_limit_and_keeps_files_private():
    """The unit sets LimitNOFILE well above the usual 1,024 (the HTTP edge holds up to 512
    connections) and a 0077 umask."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(UNIT)
    service = parser["Service"]
    assert int(service["LimitNOFILE"].split(":")[0]) >= 4096
    assert service["UMask"] == "0077"


def test_unit_passes_systemd_analyze_verify(tmp_path):
    """`systemd-analyze verify` accepts the unit with the command where ExecStart expects it
    (or, without systemd-analyze, the unit at least parses as an INI file)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        configparser.ConfigParser(strict=True, interpolation=None).read(UNIT)
        return
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "condensate").symlink_to(Path(sys.executable).parent / "condensate")
    unit_dir = tmp_path / "units"
    unit_dir.mkdir()
    shutil.copy(UNIT, unit_dir / UNIT.name)
    result = subprocess.run(
        [analyze, "verify", str(unit_dir / UNIT.name)],
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "condensate" not in result.stderr, result.stderr
