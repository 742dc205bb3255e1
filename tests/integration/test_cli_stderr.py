"""A CLI's ``stderr.log`` stays capped, with real processes and files: under the reaper (how
both CLIs run) the log moves to ``stderr.log.1`` before a write would take it past
``STDERR_CAP``, however long the CLI runs, and its last words are in the file once it has
exited; without the reaper the log is rotated when the next child starts."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from adapters import _child

CAP = _child.STDERR_CAP
LINES = 32_000
"""115 bytes each: about 3.5 times the cap."""
WRITER = f"""
import sys
for number in range({LINES}):
    sys.stderr.write(f"line {{number:08d}} " + "x" * 100 + "\\n")
"""


def written() -> bytes:
    return b"".join(f"line {n:08d} {'x' * 100}\n".encode() for n in range(LINES))


async def test_a_cli_under_the_reaper_never_keeps_more_than_twice_the_cap(tmp_path: Path):
    """3.5 MiB written to stderr leave a log and a ``.1`` of at most the cap each, both
    0600, together the unbroken end of what was written (the newest in the log), and no
    third file."""
    process = await _child.spawn(
        [sys.executable, "-c", WRITER], cwd=str(tmp_path), state_dir=tmp_path, env={}, reaper=True
    )
    assert await process.wait() == 0
    check_capped(tmp_path)


def check_capped(tmp_path: Path) -> None:
    log, older = tmp_path / "stderr.log", tmp_path / "stderr.log.1"
    assert 0 < log.stat().st_size <= CAP
    assert 0 < older.stat().st_size <= CAP
    assert written().endswith(older.read_bytes() + log.read_bytes())
    assert log.read_bytes().endswith(f"line {LINES - 1:08d} {'x' * 100}\n".encode())
    assert {p.name for p in tmp_path.iterdir()} == {"stderr.log", "stderr.log.1"}
    for path in (log, older):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_clis_last_words_are_in_the_log_when_it_has_exited(tmp_path: Path):
    """What the CLI writes just before it exits is in the log by the time the reaper's exit
    is seen (what the engines quote when a CLI dies)."""
    process = await _child.spawn(
        ["/bin/sh", "-c", "echo the last words >&2; exit 3"],
        cwd=str(tmp_path),
        state_dir=tmp_path,
        env={},
        reaper=True,
    )
    assert await process.wait() == 3
    assert _child.stderr_tail(tmp_path) == "stderr: the last words"


async def test_without_the_reaper_a_full_log_is_rotated_at_the_next_start(tmp_path: Path):
    """A log at the cap when a child starts becomes ``stderr.log.1``; the new log holds only
    the new child's stderr."""
    log = tmp_path / "stderr.log"
    log.write_bytes(b"o" * CAP)
    process = await _child.spawn(
        ["/bin/sh", "-c", "echo fresh >&2"], cwd=str(tmp_path), state_dir=tmp_path, env={}
    )
    await process.wait()
    assert log.read_text() == "fresh\n"
    assert (tmp_path / "stderr.log.1").read_bytes() == b"o" * CAP


def test_the_tail_reaches_into_the_rotated_log(tmp_path: Path):
    """Just after a rotation the log is short: the tail a crash notice quotes goes on into
    ``stderr.log.1``."""
    (tmp_path / "stderr.log.1").write_text("panic: the reason it died\n")
    (tmp_path / "stderr.log").write_text("exiting\n")
    assert _child.stderr_tail(tmp_path) == "stderr: panic: the reason it died\nexiting"
