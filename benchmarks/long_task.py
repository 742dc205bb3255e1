"""Long task: what windowing buys over a long scripted coding task, against two baselines.

The task (``benchmarks/tasks.py``: at least 300 model calls of file reads, searches, edits,
failing and passing test runs, human steers) is replayed in one process through
``condensate.replay`` under three policies, each against its own fake model server (real
HTTP, tiktoken counts, a simulated prompt cache):

- ``condensate``: the real projector, meter, planner and curator (the stand-in curator writes
  summaries through the fake);
- ``unmanaged``: no management; when the provider refuses the prompt, the oldest history is
  dropped down to half the window. ``first_overflow_call`` is where a run that ends instead
  would have ended, and ``condensate_vs_unmanaged_until_first_overflow`` compares the two
  over the calls both made;
- ``single-summary``: one summary of everything at 83.5 % of the window, nothing kept
  (Claude Code's default shape; its summary call resends the view, so it reads the cache).

Billed input is weighted by Anthropic's price ratios: uncached 1.0, cache write 1.25, cache
read 0.1. Goals: Condensate at most 0.5x the unmanaged baseline and 0.8x the single summary,
with every retention check passing. The agent of a replay never needs what it saw, so it never
pays for what a window cut: the cost figures Condensate claims are ``reactive_task.py``'s.

    python benchmarks/long_task.py               # a table
    python benchmarks/long_task.py --json        # one JSON object
    python benchmarks/long_task.py --json --small   # CI: 90 calls, a 60k window
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import structlog

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.tasks import FULL_CALLS, SEED, long_task
from condensate.core.planner import PlannerSettings
from condensate.core.tiers import TierSettings
from condensate.core.tokens import count_event, counter_for
from condensate.replay import (
    WEIGHTS,
    Recording,
    ReplayConfig,
    Report,
    replay,
    text_report,
)

FULL_WINDOW = 200_000
SMALL_CALLS = 90
SMALL_WINDOW = 60_000
GOALS = {"condensate_vs_unmanaged": 0.5, "condensate_vs_single_summary": 0.8}


def machine() -> dict[str, Any]:
    import tiktoken  # noqa: PLC0415  (only its version is wanted here)

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "tiktoken": tiktoken.__version__,
        "encoding": counter_for("").name,
    }


def task_summary(recording: Recording) -> dict[str, Any]:
    counter = counter_for("")
    tools: dict[str, int] = {}
    for event in recording.events:
        tool = getattr(event, "tool", None)
        if tool is not None:
            tools[tool] = tools.get(tool, 0) + 1
    return {
        "name": recording.name,
        "model": recording.model,
        "engine": recording.engine,
        "baseline_tokens": recording.baseline,
        "events": len(recording.events),
        "model_calls": recording.model_calls,
        "history_tokens": sum(count_event(e, counter) for e in recording.events),
        "tool_results_by_tool": dict(sorted(tools.items())),
    }


TIERS = TierSettings()
VARIANTS: dict[str, TierSettings] = {
    "as configured": TIERS,
    "cheap windows before the line (early 0.1, target 0.3)": replace(
        TIERS, early_share=0.1, target_share=0.3
    ),
    "no superseded-read clearing": replace(TIERS, dedupe_min_tokens=10**9),
    "keep_pairs 1": replace(TIERS, keep_pairs=1),
    "target 0.3 of the line": replace(TIERS, target_share=0.3),
    "no clamps": replace(TIERS, clamp_tokens=None),
    "clamp at 2,000 tokens": replace(TIERS, clamp_tokens=2_000),
    "the departures of issue 15 (early 0.1, target 0.3, keep_pairs 1)": replace(
        TIERS, early_share=0.1, target_share=0.3, keep_pairs=1
    ),
}
"""Each tier setting's part: the condensate policy with one of them changed (the defaults
are the spec's; the rest are departures an operator may choose)."""


def condensate_only(recording: Recording, window: int, tiers: TierSettings) -> dict[str, Any]:
    """The condensate policy alone over ``recording`` with ``tiers``: its figures."""
    config = ReplayConfig(
        window=window, policies=("condensate",), planner=PlannerSettings(tiers=tiers)
    )
    report: Report = anyio.run(lambda: replay(recording, config))
    ours = report.to_json()["policies"]["condensate"]
    return {
        "weighted_input": ours["weighted_input"],
        "cache_read_share": ours["cache_read_share"],
        "windows": ours["windows"],
        "peak_prompt": ours["peak_prompt"],
        "retention_passed": ours["retention"]["passed"],
    }


def contributions(calls: int, window: int, seed: int) -> dict[str, Any]:
    """Each variant over the task, and over its rereads variant (the agent reads again what
    it read long ago, which a window has likely cleared)."""
    task, rereads = long_task(calls, seed), long_task(calls, seed, rereads=True)
    return {
        "task": {name: condensate_only(task, window, t) for name, t in VARIANTS.items()},
        "rereads": {
            name: condensate_only(rereads, window, VARIANTS[name])
            for name in ("as configured", "no superseded-read clearing")
        },
    }


def run(calls: int, window: int, seed: int) -> tuple[dict[str, Any], Report]:
    recording = long_task(calls, seed)
    started = time.perf_counter()
    report: Report = anyio.run(lambda: replay(recording, ReplayConfig(window=window)))
    parts = contributions(calls, window, seed)
    elapsed = time.perf_counter() - started
    data = report.to_json()
    ratios = data["ratios"]
    ours = data["policies"]["condensate"]
    cost_met = all(
        ratios.get(key) is not None and ratios[key] <= limit for key, limit in GOALS.items()
    )
    result = {
        "benchmark": "long_task",
        "command": shlex.join(["python", *sys.argv]),
        "machine": machine(),
        "seed": seed,
        "task": task_summary(recording),
        "window": window,
        "curator": data["curator"],
        "weights": WEIGHTS,
        "prices_usd_per_mtok": data["prices_usd_per_mtok"],
        "policies": data["policies"],
        "ratios": ratios,
        "contributions": parts,
        "goals": {
            **{f"{k}_max": v for k, v in GOALS.items()},
            "cost_met": cost_met,
            "retention_passed": ours["retention"]["passed"],
            "met": cost_met and ours["retention"]["passed"],
        },
        "elapsed_s": round(elapsed, 2),
    }
    return result, report


def table(result: dict[str, Any], report_text: str) -> str:
    goals = result["goals"]
    parts = result["contributions"]
    lines = [report_text, "", "each tier setting's part (the condensate policy):"]
    for group, rows in parts.items():
        for name, row in rows.items():
            lines.append(
                f"  {group}: {name}: {row['weighted_input'] / 1e6:.3f}M weighted, "
                f"{row['cache_read_share']:.1%} cache reads, windows {row['windows']}, "
                f"retention {'passed' if row['retention_passed'] else 'FAILED'}"
            )
    lines += [
        "",
        f"goals: <= {goals['condensate_vs_unmanaged_max']}x unmanaged, <= "
        f"{goals['condensate_vs_single_summary_max']}x single summary, every retention check: "
        f"cost {'met' if goals['cost_met'] else 'MISSED'}, retention "
        f"{'passed' if goals['retention_passed'] else 'FAILED'}",
        f"{result['elapsed_s']} s; {result['command']}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--small", action="store_true", help="the CI size: 90 calls, 60k window")
    parser.add_argument("--calls", type=int, default=None, help=f"default {FULL_CALLS}")
    parser.add_argument("--window", type=int, default=None, help=f"default {FULL_WINDOW:,}")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(30),
    )
    calls = args.calls or (SMALL_CALLS if args.small else FULL_CALLS)
    window = args.window or (SMALL_WINDOW if args.small else FULL_WINDOW)
    if calls < 20:
        parser.error("--calls must be at least 20")
    result, report = run(calls, window, args.seed)
    print(json.dumps(result, indent=2) if args.json else table(result, text_report(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
