"""The systemd user unit: it verifies with systemd-analyze and runs what the docs' service
page says; and ``condensate serve`` exits with the status the unit reads: 78 (not restarted)
for a setting that cannot work, 75 (restarted) for a port another process holds."""

from __future__ import annotations

import configparser
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "condensate.service"


def service() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(UNIT)
    return parser["Service"]


def serve(home: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    """``condensate serve`` in a subprocess with only these CONDENSATE_* settings, run to its
    exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
    env.update(CONDENSATE_HOME=str(home), CONDENSATE_LOG_FORMAT="json", **settings)
    return subprocess.run(
        [sys.executable, "-m", "condensate", "serve"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def one_sentence(stderr: str) -> str:
    (line,) = stderr.strip().splitlines()
    assert line.startswith("condensate: ")
    assert line.endswith(".")
    assert "Traceback" not in stderr
    return line


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


def test_unit_stops_the_daemon_before_its_clis_and_grants_no_privileges():
    """KillMode=mixed sends SIGTERM to the daemon alone (it ends its CLIs itself, then systemd
    SIGKILLs what is left), and NoNewPrivileges=yes keeps setuid programs from raising what
    the agents run."""
    unit = service()
    assert unit["KillMode"] == "mixed"
    assert unit["KillSignal"] == "SIGTERM"
    assert unit["NoNewPrivileges"] == "yes"


def test_a_bad_setting_exits_78_which_the_unit_does_not_restart(tmp_path):
    """`condensate serve` with CONDENSATE_PORT=notanumber exits 78 (EX_CONFIG), the status the
    unit's RestartPreventExitStatus names, with one sentence naming the variable."""
    done = serve(tmp_path / "home", CONDENSATE_PORT="notanumber")
    assert done.returncode == 78
    assert "CONDENSATE_PORT" in one_sentence(done.stderr)
    assert service()["RestartPreventExitStatus"].split() == ["78"]


def test_an_unusable_state_directory_exits_78(tmp_path):
    """A CONDENSATE_HOME under a regular file cannot be made: exit 78, one sentence naming
    the directory and the variable."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = serve(blocker / "home", CONDENSATE_PORT="0")
    assert done.returncode == 78
    line = one_sentence(done.stderr)
    assert str(blocker / "home") in line
    assert "CONDENSATE_HOME" in line


def test_a_busy_port_exits_75_which_the_unit_restarts(tmp_path):
    """A port another process listens on is no setting's fault and may come free: exit 75
    (EX_TEMPFAIL), which Restart=on-failure retries, with one sentence naming the port."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = serve(tmp_path / "home", CONDENSATE_PORT=str(port))
    assert done.returncode == 75
    line = one_sentence(done.stderr)
    assert f"Port {port} " in line
    assert "CONDENSATE_PORT" in line
    assert service()["Restart"] == "on-failure"
    assert "75" not in service()["RestartPreventExitStatus"].split()
