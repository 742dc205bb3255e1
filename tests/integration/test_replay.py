"""``condensate replay``: loading Condensate logs, Claude Code transcripts and Codex rollouts,
and replaying them through the policies against the in-process fake model server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.tasks import long_task
from condensate.events import AssistantMessage, ThreadCreated, ToolResult, UserMessage
from condensate.replay import ReplayConfig, load, replay, text_report, write_events
from condensate.eventlog.sqlite_sync import EventLog

ROOT = Path(__file__).resolve().parents[2]
POLICY_KEYS = {
    "billed",
    "weighted_input",
    "cache_read_share",
    "cost_usd",
    "windows",
    "summaries_written",
    "peak_prompt",
    "limit",
    "retention",
}
CHECKS = {"human", "errors", "files", "pairs", "ceiling"}


def _jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_cli_replays_a_condensate_log_as_json(tmp_path: Path) -> None:
    """``condensate replay LOG --json`` prints one report with every policy's bill, windows,
    peak and retention, and the ratios against both baselines."""
    log = tmp_path / "task.jsonl"
    write_events(log, long_task(60))
    done = subprocess.run(
        [sys.executable, "-m", "condensate", "replay", str(log), "--json", "--window", "60000"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["recording"]["model_calls"] == 60
    assert set(report["policies"]) == {"condensate", "unmanaged", "single-summary"}
    for name, result in report["policies"].items():
        assert not POLICY_KEYS - result.keys(), name
        assert result["retention"].keys() >= CHECKS
        billed = result["billed"]
        assert billed["input"] == billed["uncached"] + billed["cache_read"] + billed["cache_write"]
        assert result["peak_prompt"] > 0
    ours = report["policies"]["condensate"]
    assert ours["retention"]["ceiling"]["passed"]
    assert ours["retention"]["pairs"]["passed"]
    assert ours["retention"]["human"]["passed"]
    assert ours["peak_prompt"] <= ours["limit"]
    assert {"condensate_vs_unmanaged", "condensate_vs_single_summary"} <= report["ratios"].keys()


async def test_sqlite_log_replays_its_largest_thread(tmp_path: Path) -> None:
    """A Condensate SQLite log is read read-only; its busiest thread is replayed."""
    recording = long_task(30)
    created = ThreadCreated(
        at=recording.events[0].at, engine="api", model=recording.model, cwd="/w"
    )
    with EventLog.open(tmp_path / "c.db") as log:
        log.append("small", [created])
        log.append("big", [created, *recording.events])
    loaded = load(tmp_path / "c.db")
    assert loaded.name.endswith(":big")
    assert loaded.model_calls == recording.model_calls
    report = await replay(loaded, ReplayConfig(window=60_000, policies=("condensate",)))
    assert report.results["condensate"].calls == recording.model_calls
    assert "condensate" in text_report(report)


def _claude_lines() -> list[dict[str, Any]]:
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 15_000, "cache_read_input_tokens": 0}
    base = {"sessionId": "s1", "isSidechain": False}
    lines: list[dict[str, Any]] = [
        {**base, "type": "user", "message": {"role": "user", "content": "Fix tests/test_io.py"}},
    ]
    for i in range(8):
        mid = f"msg_{i}"
        message = {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5", "usage": usage}
        lines.append(
            {
                **base,
                "type": "assistant",
                "message": {**message, "content": [{"type": "text", "text": f"Step {i}."}]},
            }
        )
        lines.append(
            {
                **base,
                "type": "assistant",
                "message": {
                    **message,
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"toolu_{i}",
                            "name": "Read",
                            "input": {"file_path": f"src/m{i}.py"},
                        }
                    ],
                },
            }
        )
        lines.append(
            {
                **base,
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"toolu_{i}",
                            "content": "x = 1\n" * 400,
                            "is_error": i == 3,
                        }
                    ],
                },
            }
        )
    lines.append(
        {
            **base,
            "isSidechain": True,
            "type": "user",
            "message": {"role": "user", "content": "subagent prompt"},
        }
    )
    lines.append(
        {
            **base,
            "type": "assistant",
            "message": {
                "id": "msg_end",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "usage": usage,
                "content": [{"type": "text", "text": "Done."}],
            },
        }
    )
    return lines


async def test_claude_code_transcript_is_read_and_replayed(tmp_path: Path) -> None:
    """Assistant lines merge by message id, results take their call's tool and path,
    sidechains are skipped, and the baseline comes from the first recorded prompt."""
    recording = load(_jsonl(tmp_path / "session.jsonl", _claude_lines()))
    assert recording.source == "claude"
    assert recording.model == "anthropic:claude-sonnet-4-5"
    assert recording.model_calls == 9
    first = recording.events[1]
    assert isinstance(first, AssistantMessage)
    assert first.text == "Step 0."
    assert first.tool_calls[0].name == "Read"
    results = [e for e in recording.events if isinstance(e, ToolResult)]
    assert [r.argument for r in results[:2]] == ["src/m0.py", "src/m1.py"]
    assert [r.is_error for r in results].count(True) == 1
    assert not any(isinstance(e, UserMessage) and "subagent" in e.text for e in recording.events)
    assert 10_000 < recording.baseline < 15_003
    report = await replay(recording, ReplayConfig(window=200_000, policies=("condensate",)))
    assert report.results["condensate"].retention.passed


async def test_codex_rollout_is_read_and_replayed(tmp_path: Path) -> None:
    """Developer and environment messages are baseline; function calls and their outputs
    become calls and results, a non-zero exit code a failure."""
    lines: list[dict[str, Any]] = [
        {"type": "session_meta", "payload": {"id": "t1", "cwd": "/w"}},
        {"type": "turn_context", "payload": {"model": "gpt-5.5"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "rules"}],
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "<environment_context>cwd</environment_context>"}
                ],
            },
        },
        {"type": "event_msg", "payload": {"type": "task_started"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "run it"}],
            },
        },
    ]
    for i, code in enumerate((0, 1, 0)):
        lines.append(
            {
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": "exec_command",
                    "arguments": json.dumps({"cmd": f"pytest -k t{i}"}),
                    "call_id": f"c{i}",
                },
            }
        )
        lines.append(
            {
                "type": "response_item",
                "payload": {
                    "type": "function_call_output",
                    "call_id": f"c{i}",
                    "output": f"Process exited with code {code}\nOutput:\nsome output {i}",
                },
            }
        )
    lines.append(
        {
            "type": "response_item",
            "payload": {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "call_id": "p1",
                "input": "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** End Patch",
            },
        }
    )
    lines.append(
        {
            "type": "response_item",
            "payload": {
                "type": "custom_tool_call_output",
                "call_id": "p1",
                "output": "Success. Updated A src/a.py",
            },
        }
    )
    lines.append(
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
        }
    )
    lines.append({"type": "event_msg", "payload": {"type": "task_complete"}})
    recording = load(_jsonl(tmp_path / "rollout.jsonl", lines))
    assert recording.source == "codex"
    assert recording.model == "openai:gpt-5.5"
    users = [e.text for e in recording.events if isinstance(e, UserMessage)]
    assert users == ["run it"]
    results = [e for e in recording.events if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [False, True, False, False]
    assert results[-1].argument == "src/a.py"
    report = await replay(recording, ReplayConfig(policies=("condensate", "unmanaged")))
    data = report.to_json()
    assert data["policies"]["condensate"]["retention"]["passed"]
    assert data["policies"]["condensate"]["model_calls"] == 5


def _replay_cli(log: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "condensate", "replay", str(log), "--json", *more],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_replay_takes_tier_and_trigger_settings_by_name(tmp_path: Path) -> None:
    """``--set`` changes the settings the condensate policy replays with: the departures
    (a cheap window before the line, a target, one result kept) give other windows than the
    defaults; a name that
    is no setting, or a value a setting cannot take, is one sentence and exit 2 (a
    configuration error)."""
    log = tmp_path / "task.jsonl"
    write_events(log, long_task(90))
    base = ("--window", "60000", "--policies", "condensate")
    default = _replay_cli(log, *base)
    departures = ("early_share=0.1", "target_share=0.3", "keep_pairs=1")
    tuned = _replay_cli(log, *base, *(a for d in departures for a in ("--set", d)))
    assert default.returncode == tuned.returncode == 0, (default.stderr, tuned.stderr)
    ours = json.loads(default.stdout)["policies"]["condensate"]
    theirs = json.loads(tuned.stdout)["policies"]["condensate"]
    assert ours["windows"] != theirs["windows"]
    assert ours["weighted_input"] != theirs["weighted_input"]
    unknown = _replay_cli(log, *base, "--set", "keep_pears=3")
    assert unknown.returncode == 2  # a configuration error
    assert "There is no setting 'keep_pears'" in unknown.stderr
    assert "keep_pairs" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    bad = _replay_cli(log, *base, "--set", "keep_pairs=some")
    assert bad.returncode == 2
    assert "keep_pairs takes a whole number, not 'some'" in bad.stderr
