"""The reactive-task benchmark, run as CI runs it: a real subprocess, a real daemon per arm,
the pinned CLIs, each arm against its own fake model server, the reactive agent choosing
every reply from what each request shows; one JSON object per arm whose figures hang
together."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.reactive_task import (
    CLI_ARMS,
    NATIVE_ARMS,
    NATIVE_MODEL,
    PEERS,
    Builder,
    build_task,
    clean_lines,
)
from condensate.core.tokens import bare_model

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "reactive_task.py"
KEYS = {"arm", "weighted_input", "calls", "extra_calls", "failed_steps", "refused", "peak_prompt"}


def run_benchmark(*args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def check_arm(arm: dict[str, Any], scripted: int) -> None:
    """An arm's figures agree with each other and with the task the agent played."""
    assert not KEYS - arm.keys(), KEYS - arm.keys()
    assert arm["turns_not_completed"] == [], arm
    # Every scripted step and every fetch is one answered call of the thread's own.
    own = arm["calls_by_kind"]["main"]
    assert own == scripted + arm["extra_calls"] + arm["overrun"]
    assert arm["extra_calls"] == arm["recalls"] + arm["refetches"]
    assert arm["agent_calls"] == own
    assert arm["calls"] == sum(arm["calls_by_kind"].values())
    assert arm["weighted_input"] > 0
    assert 0 < arm["peak_prompt"] <= arm["window"]
    assert len(arm["failures"]) >= arm["failed_steps"]


def test_the_native_arms_play_the_whole_task_at_ci_size() -> None:
    """``reactive_task.py --small --json``: one object per arm (the native loop's and each
    peer's own loop), each played to the end by the agent (every step answered, nothing
    failed, nothing refused: a small task stays far under every threshold, so nothing was
    cut), and the native goal judged against the cheapest peer."""
    arms = run_benchmark("--small")
    assert [a["arm"] for a in arms] == list(NATIVE_ARMS)
    for arm in arms:
        if arm["arm"] not in PEERS:
            assert arm["model"] == bare_model(NATIVE_MODEL)
        check_arm(arm, arm["scripted_calls"])
        assert (arm["extra_calls"], arm["failed_steps"], arm["refused"]) == (0, 0, 0)
        assert arm["windows"] == {}
    native = next(a for a in arms if a["arm"] == "native_default")
    judged = native["goals"]["native_vs_cheapest_peer"]
    cheapest = min((a for a in arms if a["arm"] in PEERS), key=lambda a: a["weighted_input"])
    assert judged["peer"] == cheapest["arm"]
    assert judged["measured"] == pytest.approx(
        native["weighted_input"] / cheapest["weighted_input"], abs=1e-4
    )


def test_at_a_low_ceiling_the_agent_gets_back_what_windows_cut() -> None:
    """Three turns of twenty steps at a 48,000-token ceiling (the floor): windows are taken,
    and the agent pays extra calls for what they cut (reads and reruns, or recalls), with
    its figures still consistent."""
    arms = run_benchmark(
        "--turns", "3", "--steps", "20", "--arms", "native_best", "--ceiling", "48000"
    )
    (arm,) = arms
    check_arm(arm, arm["scripted_calls"])
    assert arm["windows"], arm
    assert arm["extra_calls"] > 0


@pytest.mark.parametrize("engine", ["claude", "codex"])
def test_each_cli_is_played_alone_and_under_condensate(engine: str) -> None:
    """``--engine claude|codex --small``: the agent drives the pinned CLI alone, as a thread
    of a real daemon, and through the wrapper (``condensate claude|codex``), with the CLI's
    own tools; every arm plays the whole task, and every call of the wrapped CLI went
    through the daemon's gateway (its thread logged each one)."""
    arms = run_benchmark("--engine", engine, "--small")
    assert [a["arm"] for a in arms] == list(CLI_ARMS)
    for arm in arms:
        check_arm(arm, arm["scripted_calls"])
        assert arm["failed_steps"] == 0
    assert "cli_vs_alone" in arms[1]["goals"]
    wrapped = arms[2]
    assert "wrapped_vs_alone" in wrapped["goals"]
    assert wrapped["model_calls_logged"] == wrapped["calls"]


def test_a_need_quotes_a_line_json_leaves_as_it_is() -> None:
    """Every need of the task is a line JSON does not escape, found in what produced it."""
    task = build_task(3, 20)
    texts = [*task.files.values(), *(text for text, _ in task.outputs.values())]
    for turn in task.turns:
        for action in turn.actions:
            for need in action.needs:
                assert json.dumps(need.snippet)[1:-1] == need.snippet
                assert any(need.snippet in text for text in texts), need


def test_a_file_need_comes_from_the_middle_of_the_file() -> None:
    """A receipt or a clamp shows a file's head: a need never quotes the first fifth."""
    builder = Builder(random.Random(1), 1)  # noqa: S311 - a benchmark's task, not a secret
    text = builder.file("src/report/cli.py")
    head = text.splitlines()[: len(text.splitlines()) // 5]
    assert not set(clean_lines(text)) & {line.split("\t", 1)[-1].strip() for line in head}
