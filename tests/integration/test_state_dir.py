"""The state directory: 0700 with every file 0600 whichever command creates it (``serve``,
``doctor``, ``view``), tightened at start when found wider, and held by one daemon at a time
(a second ``condensate serve`` on the same home names the one that holds it and exits 75,
which systemd retries).

Every command runs as a real subprocess; the daemons run on the fake model server.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from adapters import _child
from condensate.client import DaemonClient
from condensate.settings import Settings
from condensate.testing.fake_model import FakeModelServer
from tests.integration.daemon import REPO, DaemonProcess

SERVE_FILES = {"condensate.db", "condensate.db-wal", "condensate.db-shm", "daemon.json", "token"}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _modes(home: Path) -> dict[str, int]:
    """Every path under ``home`` (and ``home`` itself, as ".") with its mode."""
    found = {".": _mode(home)}
    for root, dirs, files in os.walk(home):
        for name in (*dirs, *files):
            path = Path(root, name)
            found[str(path.relative_to(home))] = _mode(path)
    return found


def _private(modes: dict[str, int]) -> bool:
    return all(mode & 0o077 == 0 for mode in modes.values())


def _condensate(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
    environment.update({"CONDENSATE_HOME": str(home), **(env or {})})
    return subprocess.Popen(
        [sys.executable, "-m", "condensate", *args],
        cwd=REPO,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = _condensate(home, *args, env=env)
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


@pytest.fixture
def serving(fake: FakeModelServer, tmp_path: Path) -> Iterator[DaemonProcess]:
    """A daemon on a new home; the harness writes its output to home/daemon.log (0644 under
    the usual umask), which the daemon tightens at start."""
    home = tmp_path / "state"
    process = DaemonProcess(home, fake.url)
    home.mkdir(mode=0o700)
    process.start()
    try:
        yield process
    finally:
        process.close()


def test_serve_makes_the_directory_0700_and_its_files_0600(serving: DaemonProcess) -> None:
    """While a daemon runs, its state directory is 0700 and the log (with its -wal and -shm),
    daemon.json, token and lock are 0600: nothing in it is open to group or others."""
    modes = _modes(serving.home)
    assert modes["."] == 0o700
    assert set(modes) >= SERVE_FILES, sorted(modes)
    for name in SERVE_FILES | {"daemon.lock"}:
        assert modes[name] == 0o600, (name, oct(modes[name]))
    assert _private(modes), {k: oct(v) for k, v in modes.items()}


@pytest.mark.parametrize("command", [("doctor",), ("view", "t-000000000000")])
def test_doctor_and_view_create_a_private_directory(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """`doctor` and `view` on a home that does not exist yet create it 0700 with a 0600 log."""
    home = tmp_path / "fresh" / "state"
    _run(home, *command)
    assert _mode(home) == 0o700
    assert _mode(home / "condensate.db") == 0o600
    assert _private(_modes(home)), {k: oct(v) for k, v in _modes(home).items()}


def test_a_wider_directory_is_tightened_at_start_and_named(tmp_path: Path) -> None:
    """A home left 0755 with a 0644 log and a 0755 subdirectory is tightened by the next
    command, and its warning names what it tightened."""
    home = tmp_path / "state"
    home.mkdir()
    home.chmod(0o755)
    code, _, err = _run(home, "doctor")
    assert code == 0, err
    (home / "condensate.db").chmod(0o644)
    (home / "claude").mkdir(mode=0o755)
    (home / "claude").chmod(0o755)
    home.chmod(0o755)
    code, _, err = _run(home, "doctor", env={"CONDENSATE_LOG_FORMAT": "json"})
    assert code == 0, err
    assert _private(_modes(home)), {k: oct(v) for k, v in _modes(home).items()}
    (warning,) = [
        json.loads(line) for line in err.splitlines() if "state_directory_tightened" in line
    ]
    assert set(warning["paths"]) == {". (755)", "condensate.db (644)", "claude (755)"}


def test_a_second_daemon_names_the_first_and_exits_75(serving: DaemonProcess) -> None:
    """`condensate serve` on a home a daemon holds prints one sentence naming that daemon's
    pid and URL and exits 75 (EX_TEMPFAIL: the holder may go), without a traceback; the first
    daemon keeps serving."""
    assert serving.process is not None
    code, out, err = _run(serving.home, "serve", env={"CONDENSATE_PORT": "0"})
    assert code == 75
    assert out == ""
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("condensate: Another daemon")
    assert f"pid {serving.process.pid}" in line
    assert serving.url in line
    assert json.loads((serving.home / "daemon.json").read_text())["url"] == serving.url


def test_the_lock_dies_with_its_daemon(serving: DaemonProcess) -> None:
    """After a SIGKILL of the daemon, the next one on the same home starts."""
    serving.kill()
    serving.start()
    assert serving.process is not None
    assert serving.process.poll() is None


async def test_a_cli_childs_stderr_log_is_created_0600(tmp_path: Path) -> None:
    """The stderr log a CLI engine keeps for its child is private from its first byte."""
    process = await _child.spawn(
        ["/bin/sh", "-c", "echo oops >&2"], cwd=str(tmp_path), state_dir=tmp_path, env={}
    )
    await process.wait()
    log = tmp_path / "stderr.log"
    assert log.read_text() == "oops\n"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


@contextmanager
def held(home: Path, then: str = "") -> Iterator[None]:
    """A process that holds ``home``'s lock as a daemon does, then runs ``then`` (Python,
    with ``home`` and ``os``, ``json``, ``time`` at hand) and sleeps, until the block ends."""
    script = (
        "import json, os, sys, time\n"
        "from pathlib import Path\n"
        "from condensate import statedir\n"
        "home = Path(sys.argv[1])\n"
        "lock = statedir.hold(home)\n"
        "print('held', flush=True)\n"
        f"{then}"
        "time.sleep(30)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(home)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_a_command_waits_for_a_daemon_still_starting(tmp_path: Path) -> None:
    """A daemon that holds the state directory but serves nothing yet (daemon.json not
    written) is waited for: the command's client gets the URL the daemon then writes, not a
    'no token' or a refused connection."""
    home = tmp_path / "state"
    starting = (
        "time.sleep(1.0)\n"
        "(home / 'token').write_text('a-token')\n"
        "marker = {'url': 'http://127.0.0.1:9', 'pid': os.getpid()}\n"
        "(home / 'daemon.json').write_text(json.dumps(marker))\n"
    )
    with held(home, starting):
        began = time.monotonic()
        client = DaemonClient.find(Settings(home=home))
        waited = time.monotonic() - began
    assert client.url == "http://127.0.0.1:9"
    assert client.token == "a-token"  # noqa: S105 - the test's own
    assert 0.5 < waited < 10


def test_a_read_only_command_leaves_a_running_daemons_directory_alone(tmp_path: Path) -> None:
    """While a daemon holds the state directory, `view` re-permissions nothing in it (what
    the daemon's CLIs write there while they run is theirs); with no daemon, the next
    command tightens the same file."""
    home = tmp_path / "state"
    _run(home, "doctor")  # a private home with its log
    session = home / "codex" / "t-1" / "sessions" / "rollout.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text("{}\n")
    session.chmod(0o644)
    with held(home):
        _run(home, "view", "t-1")
        assert _mode(session) == 0o644
    _run(home, "view", "t-1")
    assert _mode(session) == 0o600
