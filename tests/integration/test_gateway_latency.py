"""The gateway-latency benchmark, run as CI runs it: a real subprocess (a real daemon, a Claude
Code thread, the fake in its own process) that prints one JSON object whose figures hang
together."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gateway_latency.py"


def measured(*options: str) -> dict[str, Any]:
    """The benchmark's JSON report, run as CI runs it with ``options``."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_gateway_latency_prints_one_consistent_json_report() -> None:
    """``gateway_latency.py --json --requests 5`` exits 0 and prints one JSON object: both
    sides timed with positive medians no larger than their p99s, the added figures their
    differences (a person's own session through the pass in its base URL too), and every
    gateway request logged on the thread as a call."""
    report = measured("--requests", "5")
    assert report["benchmark"] == "gateway_latency"
    assert report["requests"] == 5
    assert report["request_bytes"] > 10_000  # a real Claude Code request
    for side in ("direct", "gateway", "attached"):
        figures = report[side]
        assert 0 < figures["min_ms"] <= figures["median_ms"] <= figures["p99_ms"]
    added = report["gateway"]["median_ms"] - report["direct"]["median_ms"]
    assert abs(report["added_median_ms"] - added) < 0.01
    attached = report["attached"]["median_ms"] - report["direct"]["median_ms"]
    assert abs(report["attached_added_median_ms"] - attached) < 0.01
    # The CLI's first call, five warm-ups and the five timed requests, each logged.
    assert report["calls_logged"] >= 1 + 5 + 5


def test_gateway_latency_times_a_long_session_that_goes_on() -> None:
    """``--history 20 --requests 3``: every request carries the 20 earlier exchanges and one
    more each pair (the last one 23, about 1.5 KB each beyond the CLI's own request), and
    each arm answers every one (a refusal or a held request fails the run)."""
    report = measured("--requests", "3", "--history", "20")
    assert report["history_exchanges"] == 20
    assert report["request_bytes"] - report["cli_request_bytes"] > 23 * 1_500
    for side in ("direct", "gateway", "attached"):
        assert report[side]["median_ms"] > 0
