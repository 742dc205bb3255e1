"""The planner-scale benchmark, run as CI runs it: a real subprocess that prints one JSON
object whose figures hang together."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
