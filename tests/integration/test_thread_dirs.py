"""The CLI engines' per-thread directories (``$CONDENSATE_HOME/claude/<thread>``,
``codex/<thread>``: a CLI's sessions, config and stderr log) are removed when a daemon starts,
except one a live process still names in its environment; with real files, a real process and
a real daemon."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from condensate import statedir
from condensate.testing.fake_model import FakeModelServer
from tests.integration.daemon import DaemonProcess
from tests.integration.procs import exec_laid_out


def thread_dir(home: Path, name: str, thread: str) -> Path:
    """A CLI's state as the engines leave it: a session file and a stderr log."""
    path = home / name / thread
    (path / "projects" / "-work").mkdir(parents=True)
    (path / "projects" / "-work" / "session.jsonl").write_text("{}\n")
    (path / "stderr.log").write_text("a warning\n")
    return path


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[Path]:
    """A live process whose CODEX_HOME is ``home/codex/t-running`` (as a CLI's is): that
    directory."""
    home = tmp_path / "home"
    used = thread_dir(home, "codex", "t-running")
    process = subprocess.Popen(["sleep", "60"], env={**os.environ, "CODEX_HOME": str(used)})
    try:
        exec_laid_out(process.pid, "CODEX_HOME=")
        yield used
    finally:
        process.kill()
        process.wait()


def test_the_dirs_of_threads_no_cli_runs_are_removed_and_a_used_one_is_kept(
    tmp_path: Path, sleeper: Path
) -> None:
    """Every per-thread directory under the engines' names goes, but the one a live process
    names; the names' own directories, other files of the state directory and directories
    of names no engine declares stay."""
    home = tmp_path / "home"
    gone = [thread_dir(home, "claude", "t-1"), thread_dir(home, "codex", "t-2")]
    other = thread_dir(home, "notes", "t-3")
    (home / "condensate.db").write_text("")
    (home / "claude" / "a-file").write_text("")
    removed = statedir.clear_thread_dirs(home, ["claude", "codex"])
    assert sorted(removed) == ["claude/t-1", "codex/t-2"]
    assert not any(path.exists() for path in gone)
    assert (sleeper / "projects" / "-work" / "session.jsonl").exists()
    assert other.exists()
    assert (home / "condensate.db").exists()
    assert (home / "claude" / "a-file").exists()


def test_a_path_below_a_thread_dir_in_an_environment_keeps_it(tmp_path: Path) -> None:
    """A process naming a path inside a thread's directory (a command a CLI started, with a
    variable pointing into its config) keeps that thread's directory."""
    home = tmp_path / "home"
    used = thread_dir(home, "claude", "t-deep")
    env = {**os.environ, "SOME_CONFIG": str(used / "projects" / "-work")}
    with subprocess.Popen(["sleep", "60"], env=env) as process:
        try:
            exec_laid_out(process.pid, "SOME_CONFIG=")
            assert statedir.clear_thread_dirs(home, ["claude"]) == []
        finally:
            process.kill()
    assert used.exists()
    assert statedir.clear_thread_dirs(home, ["claude"]) == ["claude/t-deep"]


def test_a_starting_daemon_removes_the_thread_dirs_left_from_before(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    """A daemon started on a home holding Claude Code and Codex thread directories (from a
    daemon before it) serves with them gone and the rest of its state kept."""
    home = tmp_path / "state"
    home.mkdir(mode=0o700)
    left = [thread_dir(home, "claude", "t-aaaaaaaaaaaa"), thread_dir(home, "codex", "t-b")]
    (home / "condensate.db.bak").write_text("kept")
    daemon = DaemonProcess(home, fake.url)
    daemon.start()
    try:
        assert not any(path.exists() for path in left)
        assert (home / "claude").is_dir()
        assert (home / "condensate.db.bak").read_text() == "kept"
    finally:
        daemon.close()
