"""The CLI long-task benchmark, run as CI runs it: a real subprocess driving the pinned CLI
(alone, and through a real daemon at the default and the recommended ceiling) against the
fake model server, in a small configuration, printing one JSON object whose figures hang
together."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.cli_long_task import (
    ARMS,
    GOALS,
    MODELS,
    RECOMMENDED_CEILING,
    WINDOWS,
    Engine,
    default_ceiling,
    ratios,
)
from condensate.replay import WEIGHTS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "cli_long_task.py"
CLAUDE = ROOT / "node_modules" / ".bin" / "claude"
CODEX = ROOT / "node_modules" / ".bin" / "codex"
TURNS = 2
CALLS_PER_TURN = 8
"""Two human turns of eight tool calls (four test runs, two of them failing) and an answer:
18 scripted calls per arm, far below any ceiling, so no arm takes a window."""

TOP_KEYS = {
    "benchmark",
    "engine",
    "command",
    "machine",
    "model",
    "curator_model",
    "window",
    "default_ceiling",
    "recommended_ceiling",
    "recommended_ceiling_setting",
    "weights",
    "task",
    "arms",
    "goals",
    "wall_s",
}
ARM_KEYS = {
    "arm",
    "ceiling",
    "line",
    "model_calls",
    "calls_by_kind",
    "refused_requests",
    "input_tokens",
    "uncached_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
    "weighted_input",
    "summary_weighted_input",
    "cache_read_share",
    "largest_request",
    "largest_vs_ceiling",
    "largest_vs_window",
    "requests_over_ceiling",
    "requests_over_line",
    "session_restarts",
    "human_presence",
    "human_presence_min",
    "human_markers_lost",
    "human_markers_unsent",
    "turns",
    "turns_completed",
    "router_leftovers",
    "fake_pending_at_end",
    "wall_s",
}


def run_benchmark(engine: Engine) -> dict[str, Any]:
    cli = CLAUDE if engine == "claude" else CODEX
    assert cli.exists(), f"the pinned {engine} CLI is not installed: run scripts/setup"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--engine",
            engine,
            "--json",
            "--turns",
            str(TURNS),
            "--calls-per-turn",
            str(CALLS_PER_TURN),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def check_arm(name: str, arm: dict[str, Any], report: dict[str, Any]) -> None:
    """One arm's figures: every call answered and billed as the fake counted it, the script
    taken in order, each human message in every later request, every turn completed."""
    assert not ARM_KEYS - arm.keys(), (name, ARM_KEYS - arm.keys())
    assert arm["arm"] == name
    task = report["task"]
    assert arm["model_calls"] > 0
    assert sum(arm["calls_by_kind"].values()) == arm["model_calls"]
    assert arm["calls_by_kind"]["main"] == task["scripted_model_calls"], arm["calls_by_kind"]
    assert arm["refused_requests"] == 0
    assert arm["router_leftovers"] == 0
    assert arm["fake_pending_at_end"] == {}

    uncached, write, read = (
        arm["uncached_tokens"],
        arm["cache_write_tokens"],
        arm["cache_read_tokens"],
    )
    assert min(uncached, write, read) >= 0
    assert uncached + write + read == arm["input_tokens"] > 0
    # Each model's calls weighted by its own price ratios (no long-context tier is reached).
    weighted = 0.0
    for model, tokens in arm["by_model"].items():
        assert tokens["ratios"] == ratios(model)
        r = tokens["ratios"]
        model_weighted = (
            tokens["uncached"] * r["uncached"]
            + (tokens["cache_write"] - tokens["cache_write_1h"]) * r["cache_write"]
            + tokens["cache_write_1h"] * r["cache_write_1h"]
            + tokens["cache_read"] * r["cache_read"]
        )
        assert tokens["weighted_input"] == pytest.approx(model_weighted, abs=0.1)
        weighted += model_weighted
    assert sum(t["uncached"] for t in arm["by_model"].values()) == uncached
    assert sum(t["cache_read"] for t in arm["by_model"].values()) == read
    assert arm["weighted_input"] == pytest.approx(weighted, abs=0.5)
    assert 0 <= arm["summary_weighted_input"] <= arm["weighted_input"]
    assert arm["cache_read_share"] == pytest.approx(read / arm["input_tokens"], abs=1e-4)
    assert 0 < arm["cache_read_share"] < 1  # the CLIs' breakpoints, OpenAI's automatic cache

    assert 0 < arm["largest_request"] <= arm["input_tokens"]
    assert arm["largest_vs_ceiling"] == pytest.approx(
        arm["largest_request"] / arm["ceiling"], abs=1e-4
    )
    assert arm["largest_vs_window"] == pytest.approx(
        arm["largest_request"] / report["window"], abs=1e-4
    )
    assert arm["line"] < arm["ceiling"]
    assert arm["requests_over_ceiling"] == 0  # the guarantee
    assert 0 <= arm["requests_over_line"] <= arm["model_calls"]
    assert arm["session_restarts"] >= 0

    presence = arm["human_presence"]
    assert list(presence) == [f"[HUMAN-MARKER-{k}]" for k in range(1, TURNS + 1)]
    assert all(0.0 <= share <= 1.0 for share in presence.values())
    assert arm["human_presence_min"] == min(presence.values()) == 1.0
    assert arm["human_markers_lost"] == arm["human_markers_unsent"] == []

    assert [t["turn"] for t in arm["turns"]] == list(range(1, TURNS + 1))
    assert all(t["outcome"] == "completed" for t in arm["turns"]), arm["turns"]
    assert arm["turns_completed"] == TURNS
    assert arm["wall_s"] > 0


def check_report(engine: Engine, report: dict[str, Any]) -> None:
    """The whole report: its context, the three arms, and goals computed from them."""
    assert not TOP_KEYS - report.keys(), TOP_KEYS - report.keys()
    assert report["benchmark"] == "cli_long_task"
    assert report["engine"] == engine
    assert report["model"] == MODELS[engine]
    assert report["window"] == WINDOWS[engine]
    assert f"--engine {engine}" in report["command"]
    assert f"--turns {TURNS}" in report["command"]
    assert report["machine"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert report["machine"][engine]
    assert report["weights"] == WEIGHTS
    assert report["default_ceiling"] == default_ceiling(engine)
    assert report["recommended_ceiling"] == RECOMMENDED_CEILING[engine]
    task = report["task"]
    assert task["human_turns"] == TURNS
    assert task["scripted_model_calls"] == TURNS * (CALLS_PER_TURN + 1)
    assert task["failing_test_runs"] > 0

    arms = report["arms"]
    assert list(arms) == list(ARMS)
    for name, arm in arms.items():
        check_arm(name, arm, report)
    assert arms["cli_alone"]["ceiling"] == RECOMMENDED_CEILING[engine]
    assert arms["cli_alone"]["cli_compactions"] == 0
    assert arms["condensate_default"]["ceiling"] == default_ceiling(engine)
    assert arms["condensate_recommended"]["ceiling"] == RECOMMENDED_CEILING[engine]
    # A small task stays under the default ceiling: at most a cheap window that pays for
    # itself, applied in flight (one session); at the recommended one it may cross it.
    assert set(arms["condensate_default"]["windows"]) <= {"microcompact", "collapse"}
    assert arms["condensate_default"]["notices"]["session-started"] == 1
    windows = arms["condensate_recommended"]["windows"]
    assert set(windows) <= {"microcompact", "collapse", "summary", "drop"}
    assert all(count > 0 for count in windows.values())

    goals = report["goals"]
    assert set(goals) == set(GOALS)
    for key, goal in goals.items():
        assert goal["goal"] == GOALS[key]
        assert isinstance(goal["met"], bool)
    over = goals["requests_over_ceiling_managed"]
    assert over["measured"] == 0
    assert over["met"] is True
    ratio = goals["weighted_input_vs_cli_alone_at_recommended"]
    expected = (
        arms["condensate_recommended"]["weighted_input"] / arms["cli_alone"]["weighted_input"]
    )
    assert ratio["measured"] == pytest.approx(expected, abs=1e-4)
    assert ratio["met"] is (ratio["measured"] <= ratio["goal"])
    kept = goals["human_messages_kept"]
    assert kept["measured"] == 1.0
    assert kept["met"] is True


def test_claude_long_task_reports_three_consistent_arms() -> None:
    """``cli_long_task.py --engine claude --json --turns 2 --calls-per-turn 8`` drives Claude
    Code alone (its own compaction on) and through a real daemon at the default and the
    recommended ceiling: each arm takes the whole script (every scripted call answered, in
    order, no reply left queued), bills exactly the token split the fake reports, keeps every
    human message in every later request, and the goals block is computed from the arms."""
    check_report("claude", run_benchmark("claude"))


def test_codex_long_task_reports_three_consistent_arms() -> None:
    """The same for Codex: ``codex app-server`` alone (a ``CODEX_HOME`` without Condensate's
    model catalog, so its own compaction is on) and through a real daemon at both ceilings,
    each arm's figures consistent with the fake's counts and the goals with the arms."""
    check_report("codex", run_benchmark("codex"))
