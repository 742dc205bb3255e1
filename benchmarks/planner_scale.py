"""Planner scale: what one planning step costs against thread size, and what counting the
prompt from scratch with tiktoken would cost instead.

Design §2 asks that steps 2 to 4 of a model call (projector update, meter, planner) stay cheap
on a thread of a million tokens. For synthetic threads of 1k, 10k and 100k events (about 100
tokens an event: file reads of 500-5,000 tokens, shell and test output, searches, diffs, small
edits, human steers, assistant text) this builds the log as the runtime would (measure and plan
before every model call, take the windows the planner asks for, with a ~2,000-token curator
summary) and then times ONE planning step after each appended tool result::

    view.apply(stored); meter.measure(view, ...); planner.plan(view, ...)

against rendering the current view (``render_window``) and counting it with tiktoken from
scratch: the encoding's own ``encode_ordinary`` on the whole text, without the chunk memo of
``condensate.core.tokens`` (what that memo makes of the same count is reported beside it).

The thread runs as the daemon would run it on the defaults: the native loop's profile
(``engines.profile``: its ceiling share and cap, no operator setting) and the model's window
from ``providers.windows`` (claude-opus-5-5: 1,000,000 tokens, so a 120,000-token ceiling).

    python benchmarks/planner_scale.py               # a table
    python benchmarks/planner_scale.py --json        # one JSON object
    python benchmarks/planner_scale.py --json --sizes 1000,10000 --check   # CI
    python benchmarks/planner_scale.py --early 0.1 --target 0.3 --keep-pairs 1   # departures

Every thread is deterministic (``random.Random(seed)``). Token counts are real (the model's
tiktoken encoding through ``condensate.core.tokens.count_event``); a memo of counted texts stands in
for ``ThreadBuilder(count=True)`` so that the 100k thread builds in seconds, with the same
numbers. The garbage collector is held off during each timed step only, as ``timeit`` does.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import shlex
import statistics
import sys
import time
from collections import Counter as Tally
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import structlog
import tiktoken

from adapters.native import ENGINE as NATIVE
from condensate.core import meter
from condensate.core.ceilings import CeilingSettings
from condensate.core.meter import ContextUsage, ModelWindow
from condensate.core.planner import (
    Ask,
    Cut,
    Decision,
    HoldBack,
    PlannerSettings,
    Proceed,
    Stop,
    plan,
)
from condensate.core.render import render_window
from condensate.core.tokens import Counter, count_event, counter_for
from condensate.engine.registry import profile
from condensate.events import (
    AssistantMessage,
    Author,
    ChildJoined,
    ChildSpawned,
    Engine,
    Event,
    Stored,
    SystemLine,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from condensate.providers import parse_model
from condensate.providers.windows import resolve
from condensate.testing.threads import ThreadBuilder

MODEL = "anthropic:claude-opus-5-5"
WINDOW: ModelWindow = resolve(parse_model(MODEL), {})
"""The model's window as the daemon resolves it (no operator setting)."""
ENGINE: Engine = NATIVE.name
PROFILE = profile(NATIVE, CeilingSettings(), PlannerSettings(), NATIVE.settings.model_construct())
"""The native loop on the defaults: its ceiling share and cap, no operator cap or setting
(``model_construct`` reads no environment)."""
BASELINE = 12_000
"""System prompt, tool schemas and skills of a native-loop thread (ours, a typical size)."""
SEED = 20_261_130
DEFAULT_SIZES = (1_000, 10_000, 100_000)
TARGET_SIZE = 10_000
TARGET_MEDIAN_MS = 5.0
TARGET_RATIO = 75.0
COUNT_REPETITIONS = 5
MAX_DECISIONS_PER_CALL = 4
"""A cut is re-measured and planned again; a ladder has at most three rungs and a forced cut."""


# -- text ---------------------------------------------------------------------------------------

_WORDS = (
    "window token session thread event planner projector meter ceiling summary receipt cursor "
    "buffer config settings store snapshot engine adapter runtime curator answer child spawn "
    "batch result output stream frame message usage prompt baseline line limit budget tail "
    "range cut index entry view render count cache schema record upcast version clock deadline "
    "turn steer brief pin shell edit write search path file module parser lexer node graph "
    "queue worker pool task job retry backoff client server request response header body "
    "status error handler router route policy account invoice order cart price user group "
    "role grant audit metric trace span sample bucket shard replica lease lock timer signal"
)
WORDS = _WORDS.split()
_VERBS = (
    "check read update rename move split merge drop keep count parse render load save retry "
    "validate normalize flush close open replace extend trim sort group cache refresh"
)
VERBS = _VERBS.split()
_ADJECTIVES = (
    "stale empty missing pending cached frozen partial valid invalid recent older larger "
    "smaller nested optional required duplicate unused"
)
ADJECTIVES = _ADJECTIVES.split()
TYPES = ("int", "str", "bool", "float", "bytes", "list[str]", "dict[str, Any]", "Path", "None")
DIRS = ("src/app", "src/core", "src/api", "src/store", "src/cli", "lib", "tests/unit", "pkg")


def ident(rng: random.Random, words: int = 2) -> str:
    return "_".join(rng.sample(WORDS, words))


def class_name(rng: random.Random) -> str:
    return "".join(w.capitalize() for w in rng.sample(WORDS, 2))


SENTENCES = (
    "The {a} {b} should {verb} the {c} before the {d} is {adj}.",
    "Make sure {d}_{e} does not {verb} a {adj} {a}.",
    "When the {a} is {adj}, {verb} its {b} and log the {c}.",
    "I think the {a} {b} breaks because {d}_{e}() returns a {adj} {c}.",
    "Next, {verb} every {a} in {dir}/{d}_{e}.py.",
    "The test for {d}_{e} expects {n} {b}s, not {m}.",
)


def sentence(rng: random.Random) -> str:
    a, b, c, d, e = rng.sample(WORDS, 5)
    return rng.choice(SENTENCES).format(
        a=a,
        b=b,
        c=c,
        d=d,
        e=e,
        verb=rng.choice(VERBS),
        adj=rng.choice(ADJECTIVES),
        dir=rng.choice(DIRS),
        n=rng.randint(2, 900),
        m=rng.randint(1, 9),
    )


def prose(rng: random.Random, sentences: int) -> str:
    return " ".join(sentence(rng) for _ in range(sentences))


def code_path(rng: random.Random) -> str:
    return f"{rng.choice(DIRS)}/{ident(rng)}.py"


STATEMENTS = (
    "{i}    {name} = {other}({name}s, limit={n})",
    "{i}    if not {name}:\n{i}        return None",
    "{i}    for {name} in self.{other}:\n{i}        {name}.flush()",
    "{i}    # {text}",
    '{i}    log.info("{other}", {name}={name}, count=len({name}))',
    "{i}    {name} = {{k: v for k, v in {other}.items() if v is not None}}",
    '{i}    raise ValueError(f"{{{name}!r}} is not a {other}")',
)


def _function(rng: random.Random, indent: str = "") -> list[str]:
    args = ", ".join(f"{ident(rng, 1)}: {rng.choice(TYPES)}" for _ in range(rng.randint(0, 3)))
    lines = [
        f"{indent}def {ident(rng)}({args}) -> {rng.choice(TYPES)}:",
        f'{indent}    """{sentence(rng)}"""',
    ]
    for _ in range(rng.randint(2, 9)):
        name, other = ident(rng, 1), ident(rng)
        template = rng.choice(STATEMENTS)
        text = sentence(rng) if "{text}" in template else ""
        lines.append(
            template.format(i=indent, name=name, other=other, n=rng.randint(1, 500), text=text)
        )
    lines.append(f"{indent}    return {ident(rng)}")
    return lines


def code_file(rng: random.Random, chars: int) -> str:
    lines = [f'"""{prose(rng, 2)}"""', "", "from __future__ import annotations", ""]
    lines += [f"from {ident(rng, 1)}.{ident(rng, 1)} import {class_name(rng)}" for _ in range(4)]
    size = 0
    while size < chars:
        if rng.random() < 0.3:
            block = [f"class {class_name(rng)}:", f'    """{sentence(rng)}"""', ""]
            for _ in range(rng.randint(1, 4)):
                block += [*_function(rng, "    "), ""]
        else:
            block = [*_function(rng), ""]
        lines += ["", *block]
        size += sum(len(line) + 1 for line in block) + 1
    numbered = enumerate("\n".join(lines).split("\n"), 1)
    return "\n".join(f"{n:>5}\t{line}" for n, line in numbered)


def _size(lines: list[str]) -> int:
    """Characters so far; the lists are short enough that a sum is cheap."""
    return sum(map(len, lines)) + len(lines)


def test_run(rng: random.Random, chars: int) -> str:
    lines = [f"==== test session starts ==== platform linux, {rng.randint(50, 900)} items"]
    while _size(lines) < chars:
        outcome = rng.choice(("PASSED", "PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"))
        lines.append(
            f"tests/unit/test_{ident(rng)}.py::test_{ident(rng, 3)} {outcome} "
            f"[{rng.randint(0, 99):>3}%]"
        )
        if outcome == "FAILED" and rng.random() < 0.5:
            lines += [
                "Traceback (most recent call last):",
                f'  File "{code_path(rng)}", line {rng.randint(10, 900)}, in {ident(rng)}',
                f"    {ident(rng, 1)} = {ident(rng)}({ident(rng, 1)})",
                f"AssertionError: assert {rng.randint(0, 99)} == {rng.randint(100, 999)}",
            ]
    failed = sum("FAILED" in x for x in lines)
    lines.append(
        f"==== {failed} failed, {len(lines) - failed} passed in {rng.uniform(0.3, 90):.2f}s ===="
    )
    return "\n".join(lines)


def build_log(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    while _size(lines) < chars:
        lines.append(
            rng.choice(
                (
                    f"{code_path(rng)}:{rng.randint(1, 900)}:{rng.randint(1, 80)}: F401 "
                    f"`{ident(rng, 1)}` imported but unused",
                    f"{code_path(rng)}:{rng.randint(1, 900)}: error: Argument 1 to "
                    f'"{ident(rng)}" has incompatible type "{rng.choice(TYPES)}"; expected '
                    f'"{rng.choice(TYPES)}"  [arg-type]',
                    f"Compiling {ident(rng)} v0.{rng.randint(1, 30)}.{rng.randint(0, 9)}",
                    f"   {rng.randint(1, 99)} files changed, {rng.randint(1, 900)} insertions(+)",
                    f"commit {rng.getrandbits(160):040x}\n    {sentence(rng)}",
                )
            )
        )
    return "\n".join(lines)


def search_output(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    while _size(lines) < chars:
        lines.append(
            f"{code_path(rng)}:{rng.randint(1, 900)}:    {ident(rng, 1)} = "
            f"{ident(rng)}({ident(rng, 1)}, {ident(rng, 1)}={rng.randint(0, 99)})"
        )
    return "\n".join(lines)


def listing(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    while _size(lines) < chars:
        lines.append(
            f"-rw-r--r--  1 dev dev {rng.randint(100, 90_000):>6} "
            f"Nov 30 12:{rng.randint(0, 59):02} "
            f"{ident(rng)}.{rng.choice(('py', 'md', 'toml', 'json', 'ts'))}"
        )
    return "\n".join(lines)


def diff(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    while _size(lines) < chars:
        path = code_path(rng)
        start = rng.randint(1, 800)
        lines += [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}"]
        lines.append(f"@@ -{start},12 +{start},14 @@ def {ident(rng)}(")
        for text in _function(rng, "    "):
            lines.append(rng.choice((" ", " ", "+", "-")) + text)
    return "\n".join(lines)


def summary_text(rng: random.Random, chars: int) -> str:
    parts = ["## Goal", prose(rng, 3), "## Done so far"]
    while _size(parts) < chars:
        heading = rng.random() < 0.1
        parts.append(f"## {class_name(rng)}" if heading else f"- {prose(rng, rng.randint(1, 3))}")
    parts += ["## Next", prose(rng, 3)]
    return "\n".join(parts)


def log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


CHARS_PER_TOKEN = 3.6
PROSE_CHARS_PER_TOKEN = 4.3
"""Only to aim a generated text at a size; every stored count is tiktoken's."""


@dataclass
class Pool:
    """Texts made once and reused, as agents reread the same files and rerun the same tests."""

    texts: list[tuple[str, str]]
    """(argument, text)"""
    weights: list[float]

    def pick(self, rng: random.Random) -> tuple[str, str]:
        return rng.choices(self.texts, self.weights)[0]


def make_pool(
    rng: random.Random,
    *,
    n: int,
    tokens: tuple[int, int],
    make: Callable[[random.Random, int], str],
    argument: Callable[[random.Random], str],
) -> Pool:
    texts = [
        (argument(rng), make(rng, int(log_uniform(rng, *tokens) * CHARS_PER_TOKEN)))
        for _ in range(n)
    ]
    # A few files get most of the reads (Zipf-like).
    return Pool(texts, [1 / (i + 1) for i in range(n)])


@dataclass
class Texts:
    reads: Pool
    diffs: Pool
    tests: Pool
    builds: Pool
    searches: Pool
    listings: Pool
    summaries: list[str]

    @classmethod
    def make(cls, seed: int) -> Texts:
        rng = random.Random(seed)
        return cls(
            reads=make_pool(rng, n=96, tokens=(500, 5_000), make=code_file, argument=code_path),
            diffs=make_pool(rng, n=24, tokens=(200, 2_500), make=diff, argument=code_path),
            tests=make_pool(
                rng, n=32, tokens=(150, 3_000), make=test_run, argument=lambda _: "pytest -q"
            ),
            builds=make_pool(
                rng, n=24, tokens=(100, 1_500), make=build_log, argument=lambda _: "make check"
            ),
            searches=make_pool(rng, n=48, tokens=(40, 1_500), make=search_output, argument=ident),
            listings=make_pool(
                rng, n=16, tokens=(30, 400), make=listing, argument=lambda r: r.choice(DIRS)
            ),
            summaries=[summary_text(rng, int(2_000 * PROSE_CHARS_PER_TOKEN)) for _ in range(8)],
        )


# -- counting -----------------------------------------------------------------------------------


@dataclass
class MemoCounter:
    """The model's tiktoken counter with a memo: a text reread is counted once."""

    inner: Counter
    memo: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.inner.name

    def count(self, text: str) -> int:
        tokens = self.memo.get(text)
        if tokens is None:
            tokens = self.memo[text] = self.inner.count(text)
        return tokens


def label(decision: Decision) -> str:
    match decision:
        case Proceed():
            return "proceed"
        case Cut(kind=kind, forced=forced):
            return f"cut:{kind}{':forced' if forced else ''}"
        case HoldBack(why=why):
            return f"hold:{why}"
        case Ask():
            return "ask"
        case Stop():
            return "stop"


# -- the simulated runtime ------------------------------------------------------------------------


@dataclass
class Sim:
    """One native-loop thread driven as the runtime drives it, on a ``ThreadBuilder``."""

    rng: random.Random
    texts: Texts
    counter: MemoCounter
    b: ThreadBuilder = field(init=False)
    ceilings: CeilingSettings = PROFILE.ceilings
    planner: PlannerSettings = PROFILE.planner
    decisions: Tally[str] = field(default_factory=Tally)
    windows: Tally[str] = field(default_factory=Tally)
    last_usage: ContextUsage | None = None
    calls_left: int = 0
    in_turn: bool = False
    children: list[tuple[str, int]] = field(default_factory=list)
    """(child id, rounds until it is joined)"""
    spawned: int = 0

    def __post_init__(self) -> None:
        self.b = ThreadBuilder(
            engine=ENGINE,
            model=MODEL,
            baseline=BASELINE,
            recall=NATIVE.recall,
            clamp_tokens=self.planner.tiers.clamp_tokens,
            count=False,
        )

    # appending

    def event(self, event: Event) -> Stored:
        """The event as the log would store it (seq and tokens), not yet folded."""
        stored = Stored(self.b.thread_id, self.b.seq + 1, event, count_event(event, self.counter))
        self.b.log.append(stored)
        return stored

    def add(self, event: Event) -> Stored:
        stored = self.event(event)
        self.b.view.apply(stored)
        return stored

    # planning

    def measure_and_plan(self) -> Decision:
        usage = meter.measure(self.b.view, WINDOW, self.ceilings)
        self.last_usage = usage
        return plan(self.b.view, usage, self.planner, self.b.clock)

    def carry_out(self, decision: Decision) -> bool:
        """Step 5 of a model call. True when the decision cut and the view must be planned
        again; sets ``in_turn`` False when the turn stops."""
        self.decisions[label(decision)] += 1
        match decision:
            case Cut() as cut:
                summary = self.rng.choice(self.texts.summaries) if cut.needs_curator else None
                author: Author | None = "curator" if summary is not None else None
                self.add(cut.window(self.b.seq, self.b.tick(), summary=summary, author=author))
                self.windows[cut.kind] += 1
                return True
            case HoldBack(line=(code, text)):
                self.add(SystemLine(at=self.b.tick(), code=code, text=text))
            case Stop(reason=reason):
                self.add(SystemLine(at=self.b.tick(), code="turn-stopped", text=reason))
                self.add(TurnEnded(at=self.b.tick(), outcome="stopped", reason=reason))
                self.in_turn = False
            case _:  # Proceed, a HoldBack without a line; Ask never comes for an api thread
                pass
        return False

    def settle(self, first: Decision | None = None) -> None:
        """Plan (unless ``first`` was planned already) and carry out until nothing cuts."""
        decision = first if first is not None else self.measure_and_plan()
        for _ in range(MAX_DECISIONS_PER_CALL):
            if not self.carry_out(decision):
                return
            decision = self.measure_and_plan()
        self.carry_out(decision)

    def provider_usage(self) -> None:
        """The provider's own count: its tokenizer is not cl100k, so it differs a little."""
        local = BASELINE + self.b.view.view_tokens
        self.b.usage(int(local * self.rng.uniform(1.0, 1.08)))

    # conversation

    def start_turn(self) -> None:
        self.add(TurnStarted(at=self.b.tick()))
        text = prose(self.rng, self.rng.choice((1, 1, 2, 3, 5, 8, 14)))
        if self.rng.random() < 0.3:
            text += f"\n\nSee {code_path(self.rng)} and run `pytest -q tests/unit`."
        self.add(UserMessage(at=self.b.tick(), text=text, pinned=self.rng.random() < 0.01))
        self.calls_left = 1 + int(self.rng.expovariate(1 / 14))
        self.in_turn = True
        self.settle()

    def end_turn(self) -> None:
        """The final model call of a turn: a reply without tool calls."""
        self.provider_usage()
        reply = prose(self.rng, self.rng.randint(2, 16))
        self.add(AssistantMessage(at=self.b.tick(), text=reply))
        self.add(TurnEnded(at=self.b.tick(), outcome="completed"))
        self.in_turn = False

    def tool_output(self) -> tuple[str, str, str]:
        """(tool, argument, output) for one call, in a coding agent's usual mix."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.045:
            return ("read", *self.texts.reads.pick(rng))
        if roll < 0.14:
            return ("search", *self.texts.searches.pick(rng))
        if roll < 0.17:
            return ("ls", *self.texts.listings.pick(rng))
        if roll < 0.19:
            return ("git_diff", *self.texts.diffs.pick(rng))
        if roll < 0.25:
            return ("shell", *self.texts.tests.pick(rng))
        if roll < 0.30:
            return ("shell", *self.texts.builds.pick(rng))
        if roll < 0.53:
            command = rng.choice(("git status --short", "ls -la", "python -m mypy", "wc -l"))
            out = "\n".join(f" M {code_path(rng)}" for _ in range(rng.randint(0, 6)))
            return ("shell", command, out or f"exit code {rng.choice((0, 0, 1, 2))}")
        if roll < 0.92:
            path = code_path(rng)
            start = rng.randint(1, 800)
            end = start + rng.randint(0, 30)
            return (
                "edit",
                path,
                f"The file {path} has been updated: lines {start}-{end} replaced.",
            )
        path = code_path(rng)
        return ("write", path, f"Wrote {rng.randint(5, 400)} lines to {path}.")

    def tool_round(self) -> Stored:
        """A model call that asks for tools: usage, the assistant message, all its results but
        the last, which is returned staged (stored, not folded) for the caller to fold."""
        rng = self.rng
        self.provider_usage()
        width = 1 if rng.random() < 0.85 else rng.randint(2, 4)
        calls = [self.tool_output() for _ in range(width)]
        child = self.maybe_spawn_or_join(calls)
        tool_calls = tuple(
            ToolCall(id=f"call_{self.b.seq}_{i}", name=tool, arguments={"arg": argument})
            for i, (tool, argument, _) in enumerate(calls)
        )
        thinking = (
            (ThinkingBlock(text=prose(rng, rng.randint(1, 4))),) if rng.random() < 0.2 else ()
        )
        text = prose(rng, rng.randint(1, 3)) if rng.random() < 0.6 else ""
        self.add(
            AssistantMessage(at=self.b.tick(), text=text, thinking=thinking, tool_calls=tool_calls)
        )
        if child is not None:
            self.add(child)
        results = [
            ToolResult(
                at=self.b.tick(),
                call_id=call.id,
                tool=tool,
                argument=argument,
                output=output,
                is_error=tool == "shell" and rng.random() < 0.08,
            )
            for call, (tool, argument, output) in zip(tool_calls, calls, strict=True)
        ]
        for result in results[:-1]:
            self.add(result)
        self.calls_left -= 1
        return self.event(results[-1])

    def maybe_spawn_or_join(
        self, calls: list[tuple[str, str, str]]
    ) -> ChildSpawned | ChildJoined | None:
        """Now and then a child is spawned and joined a few rounds later, in place of the
        round's first call."""
        rng = self.rng
        self.children = [(child, rounds - 1) for child, rounds in self.children]
        due = next((child for child, rounds in self.children if rounds <= 0), None)
        if due is not None:
            self.children = [(c, r) for c, r in self.children if c != due]
            result = f"Child {due} finished.\n\n{prose(rng, rng.randint(4, 30))}"
            calls[0] = ("join", due, result)
            return ChildJoined(
                at=self.b.tick(), child_id=due, result=result, call_id=f"call_{self.b.seq}_0"
            )
        if rng.random() < 0.006:
            self.spawned += 1
            child = f"c{self.spawned}"
            self.children.append((child, rng.randint(3, 20)))
            calls[0] = ("spawn", child, f"Spawned child {child}.")
            call_id = f"call_{self.b.seq}_0"
            return ChildSpawned(
                at=self.b.tick(), child_id=child, brief=prose(rng, 2), call_id=call_id
            )
        return None

    def next_result(self) -> Stored:
        """Run the conversation until a tool result is due; it comes back staged."""
        while True:
            if not self.in_turn:
                self.start_turn()
                continue
            if self.calls_left <= 0:
                self.end_turn()
                continue
            return self.tool_round()

    def build(self, events: int) -> None:
        while self.b.seq < events:
            staged = self.next_result()
            self.b.view.apply(staged)
            self.settle()

    def step(self) -> tuple[int, Decision]:
        """One timed planning step after a tool result; the decision is then carried out."""
        staged = self.next_result()
        view, ceilings, planner, now = self.b.view, self.ceilings, self.planner, self.b.clock
        gc.disable()
        try:
            start = time.perf_counter_ns()
            view.apply(staged)
            usage = meter.measure(view, WINDOW, ceilings)
            decision = plan(view, usage, planner, now)
            elapsed = time.perf_counter_ns() - start
        finally:
            gc.enable()
        self.last_usage = usage
        self.settle(decision)
        return elapsed, decision


# -- measuring ----------------------------------------------------------------------------------


def percentile(sorted_values: list[float], share: float) -> float:
    """Nearest rank: the smallest value with at least ``share`` of the values at or below it."""
    rank = max(1, math.ceil(share * len(sorted_values)))
    return sorted_values[rank - 1]


def ms(ns: float) -> float:
    return round(ns / 1e6, 6)


def count_from_scratch(sim: Sim) -> dict[str, Any]:
    """Render the view and count it with tiktoken from scratch, the way to size a prompt
    that keeps no state: the encoding's ``encode_ordinary`` on the whole text. The
    ``counter_for`` counter is not that: it remembers every chunk of lines it has counted
    (the build counted them all), so the same count through it is reported apart
    (``memo_ms``) and never enters the ratio."""
    memo = counter_for(MODEL)
    encoding = tiktoken.get_encoding(memo.name)
    render_ns, count_ns, memo_ns = [], [], []
    tokens = chars = 0
    for _ in range(COUNT_REPETITIONS):
        start = time.perf_counter_ns()
        text = render_window(sim.b.view)
        rendered = time.perf_counter_ns()
        tokens = len(encoding.encode_ordinary(text))
        counted = time.perf_counter_ns()
        memo_tokens = memo.count(text)
        memo_ns.append(time.perf_counter_ns() - counted)
        render_ns.append(rendered - start)
        count_ns.append(counted - rendered)
        chars = len(text)
        assert memo_tokens == tokens, "the chunk memo must count what tiktoken counts"
    total = [r + c for r, c in zip(render_ns, count_ns, strict=True)]
    return {
        "count_ms": ms(statistics.median(total)),
        "render_ms": ms(statistics.median(render_ns)),
        "tiktoken_ms": ms(statistics.median(count_ns)),
        "memo_ms": ms(statistics.median(memo_ns)),
        "tokens": tokens,
        "chars": chars,
        "repetitions": COUNT_REPETITIONS,
    }


def run_size(
    events: int,
    steps: int,
    texts: Texts,
    counter: MemoCounter,
    seed: int,
    *,
    planner: PlannerSettings,
) -> dict[str, Any]:
    sim = Sim(random.Random(seed + events), texts, counter, planner=planner)
    started = time.perf_counter()
    sim.build(events)
    build_s = time.perf_counter() - started
    built_events = sim.b.seq
    built_view = sim.b.view.view_tokens
    built_history = sum(s.tokens for s in sim.b.log)
    built_windows = dict(sorted(sim.windows.items()))
    built_decisions = dict(sorted(sim.decisions.items()))

    gc.collect()
    timings: list[int] = []
    mix: Tally[str] = Tally()
    by_decision: dict[str, list[int]] = {}
    for _ in range(steps):
        elapsed, decision = sim.step()
        timings.append(elapsed)
        mix[label(decision)] += 1
        by_decision.setdefault(label(decision), []).append(elapsed)
    ordered = sorted(float(t) for t in timings)
    median_ms = ms(statistics.median(ordered))
    count = count_from_scratch(sim)
    view = sim.b.view
    history = sum(s.tokens for s in sim.b.log)
    usage = sim.last_usage
    assert usage is not None
    return {
        "events": built_events,
        "history_tokens": built_history,
        "history_tokens_per_event": round(built_history / built_events, 1),
        "events_after_steps": sim.b.seq,
        "history_tokens_after_steps": history,
        "view_tokens_built": built_view,
        "view_tokens": view.view_tokens,
        "view_entries": len(view.entries),
        "prompt_tokens": usage.used,
        "line": usage.line,
        "build_s": round(build_s, 3),
        "windows_built": sum(built_windows.values()),
        "windows_by_kind": built_windows,
        "decisions_built": built_decisions,
        "steps": steps,
        "median_ms": median_ms,
        "p99_ms": ms(percentile(ordered, 0.99)),
        "mean_ms": ms(statistics.fmean(ordered)),
        "max_ms": ms(ordered[-1]),
        "decision_mix": dict(sorted(mix.items())),
        "median_ms_by_decision": {
            name: ms(statistics.median(values)) for name, values in sorted(by_decision.items())
        },
        **count,
        "ratio": round(count["count_ms"] / median_ms, 1) if median_ms > 0 else None,
    }


def machine() -> dict[str, Any]:
    import tiktoken  # noqa: PLC0415  (only its version is wanted here)

    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "tiktoken": tiktoken.__version__,
        "encoding": counter_for(MODEL).name,
    }


def run(
    sizes: list[int], steps: int | None, seed: int, planner: PlannerSettings = PROFILE.planner
) -> dict[str, Any]:
    counter = MemoCounter(counter_for(MODEL))
    started = time.perf_counter()
    texts = Texts.make(seed)
    texts_s = time.perf_counter() - started
    results: dict[str, Any] = {}
    for size in sizes:
        n = steps if steps is not None else (200 if size <= 10_000 else 100)
        results[str(size)] = run_size(size, n, texts, counter, seed, planner=planner)
    target = results.get(str(TARGET_SIZE))
    met = None
    if target is not None:
        met = target["median_ms"] <= TARGET_MEDIAN_MS and (target["ratio"] or 0) >= TARGET_RATIO
    return {
        "benchmark": "planner_scale",
        "command": shlex.join(["python", *sys.argv]),
        "machine": machine(),
        "model": MODEL,
        "engine": ENGINE,
        "model_window": WINDOW.tokens,
        "baseline_tokens": BASELINE,
        "tiers": {
            "early_share": planner.tiers.early_share,
            "target_share": planner.tiers.target_share,
            "keep_pairs": planner.tiers.keep_pairs,
        },
        "seed": seed,
        "step": "view.apply(tool result) + meter.measure + planner.plan",
        "count": "render_window(view) + tiktoken encode_ordinary (no memo), median of "
        f"{COUNT_REPETITIONS}; ratio = count_ms / median_ms; memo_ms: the same text through "
        "condensate.core.tokens' chunk memo, warm (not in the ratio)",
        "gc": "disabled during each timed step only",
        "text_pools_s": round(texts_s, 3),
        "targets": {
            "size": TARGET_SIZE,
            "median_ms_max": TARGET_MEDIAN_MS,
            "ratio_min": TARGET_RATIO,
            "met": met,
        },
        "sizes": results,
    }


def table(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"planner scale: {report['model']} ({report['engine']}), window {report['model_window']:,}",
        f"python {m['python']}, {m['cpu_count']} cpus, {m['encoding']}; {report['command']}",
        "",
        f"{'events':>8} {'history':>11} {'view':>8} {'windows':>7} {'build s':>8} "
        f"{'median ms':>10} {'p99 ms':>8} {'count ms':>9} {'ratio':>7} {'memo ms':>8}  decisions",
    ]
    for r in report["sizes"].values():
        mix = ", ".join(f"{k} {v}" for k, v in r["decision_mix"].items())
        lines.append(
            f"{r['events']:>8,} {r['history_tokens']:>11,} {r['view_tokens']:>8,} "
            f"{r['windows_built']:>7} {r['build_s']:>8.2f} {r['median_ms']:>10.4f} "
            f"{r['p99_ms']:>8.4f} {r['count_ms']:>9.2f} {r['ratio']:>7.0f} "
            f"{r['memo_ms']:>8.2f}  {mix}"
        )
    t = report["targets"]
    if t["met"] is not None:
        lines.append(
            f"\ntarget at {t['size']:,} events: median <= {t['median_ms_max']} ms and ratio >= "
            f"{t['ratio_min']:.0f}: {'met' if t['met'] else 'MISSED'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in DEFAULT_SIZES),
        help="comma-separated thread sizes in events (default: %(default)s)",
    )
    parser.add_argument("--steps", type=int, default=None, help="timed steps per size")
    parser.add_argument("--seed", type=int, default=SEED)
    tiers = PROFILE.planner.tiers
    parser.add_argument(
        "--early",
        type=float,
        default=tiers.early_share,
        help="a departure: cheap windows before the line from this share of it (default: none)",
    )
    parser.add_argument(
        "--target",
        type=float,
        default=tiers.target_share,
        help="a departure: windows cut down to this share of the line (default: %(default)s)",
    )
    parser.add_argument(
        "--keep-pairs",
        type=int,
        default=tiers.keep_pairs,
        help="recent results cheap tiers keep (default: %(default)s)",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when the target at 10,000 events is missed"
    )
    args = parser.parse_args(argv)
    # Anything the core logs goes to stderr, so that stdout is the report alone.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 100:
        parser.error("--sizes takes thread sizes of at least 100 events")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be positive")
    chosen = replace(
        tiers, early_share=args.early, target_share=args.target, keep_pairs=args.keep_pairs
    )
    report = run(sizes, args.steps, args.seed, replace(PROFILE.planner, tiers=chosen))
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 1 if args.check and report["targets"]["met"] is False else 0


if __name__ == "__main__":
    sys.exit(main())
