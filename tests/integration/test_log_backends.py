"""The log-backends benchmark, run as CI runs it: a real subprocess that starts its own
PostgreSQL server beside a SQLite file and prints one JSON object whose figures hang
together."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "log_backends.py"
FIGURES = (
    "appends_per_s_single",
    "appends_per_s_batch_100",
    "tail_200_median_ms",
    "tail_200_p99_ms",
    "rebuild_s",
)


def test_log_backends_prints_one_consistent_json_report() -> None:
    """``log_backends.py --json --small`` exits 0 with every figure for both backends, the
    tail's median no larger than its p99, and each ratio PostgreSQL's figure over SQLite's."""
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
    assert report["benchmark"] == "log_backends"
    for backend in ("sqlite", "postgres"):
        figures = report[backend]
        assert all(figures[key] > 0 for key in FIGURES), figures
        assert figures["tail_200_median_ms"] <= figures["tail_200_p99_ms"]
        assert figures["thread_events"] == report["sizes"]["thread"]
    for key, ratio in report["ratios_postgres_over_sqlite"].items():
        expected = report["postgres"][key] / report["sqlite"][key]
        assert abs(ratio - expected) <= 0.001 + 0.001 * expected, key
