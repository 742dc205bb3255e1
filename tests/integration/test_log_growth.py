"""The log-growth benchmark, run as CI runs it: a real subprocess that writes the long task's
log to a SQLite file, archives and exports it, and prints one JSON object whose figures hang
together."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "log_growth.py"


def test_log_growth_prints_one_consistent_json_report() -> None:
    """``log_growth.py --json --small`` exits 0; the file grows with every sample; the
    per-event, per-call and per-hour figures are the growth over the events, calls and hours;
    the archive holds every event and the gzipped export is smaller than the export."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", "--small"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "log_growth"
    assert report["model_calls"] == 90
    grown = report["log"]
    sizes = [s["database_bytes"] for s in grown["samples"]]
    assert sizes == sorted(sizes)
    assert grown["samples"][-1]["events"] == report["events"]
    assert grown["samples"][-1]["calls"] == report["model_calls"]
    growth = grown["file_bytes"] - grown["empty_bytes"]
    assert growth > grown["body_bytes"] > 0
    assert abs(report["bytes_per_event"] - growth / report["events"]) <= 1
    assert abs(report["bytes_per_call"] - growth / report["model_calls"]) <= 1
    assert abs(report["bytes_per_hour"] - growth / report["task_hours"]) <= growth * 0.01
    assert sum(k["events"] for k in grown["by_kind"].values()) == report["events"]
    kept = report["archive"]
    assert kept["events"] == report["events"]
    assert 0 < kept["export_gzip_bytes"] < kept["export_bytes"]
