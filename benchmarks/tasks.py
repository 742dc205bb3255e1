"""A long scripted coding task, generated deterministically, for replays and benchmarks.

The task: add a ``--format`` option to a report tool's CLI, keep the existing flags stable and
get the test suite green. It runs as a native (``api``) thread over a dozen human turns: each
turn starts with a human steer (the first is the brief), then the agent reads files (code of
600 to 4,000 tokens, a few files reread often), searches, edits (some edits fail), writes new
files, runs the tests (failing runs with tracebacks, exit code 1, then passing ones) and other
commands, and ends the turn with a short answer. A few steers arrive in the middle of a turn.

Every text comes from ``random.Random(seed)``; token counts are whatever tiktoken says when the
events are replayed. ``long_task()`` is the full task (at least 300 model calls);
``long_task(calls=90)`` is the CI size.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from benchmarks.planner_scale import code_file, ident, prose, search_output, sentence
from condensate.events import (
    AssistantMessage,
    Event,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from condensate.replay import Recording

SEED = 20_261_207
MODEL = "anthropic:claude-opus-5-5"
BASELINE = 12_000
"""System prompt, tool schemas and skills of a native thread (as in planner_scale)."""
FULL_CALLS = 330
REREAD_AFTER = 40
"""In the rereads variant, a read may go back to a file last read this many calls ago..."""
REREAD_SHARE = 0.4
"""... this often."""
CHARS_PER_TOKEN = 3.6
START = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)

BRIEF = (
    "Add a --format option (table, csv, json) to the report CLI in src/report/cli.py. Keep "
    "every existing flag and its output stable, put the formatters in src/report/formats.py, "
    "and get the whole test suite green. Do not change the public API of report.core."
)
STEERS = (
    "The CSV output must quote every field; our spreadsheet import breaks otherwise.",
    "Please don't touch src/report/legacy.py, another team owns it.",
    "json output should be one object per line (JSON Lines), not one big array.",
    "Keep the default format as table so existing scripts don't notice anything.",
    "The test for totals is flaky on CI; find out why before you change it.",
    "Also add a --output FILE option; write to stdout when it's absent.",
    "Use the existing Money type for amounts, don't format floats yourself.",
    "Run the slow integration tests too before you say it's done.",
    "Document the new flags in docs/cli.md, with one example per format.",
    "The table width must follow the terminal; fall back to 100 columns.",
    "Rename the helper you added to render_rows; format_rows is taken in core.",
    "Last thing: make sure `report --help` lists the formats in alphabetical order.",
)
MID_TURN_STEERS = (
    "Wait, before that: the CSV header row must stay exactly as it is today.",
    "FYI the CI runs Python 3.11, don't use 3.12-only syntax.",
    "Quick note: tests/fixtures is generated, never edit it by hand.",
)
MODULES = (
    "src/report/cli.py",
    "src/report/core.py",
    "src/report/formats.py",
    "src/report/money.py",
    "src/report/table.py",
    "src/report/legacy.py",
    "src/report/io.py",
    "src/report/config.py",
    "src/report/terminal.py",
    "src/report/totals.py",
    "src/report/rows.py",
    "src/report/filters.py",
    "src/report/sources/csv_source.py",
    "src/report/sources/db_source.py",
    "src/report/sources/api_source.py",
    "src/report/plugins/__init__.py",
    "src/report/plugins/markdown.py",
    "src/report/cache.py",
    "src/report/errors.py",
    "src/report/schema.py",
    "tests/test_cli.py",
    "tests/test_formats.py",
    "tests/test_totals.py",
    "tests/test_table.py",
    "tests/test_money.py",
    "tests/test_io.py",
    "tests/integration/test_end_to_end.py",
    "tests/conftest.py",
    "docs/cli.md",
    "pyproject.toml",
)
TEST_COMMANDS = (
    "pytest -q tests/test_formats.py",
    "pytest -q tests/test_cli.py",
    "pytest -q tests/test_totals.py",
    "pytest -q",
    "pytest -q -m slow tests/integration",
)
OTHER_COMMANDS = ("ruff check src tests", "git diff --stat", "mypy src", "git status --short")


def _chars(rng: random.Random, low: int, high: int) -> int:
    """A log-uniform size in characters for a token range."""
    tokens = math.exp(rng.uniform(math.log(low), math.log(high)))
    return int(tokens * CHARS_PER_TOKEN)


def failing_run(rng: random.Random, command: str, chars: int) -> str:
    """pytest output with failures and their tracebacks; exit code 1."""
    lines = [f"$ {command}", "============================= test session starts =="]
    failures = 0
    while sum(map(len, lines)) < chars:
        test = f"tests/test_{ident(rng, 1)}.py::test_{ident(rng, 3)}"
        failures += 1
        lines += [
            f"____________________ {test} ____________________",
            "",
            f"    def test_{ident(rng, 2)}(tmp_path):",
            f"        rows = load_rows(tmp_path / '{ident(rng, 1)}.csv')",
            f">       assert render_rows(rows, fmt='{rng.choice(('csv', 'json', 'table'))}') "
            f"== expected_{ident(rng, 1)}",
            f"E       AssertionError: assert '{ident(rng)}' == '{ident(rng)}'",
            f"E         - {sentence(rng)}",
            f"E         + {sentence(rng)}",
            "",
            f"src/report/formats.py:{rng.randint(10, 300)}: AssertionError",
        ]
    lines.append(
        f"=========== {failures} failed, {rng.randint(40, 300)} passed in "
        f"{rng.uniform(0.5, 30):.2f}s ==========="
    )
    return "\n".join(lines) + "\n[exit code 1]"


def passing_run(rng: random.Random, command: str) -> str:
    dots = "".join(rng.choice("....s") for _ in range(rng.randint(60, 300)))
    return (
        f"$ {command}\n{dots}\n{len(dots)} passed, {rng.randint(0, 4)} skipped in "
        f"{rng.uniform(0.5, 40):.2f}s\n[exit code 0]"
    )


@dataclass
class TaskBuilder:
    rng: random.Random
    clock: datetime = START
    events: list[Event] = field(default_factory=list)
    calls: int = 0
    files: dict[str, str] = field(default_factory=dict)
    rereads: random.Random | None = None
    """Set for the variant in which the agent reads again files it read long ago (whose
    results a window has likely cleared by then)."""
    read_at: dict[str, int] = field(default_factory=dict)

    def tick(self, low: float = 5, high: float = 40) -> datetime:
        self.clock += timedelta(seconds=self.rng.uniform(low, high))
        return self.clock

    def file(self, path: str) -> str:
        """A file's text; rereads mostly see the same text, an edited file changes a bit."""
        if path not in self.files:
            rng = random.Random(f"{SEED}:{path}")
            if path.endswith(".md"):
                self.files[path] = prose(rng, rng.randint(20, 120))
            elif path.endswith(".toml"):
                self.files[path] = "\n".join(
                    f"{ident(rng)} = {rng.randint(0, 99)}" for _ in range(60)
                )
            else:
                self.files[path] = code_file(rng, _chars(rng, 600, 4_000))
        return self.files[path]

    def pick_file(self) -> str:
        weights = [1 / (i + 1) ** 0.8 for i in range(len(MODULES))]
        return self.rng.choices(MODULES, weights)[0]

    def call(self, name: str, arguments: dict[str, str], text: str = "") -> str:
        self.calls += 1
        call_id = f"toolu_{self.calls:05d}"
        self.events.append(
            AssistantMessage(
                at=self.tick(),
                text=text or prose(self.rng, self.rng.randint(1, 2)),
                tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),),
                message_id=f"msg_{self.calls:05d}",
            )
        )
        return call_id

    def result(
        self, call_id: str, tool: str, argument: str, output: str, *, error: bool = False
    ) -> None:
        self.events.append(
            ToolResult(
                at=self.tick(1, 8),
                call_id=call_id,
                tool=tool,
                argument=argument,
                output=output,
                is_error=error,
            )
        )

    # -- one step of the agent ----------------------------------------------------------------

    def read(self) -> None:
        path = self.pick_file()
        if self.rereads is not None:
            old = sorted(p for p, at in self.read_at.items() if self.calls - at >= REREAD_AFTER)
            if old and self.rereads.random() < REREAD_SHARE:
                path = self.rereads.choice(old)
            self.read_at[path] = self.calls
        call_id = self.call("read", {"path": path}, f"Reading {path}.")
        self.result(call_id, "read", path, self.file(path))

    def search(self) -> None:
        pattern = self.rng.choice(
            ("def render_", "format_rows", "--format", "Money(", "class .*Formatter", "csv.writer")
        )
        call_id = self.call("search", {"pattern": pattern, "path": "src"})
        output = search_output(self.rng, _chars(self.rng, 120, 900))
        self.result(call_id, "search", pattern, output)

    def edit(self) -> None:
        path = self.rng.choice(MODULES[:5] + MODULES[9:12] + MODULES[20:24])
        call_id = self.call(
            "edit",
            {"path": path, "old": ident(self.rng, 3), "new": ident(self.rng, 3)},
            f"Editing {path}: {sentence(self.rng)}",
        )
        if self.rng.random() < 0.12:
            self.result(
                call_id,
                "edit",
                path,
                f"edit: the text to replace was not found in {path}; it must match the file "
                "exactly, including indentation. Read the file again before editing.",
                error=True,
            )
            return
        first = self.rng.randint(5, 300)
        last = first + self.rng.randint(1, 30)
        self.files.pop(path, None)
        self.result(
            call_id, "edit", path, f"Edited {path}: replaced 1 occurrence (lines {first}-{last})."
        )

    def write(self) -> None:
        path = f"tests/test_{ident(self.rng, 1)}_format.py"
        body = code_file(self.rng, _chars(self.rng, 200, 900))
        call_id = self.call("write", {"path": path, "content": body[:400]}, f"Writing {path}.")
        self.result(call_id, "write", path, f"Wrote {body.count(chr(10)) + 1} lines to {path}.")

    def test(self, fail_share: float) -> None:
        command = self.rng.choice(TEST_COMMANDS)
        call_id = self.call("shell", {"command": command}, f"Running {command}.")
        if self.rng.random() < fail_share:
            output = failing_run(self.rng, command, _chars(self.rng, 250, 1_100))
            self.result(call_id, "shell", command, output, error=True)
        else:
            self.result(call_id, "shell", command, passing_run(self.rng, command))

    def other(self) -> None:
        command = self.rng.choice(OTHER_COMMANDS)
        call_id = self.call("shell", {"command": command})
        output = search_output(self.rng, _chars(self.rng, 60, 700))
        self.result(call_id, "shell", command, f"$ {command}\n{output}\n[exit code 0]")

    # -- turns --------------------------------------------------------------------------------

    def turn(self, steer: str, calls: int, mid_steer: str | None) -> None:
        self.events.append(TurnStarted(at=self.tick(60, 600)))
        self.events.append(UserMessage(at=self.tick(1, 3), text=steer))
        for i in range(calls - 1):
            progress = i / max(calls - 2, 1)
            if mid_steer is not None and i == calls // 2:
                self.events.append(UserMessage(at=self.tick(1, 3), text=mid_steer))
            roll = self.rng.random()
            if 0.68 <= roll < 0.9 and progress >= 0.3:
                self.test(0.75 - 0.6 * progress)
                continue
            if progress < 0.3:
                step = self.read if roll < 0.65 else self.search if roll < 0.9 else self.other
            elif roll < 0.33:
                step = self.read
            elif roll < 0.41:
                step = self.search
            elif roll < 0.63:
                step = self.edit
            elif roll < 0.68:
                step = self.write
            else:
                step = self.other
            step()
        self.calls += 1
        self.events.append(
            AssistantMessage(
                at=self.tick(),
                text=f"Done with this step. {prose(self.rng, 3)}",
                message_id=f"msg_{self.calls:05d}",
            )
        )
        self.events.append(TurnEnded(at=self.tick(1, 2), outcome="completed"))


def long_task(calls: int = FULL_CALLS, seed: int = SEED, *, rereads: bool = False) -> Recording:
    """The scripted task with about ``calls`` model calls (at least 300 for the full size);
    with ``rereads``, the variant in which the agent reads again what it read long ago."""
    rng = random.Random(seed)
    builder = TaskBuilder(rng, rereads=random.Random(seed + 1) if rereads else None)
    steers = [BRIEF, *STEERS]
    turns = len(steers)
    base, extra = divmod(calls, turns)
    mids = {3: MID_TURN_STEERS[0], 6: MID_TURN_STEERS[1], 9: MID_TURN_STEERS[2]}
    for index, steer in enumerate(steers):
        builder.turn(steer, max(base + (index < extra), 3), mids.get(index))
    return Recording(
        "generated",
        f"long_task(calls={calls}, seed={seed}{', rereads' if rereads else ''})",
        "api",
        MODEL,
        BASELINE,
        tuple(builder.events),
    )
