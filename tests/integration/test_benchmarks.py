"""The planner-scale benchmark, run as CI runs it: a real subprocess that prints one JSON
object whose figures hang together."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "planner_scale.py"

TOP_KEYS = {"benchmark", "command", "machine", "model", "engine", "targets", "sizes"}
SIZE_KEYS = {
    "events",
    "history_tokens",
    "view_tokens_built",
    "view_tokens",
    "history_tokens_after_steps",
    "build_s",
    "windows_built",
    "windows_by_kind",
    "steps",
    "median_ms",
    "p99_ms",
    "decision_mix",
    "count_ms",
    "render_ms",
    "tiktoken_ms",
    "tokens",
    "ratio",
}


def test_planner_scale_prints_one_consistent_json_report() -> None:
    """``planner_scale.py --json --sizes 300,1000`` exits 0 and prints one JSON object with
    machine info and, per size, positive timings, a decision mix that covers every timed step,
    and a ratio that is the reported count time over the reported median."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", "--sizes", "300,1000"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    report = json.loads(done.stdout)
    assert not TOP_KEYS - report.keys()
    assert report["benchmark"] == "planner_scale"
    assert "--sizes 300,1000" in report["command"]
    assert report["machine"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert report["machine"]["cpu_count"] > 0
    assert report["targets"]["met"] is None  # the target is set at 10,000 events
    assert list(report["sizes"]) == ["300", "1000"]

    for size, result in report["sizes"].items():
        assert not SIZE_KEYS - result.keys(), size
        assert result["events"] >= int(size)
        assert result["history_tokens"] >= result["view_tokens_built"] > 0
        assert result["history_tokens_after_steps"] >= result["view_tokens"] > 0
        assert result["tokens"] > 0
        assert result["build_s"] > 0
        for key in ("median_ms", "p99_ms", "count_ms", "render_ms", "tiktoken_ms"):
            assert result[key] > 0, (size, key)
        assert result["p99_ms"] >= result["median_ms"]
        assert sum(result["decision_mix"].values()) == result["steps"] > 0
        assert result["windows_built"] == sum(result["windows_by_kind"].values())
        assert result["ratio"] == pytest.approx(result["count_ms"] / result["median_ms"], abs=0.05)


LONG_TASK = ROOT / "benchmarks" / "long_task.py"
OVERHEAD = ROOT / "benchmarks" / "overhead.py"
RETENTION_CHECKS = {"human", "errors", "files", "pairs", "ceiling"}


def _run_json(script: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(script), "--json", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_long_task_prints_policies_ratios_and_retention() -> None:
    """``long_task.py --json --small`` replays the scripted task under Condensate and both
    baselines and reports weighted bills that add up, ratios that are their quotients, and
    retention checks; Condensate never sends over its ceiling and keeps pairs and humans."""
    report = _run_json(LONG_TASK, "--small")
    assert report["benchmark"] == "long_task"
    assert report["task"]["model_calls"] >= 90
    policies = report["policies"]
    assert set(policies) == {"condensate", "unmanaged", "single-summary"}
    for name, result in policies.items():
        billed = result["billed"]
        weighted = billed["uncached"] + 1.25 * billed["cache_write"] + 0.1 * billed["cache_read"]
        assert result["weighted_input"] == pytest.approx(weighted, abs=1), name
        assert 0 < result["cache_read_share"] < 1
        assert result["retention"].keys() >= RETENTION_CHECKS
        assert result["model_calls"] == report["task"]["model_calls"]
    ours = policies["condensate"]
    ratio = ours["weighted_input"] / policies["unmanaged"]["weighted_input"]
    assert report["ratios"]["condensate_vs_unmanaged"] == pytest.approx(ratio, abs=0.001)
    assert sum(ours["windows"].values()) > 0
    for check in ("human", "errors", "files", "pairs", "ceiling"):
        assert ours["retention"][check]["passed"], (check, ours["retention"][check])
    assert ours["retention"]["passed"]
    assert ours["peak_prompt"] <= ours["limit"]
    assert policies["unmanaged"]["first_overflow_call"] is not None
    assert {"cost_met", "retention_passed", "met"} <= report["goals"].keys()


def test_overhead_prints_per_call_latency_and_append_rates() -> None:
    """``overhead.py --json --small`` times native calls through a real runtime against
    direct calls to the fake, and log appends with and without token counting."""
    report = _run_json(OVERHEAD, "--small")
    assert report["benchmark"] == "overhead"
    call = report["per_call"]
    assert call["calls"] == 40
    assert call["p99_ms"] >= call["median_ms"]
    assert call["direct_call_median_ms"] > 0
    assert call["daemon_between_calls_median_ms"] > 0
    appends = report["appends"]
    for key in ("single_per_s_counted", "batch_per_s_counted", "batch_per_s_uncounted"):
        assert appends[key] > 0, key
    assert appends["sustained_per_s"] == appends["batch_per_s_counted"]
    assert set(report["targets"]) >= {"median_met", "appends_met"}


CLI_LATENCY = ROOT / "benchmarks" / "cli_latency.py"


@pytest.mark.parametrize(("engine", "version"), [("claude", "2.1.332"), ("codex", "0.171.0")])
def test_cli_latency_prints_direct_and_daemon_turn_times(engine: str, version: str) -> None:
    """``cli_latency.py --engine E --json --turns 2`` times two warm turns of the pinned CLI
    directly and through a real daemon against one fake, and reports the daemon's added
    latency as the difference of the medians and of the p90s."""
    report = _run_json(CLI_LATENCY, "--engine", engine, "--turns", "2")
    assert report["benchmark"] == "cli_latency"
    assert report["engine"] == engine
    assert "--turns 2" in report["command"]
    assert report["turns"] == 2
    assert report["machine"][engine] == version
    assert report["machine"]["cpu_count"] > 0
    for side in ("direct", "condensate"):
        result = report[side]
        assert len(result["turns_ms"]) == 2, side
        assert 0 < result["min_ms"] <= result["median_ms"] <= result["p90_ms"] <= result["max_ms"]
        assert result["first_turn_ms"] > 0
    added = report["condensate"]["median_ms"] - report["direct"]["median_ms"]
    assert report["added_median_ms"] == pytest.approx(added, abs=0.01)
    added_p90 = report["condensate"]["p90_ms"] - report["direct"]["p90_ms"]
    assert report["added_p90_ms"] == pytest.approx(added_p90, abs=0.01)
    assert report["model_requests"] >= 2 * (1 + 2)  # each side's first turn and two more
