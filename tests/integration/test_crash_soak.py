"""The crash soak as CI runs it (20 SIGKILLs of a real daemon running native, Claude Code and
Codex threads, in a subprocess), and the soak's own checks shown able to fail."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import soak_checks as checks
from benchmarks.crash_soak import BOUNDARIES, CHECKS
from tests.integration.daemon import REPO
from tests.integration.procs import exec_laid_out

KILLS = 20
SEED = 20261201


@pytest.fixture(scope="module")
def soak() -> tuple[int, dict[str, Any], str]:
    """One short soak: its exit code, its JSON report and its stderr."""
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "crash_soak.py"),
            "--kills",
            str(KILLS),
            "--seed",
            str(SEED),
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.stdout, done.stderr[-4000:]
    return done.returncode, json.loads(done.stdout), done.stderr


def test_every_check_passes_after_every_kill(soak: tuple[int, dict[str, Any], str]) -> None:
    """After 20 SIGKILLs nothing acknowledged is lost or changed, seqs have no gap, no cut is
    windowed twice, every input is answered, every view equals a full replay and no CLI
    outlives the daemon; the soak exits 0."""
    code, report, _ = soak
    failures = {n: c["first_failures"] for n, c in report["checks"].items() if c["failed"]}
    assert failures == {}
    assert report["error"] is None
    assert code == 0
    assert report["kills"] >= KILLS
    assert sorted(report["checks"]) == sorted(CHECKS)
    assert all(c["passed"] > 0 for c in report["checks"].values()), report["checks"]


def test_every_boundary_is_reached(soak: tuple[int, dict[str, Any], str]) -> None:
    """Each kind of moment is killed at least once, and each was reached before its kill."""
    _, report, _ = soak
    assert set(report["boundaries"]) == set(BOUNDARIES)
    assert all(report["boundaries"][b] > 0 for b in BOUNDARIES), report["boundaries"]
    assert sum(report["boundaries"].values()) == report["kills"]
    assert not any(report["moments_missed"].values()), report["moments_missed"]


def test_the_kills_land_where_they_aim(soak: tuple[int, dict[str, Any], str]) -> None:
    """The log shows what the kills hit: turns resumed after a restart, tool calls cut off
    mid-batch, summaries, a snapshot to rebuild from, and CLIs running when the daemon died."""
    _, report, _ = soak
    evidence = report["evidence"]
    assert evidence["turns_resumed"] > 0
    assert evidence["tool_calls_cut_off"] > 0
    assert evidence["windows"].get("summary", 0) > 0
    assert evidence["snapshots"] > 0
    assert report["threads_with_snapshot"] > 0
    assert report["kills_with_cli_running"] > 0
    assert set(report["threads"]) == {"api", "claude", "codex"}
    assert all(report["threads"].values())


def event(seq: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "kind": kind, **fields}


def window(seq: int, cut: int, keep_from: int | None = 2) -> dict[str, Any]:
    return event(seq, "window", cut=cut, keep_from=keep_from, window_kind="summary")


def test_a_changed_or_lost_event_is_a_failure() -> None:
    """An event read before a kill that is gone, or differs in any field, is reported."""
    before = {1: event(1, "thread.created"), 2: event(2, "message.user", text="hi")}
    after = [event(1, "thread.created"), event(2, "message.user", text="changed")]
    assert checks.kept_problems(before, after) == ["seq 2 (message.user) changed in ['text']"]
    assert checks.kept_problems(before, after[:1]) == ["seq 2 (message.user) is gone"]
    assert checks.kept_problems(before, [event(1, "thread.created"), before[2]]) == []


def test_a_gap_or_a_duplicate_seq_is_a_failure() -> None:
    """Seqs must run 1, 2, 3 without a hole or a repeat."""
    assert checks.seq_problems([event(1, "a"), event(2, "b")]) == []
    assert checks.seq_problems([event(1, "a"), event(3, "b")]) == ["seqs missing [2]"]
    assert checks.seq_problems([event(1, "a"), event(1, "b")]) == ["duplicate seqs [1]"]


def test_a_cut_windowed_twice_is_a_failure() -> None:
    """Two windows planned on the same last seq, or the same summary twice with nothing
    between, are one cut taken twice; with conversation between, the second is new."""
    assert checks.window_problems([window(5, 4), window(6, 4)])
    assert checks.window_problems([window(5, 4), window(7, 6)])
    moved = [window(5, 4), event(6, "message.user"), window(7, 6)]
    assert checks.window_problems(moved) == []


def test_only_a_final_reply_answers_an_input() -> None:
    """An assistant message that calls tools does not answer an input; one without does."""
    calls = event(3, "message.assistant", tool_calls=[{"id": "c", "name": "read"}])
    assert not checks.answered([event(2, "message.user"), calls], 2)
    assert checks.answered([event(2, "message.user"), calls, event(5, "message.assistant")], 2)
    assert not checks.answered([event(1, "message.assistant"), event(2, "message.user")], 2)


def test_a_cli_child_is_found_and_seen_to_die(tmp_path: Path) -> None:
    """A child named like a CLI is among the descendants found, by its parent and by its
    environment, and counts as gone once killed."""
    codex = tmp_path / "codex"
    codex.symlink_to("/bin/sleep")
    mark = str(tmp_path / "home" / "codex" / "t-1")
    child = subprocess.Popen([str(codex), "30"], env={**os.environ, "CODEX_HOME": mark})
    try:
        exec_laid_out(child.pid, "CODEX_HOME=")
        found = [p for p in checks.cli_descendants(os.getpid()) if p.pid == child.pid]
        assert len(found) == 1
        assert checks.alive(found[0])
        assert [p.pid for p in checks.environment_matches([mark])] == [child.pid]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert not checks.alive(found[0])
