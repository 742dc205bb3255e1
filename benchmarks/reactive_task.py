"""Reactive task: one long coding task played by an agent that needs what it saw, through
each arm, every arm against its own fake model server, in one run.

The agent (``condensate.testing.fake_model.agent``) plays a scripted *task*: each step is a
tool call that declares what the agent must see to take it (a line of the file it edits, the
traceback of the failure it fixes, a line of a search it acts on, the human's instruction its
answer follows). When a request lacks what the next step needs, the agent first gets it back:
``recall(seq)`` when the thread offers it and a receipt names the result, else it reads the
file again or runs the command again, each an extra model call billed like any other. Some
things cannot be had again (a human message; a one-off command, ``ci/flaky``, whose next run
says something else): a step that needs one it no longer sees fails.

The arms (each in a fresh working directory, the same task and seed):

- ``native_default``: the native loop (engine ``api``) of a real daemon on claude-opus-5-5
  (window 1,000,000; ceiling 40 % capped at 120,000) at Condensate's defaults;
- ``native_best``: the same with ``BEST`` (the settings the sweep found cheapest at equal
  outcome);
- the peers' own loops at their own defaults (``benchmarks/peers``): ``openhands`` (OpenHands
  SDK's ``default_condenser()``, on claude-opus-5-5 and, as ``openhands_opus_5``, on
  claude-opus-5), ``pydantic_ai_harness`` and ``gwenflow``;
- ``--engine claude|codex``: ``cli_alone``, the pinned CLI on its default model and window
  with its own compaction (as ``cli_long_task.py`` starts it); ``condensate_default``, the
  CLI as a thread of a real daemon at Condensate's defaults; and ``condensate_wrapped``, the
  same CLI, arguments and environment as ``cli_alone`` started through the wrapper
  (``condensate claude``, ``condensate codex``) of a real daemon: the person's own session
  in their terminal, an attached thread managed in flight through the gateway.

Each request goes through a router in this process that asks the agent for the reply and
queues it at the fake just before the request; compaction and curator requests get a stand-in
summary (every human message verbatim, the files read and the failing runs by name: what a
model asked to summarize keeps; Condensate's curator appends its verbatim record itself).
The fake keeps the vendors' rules (preserved thinking, breakpoints and the lookback, OpenAI's
automatic caching, lifetimes on a clock that moves ``PACE`` seconds a call).

Per arm: ``weighted_input`` (the prompt in the model's base input tokens, each class at the
model's price ratio; summary calls included), ``weighted_output`` (output, re-thinking
included, at the output/input price ratio), ``usd``, ``calls``, ``extra_calls`` (recalls and
refetches), ``failed_steps``, ``refused`` (prompt too long or thinking refused), thinking
dropped, ``peak_prompt``, windows, ``wall_s``.

    python benchmarks/reactive_task.py                  # the native arms, a table
    python benchmarks/reactive_task.py --engine claude --json
    python benchmarks/reactive_task.py --sweep --json   # the native loop over tier settings
    python benchmarks/reactive_task.py --small --json   # CI: 2 turns of 8 steps
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import math
import random
import re
import shlex
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import aiohttp
import structlog

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import cli_long_task as cli
from benchmarks.peers import Driver, gwenflow, openhands, peer_python, pydantic_ai_harness
from benchmarks.planner_scale import code_file, prose, sentence
from benchmarks.tasks import BRIEF, MODULES, STEERS, failing_run, passing_run
from condensate.core import prices
from condensate.core.tokens import bare_model
from condensate.testing.fake_model import REAL_WINDOWS, Reply, Text
from condensate.testing.fake_model.agent import (
    Action,
    Again,
    Dialect,
    Need,
    ReactiveAgent,
    Turn,
    prompt_text,
)

SEED = 20_261_205
TURNS = 12
ACTIONS = 25
"""Steps a human turn: 12 x (25 + an answer) = 312 scripted model calls, extra calls aside."""
SMALL_TURNS = 2
SMALL_ACTIONS = 8
NATIVE_MODEL = "anthropic:claude-opus-5-5"
NATIVE_WINDOW = 1_000_000
CEILING_PI = "CONDENSATE_WINDOW_CEILING_PI"
PACE = cli.PACE
DISTANCES = ((0.6, 1, 3), (0.3, 4, 12), (0.1, 13, 60))
"""How far back (in steps) a need reaches: (share, nearest, farthest). Most steps act on what
they just saw; some on what they read at the start of the work; a few on what they saw long
before (the file read last turn, the failure that came back)."""
ONE_OFF_SHARE = 0.35
"""Of the failing test runs, this share are one-off (``ci/flaky``): the next run passes."""
BEST: dict[str, str] = {}
"""The settings ``--sweep`` found cheapest at equal outcome for the native loop (environment
variables); empty: the defaults are the best found."""
KEEP = "CONDENSATE_WINDOW_KEEP_PAIRS"
TARGET = "CONDENSATE_WINDOW_TARGET"
EARLY = "CONDENSATE_WINDOW_EARLY"
SWEEP: dict[str, dict[str, str]] = {
    "defaults": {},
    "keep 1": {KEEP: "1"},
    "keep 6": {KEEP: "6"},
    "keep 8": {KEEP: "8"},
    "keep 12": {KEEP: "12"},
    "target 0.6": {TARGET: "0.6"},
    "target 0.3": {TARGET: "0.3"},
    "early 0.1, target 0.3": {EARLY: "0.1", TARGET: "0.3"},
    "early 0.1, target 0.3, keep 1 (the old defaults)": {EARLY: "0.1", TARGET: "0.3", KEEP: "1"},
    "ceiling 80k": {"ceiling": "80000"},
    "ceiling 60k": {"ceiling": "60000"},
    "ceiling 60k, keep 1": {"ceiling": "60000", KEEP: "1"},
}
"""The tier settings the sweep tries, as the environment an operator sets (``ceiling``: the
engine's ceiling setting, ``CONDENSATE_WINDOW_CEILING_PI`` or ``_CLAUDE``)."""
GOALS = {
    "cli_vs_alone": 0.5,
    "wrapped_vs_alone": 0.5,
    "native_vs_cheapest_peer": 0.75,
    "extra_calls_margin": 0.10,
}
_MARKER = re.compile(r"\[HUMAN-MARKER-(\d+)\]")
_CLEAN = re.compile(r"^[A-Za-z0-9_ .,:;()=+*/\[\]{}<>!?'#%-]{24,}$")


# -- the task ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """The agent's turns and what the working directory must hold for their commands."""

    turns: tuple[Turn, ...]
    files: dict[str, str]
    outputs: dict[str, tuple[str, int]]
    """``ci/<tool>/<n>`` -> (text, exit code) of a prepared command."""

    @property
    def steps(self) -> int:
        return sum(len(t.actions) + 1 for t in self.turns)

    @property
    def needs(self) -> Counter[str]:
        kinds: Counter[str] = Counter()
        for turn in self.turns:
            for action in turn.actions:
                for need in action.needs:
                    kinds["once" if need.again is None else need.again.kind] += 1
            kinds["human"] += len(turn.final_needs)
        return kinds


@dataclass(frozen=True)
class Seen:
    """A result the agent saw: its step, where it came from, the lines a later step may need
    and how that step gets them back."""

    step: int
    kind: Literal["file", "run", "once", "grep"]
    source: str
    lines: tuple[str, ...]
    again: Again | None
    what: str


def _chars(rng: random.Random, low: int, high: int) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high))) * cli.CHARS_PER_TOKEN)


def clean_lines(text: str, middle: bool = True) -> list[str]:
    """Lines a need may quote: long, plain (JSON leaves them as they are), and, for a file,
    from its middle (a receipt or a clamp never shows them by accident)."""
    lines = [line.split("\t", 1)[-1].strip() for line in text.splitlines()]
    if middle:
        lines = lines[len(lines) // 5 : len(lines) * 4 // 5]
    return [line for line in lines if _CLEAN.match(line)]


@dataclass
class Builder:
    rng: random.Random
    seed: int
    files: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, tuple[str, int]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    step: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    def file(self, path: str) -> str:
        if path not in self.files:
            own = random.Random(f"{self.seed}:{path}")
            text = code_file(own, _chars(own, 700, 4_200))
            self.files[path] = text
        return self.files[path]

    def prepared(self, tool: str, text: str, code: int) -> str:
        self.counts[tool] += 1
        number = self.counts[tool]
        self.outputs[f"{tool}/{number}"] = (text, code)
        return f"./ci/{tool} {number}"

    def pick(self, kinds: set[str]) -> Seen | None:
        """An earlier result of these kinds, about a sampled distance back."""
        candidates = [s for s in self.seen if s.kind in kinds and s.lines]
        if not candidates:
            return None
        roll, low, high = self.rng.random(), 1, 3
        for share, near, far in DISTANCES:
            if roll < share:
                low, high = near, far
                break
            roll -= share
        wanted = self.step - self.rng.randint(low, high)
        return min(candidates, key=lambda s: (abs(s.step - wanted), -s.step))

    def need(self, seen: Seen) -> Need:
        line = self.rng.choice(seen.lines)
        return Need(line, seen.what, seen.source, seen.again)

    def read(self, path: str) -> Action:
        text = self.file(path)
        again = Again("read", path)
        self.seen.append(Seen(self.step, "file", path, tuple(clean_lines(text)), again, path))
        return Action("read", path, f"Reading {path}.")

    def grep(self) -> Action:
        path = self.rng.choice(MODULES[:20])
        lines = clean_lines(self.file(path))
        words = sorted({w for line in lines for w in re.findall(r"[a-z_]{8,}", line)})
        word = self.rng.choice(words) if words else "import"
        matched = [line for line in self.file(path).splitlines() if word in line.split("\t", 1)[-1]]
        command = f"grep -n -e {word} {path}"
        kept = tuple(m for m in clean_lines("\n".join(matched), middle=False))
        again = Again("run", command)
        what = f"the search for {word} in {path}"
        self.seen.append(Seen(self.step, "grep", command, kept, again, what))
        return Action("run", command, f"Searching {path} for {word}.")

    def test(self, progress: float) -> Action:
        target = self.rng.choice(cli.TEST_TARGETS)
        fails = self.rng.random() < 0.8 - 0.6 * progress
        if not fails:
            text = passing_run(self.rng, f"pytest -q {target}").removesuffix("\n[exit code 0]")
            command = self.prepared("pytest", text, 0)
            return Action("run", command, f"Running the tests: {target}.")
        text = failing_run(self.rng, f"pytest -q {target}", _chars(self.rng, 700, 3_000))
        text = text.removesuffix("\n[exit code 1]")
        errors = tuple(line.strip() for line in text.splitlines() if line.startswith("E   "))
        errors = tuple(e for e in errors if _CLEAN.match(e))
        if self.rng.random() < ONE_OFF_SHARE:
            command = self.prepared("flaky", text, 1)
            what = f"the one-off failure of {command}"
            self.seen.append(Seen(self.step, "once", command, errors, None, what))
        else:
            command = self.prepared("pytest", text, 1)
            what = f"the failure of {command}"
            again = Again("run", command)
            self.seen.append(Seen(self.step, "run", command, errors, again, what))
        return Action("run", command, f"Running the tests: {target}.")

    def apply(self, seen: Seen, verb: str) -> Action:
        """An edit that acts on an earlier result: it needs a line of it."""
        need = self.need(seen)
        path = seen.source if seen.kind == "file" else self.rng.choice(MODULES[:12])
        first = self.rng.randint(5, 300)
        text = f"Applied change to {path} (lines {first}-{first + self.rng.randint(1, 30)})."
        command = self.prepared("apply", text, 0)
        return Action("run", command, f"{verb} {path}: {sentence(self.rng)}", (need,))

    def action(self, progress: float) -> Action:
        roll = self.rng.random()
        weights = [1 / (i + 1) ** 0.6 for i in range(len(MODULES))]
        if progress < 0.25 or roll < 0.28:
            return self.read(self.rng.choices(MODULES, weights)[0])
        if roll < 0.38:
            return self.grep()
        if roll < 0.55:
            return self.test(progress)
        if roll < 0.8 and (seen := self.pick({"file"})) is not None:
            return self.apply(seen, "Editing")
        if roll < 0.92 and (seen := self.pick({"run", "once"})) is not None:
            return self.apply(seen, "Fixing the failure in")
        if (seen := self.pick({"grep"})) is not None:
            need = self.need(seen)
            path = seen.source.rsplit(" ", 1)[-1]
            read = self.read(path)
            return Action(read.kind, read.target, f"Following the match in {path}.", (need,))
        return self.read(self.rng.choices(MODULES, weights)[0])


def human_text(number: int) -> str:
    humans = [BRIEF, *STEERS]
    return f"{humans[(number - 1) % len(humans)]} {cli.marker(number)}"


def build_task(turns: int = TURNS, actions: int = ACTIONS, seed: int = SEED) -> Task:
    """The task: ``turns`` human turns of ``actions`` steps and an answer each."""
    builder = Builder(random.Random(seed), seed)
    out: list[Turn] = []
    for number in range(1, turns + 1):
        human = human_text(number)
        steps: list[Action] = []
        for i in range(actions):
            builder.step += 1
            steps.append(builder.action(i / max(actions - 1, 1)))
        builder.step += 1
        instruction = Need(cli.marker(number), f"the human's message {number}", None, None)
        final = f"Done with this step. {prose(builder.rng, 2)}"
        out.append(Turn(human, tuple(steps), final, (instruction,)))
    return Task(tuple(out), builder.files, builder.outputs)


CI_TOOL = """#!/bin/sh
# A prepared command of this benchmark: prints output N of its tool, exits its code.
here=$(dirname "$0")
tool=$(basename "$0")
n=$1
"""
ONCE = """if [ -e "$here/out/$tool/$n.seen" ]; then
  echo "1 passed in 0.4s (the failure did not come back)"
  exit 0
fi
touch "$here/out/$tool/$n.seen"
"""
PRINT = """cat "$here/out/$tool/$n.out"
exit "$(cat "$here/out/$tool/$n.code")"
"""


def write_workspace(task: Task, work: Path) -> None:
    for path, text in task.files.items():
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + "\n")
    ci = work / "ci"
    ci.mkdir(parents=True, exist_ok=True)
    for key, (text, code) in task.outputs.items():
        tool, number = key.split("/")
        out = ci / "out" / tool
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{number}.out").write_text(text + "\n")
        (out / f"{number}.code").write_text(f"{code}\n")
    for tool in ("pytest", "flaky", "apply"):
        script = ci / tool
        script.write_text(CI_TOOL + (ONCE if tool == "flaky" else "") + PRINT)
        script.chmod(0o755)


def stand_in_summary(task: Task, claude_summary: bool, body: Any, kind: str) -> Text:
    """What a model asked to summarize keeps: every human message it saw, verbatim; the
    files it read and the failing runs, by name (not their text)."""
    text = prompt_text(body)
    humans = [t.human for t in task.turns if t.final_needs[0].snippet in text]
    files = [p for p in task.files if p in text]
    failed = sorted({m.group(0) for m in re.finditer(r"\./ci/(?:pytest|flaky) \d+", text)})
    failed = [f for f in failed if task.outputs[f[5:].replace(" ", "/")][1]]
    parts = [
        "Summary of the work so far: adding a --format option to the report CLI.",
        "Every human message, verbatim, in order:",
        *(f'- "{h}"' for h in humans),
        f"Files read: {', '.join(files) or 'none'}.",
        f"Failed test runs: {', '.join(failed) or 'none'}.",
        f"State: {sentence(random.Random(len(text)))} Next: go on with the current step.",
    ]
    return cli.summary_reply("\n".join(parts), kind, claude_summary)


@dataclass
class AgentScript(cli.Script):
    """The router's script, played by the reactive agent."""

    agent: ReactiveAgent = field(default_factory=lambda: ReactiveAgent((), Dialect("native")))
    follow: bool = False
    """Find the human turn in each request (a peer runs all its turns on its own): the newest
    human marker it shows."""

    def next(self, body: Mapping[str, Any]) -> tuple[Reply, bool]:
        if self.follow:
            shown = [int(n) for n in _MARKER.findall(prompt_text(body))]
            if shown and max(shown) > self.turn:
                self.begin(max(shown))
        return self.agent.next(body), True

    def accept(self) -> None:
        self.agent.accept()

    def begin(self, turn: int) -> None:
        self.turn = turn
        self.agent.begin(turn)


# -- the arms ---------------------------------------------------------------------------------


class Peer(Protocol):
    """A peer's module in ``benchmarks/peers`` (read only: a module's constants)."""

    @property
    def PEER(self) -> str: ...
    @property
    def MODEL(self) -> str: ...
    @property
    def SUMMARY_PROMPT(self) -> str | None: ...
    @property
    def run(self) -> Driver: ...


Arm = Literal[
    "native_default",
    "native_best",
    "openhands",
    "pydantic_ai_harness",
    "gwenflow",
    "openhands_opus_5",
    "cli_alone",
    "condensate_default",
    "condensate_wrapped",
]
PEERS: dict[str, Peer] = {
    "openhands": openhands,
    "pydantic_ai_harness": pydantic_ai_harness,
    "gwenflow": gwenflow,
    "openhands_opus_5": openhands,
}
"""Each peer's own loop and default context management (``benchmarks/peers``), on the model
its module names (``PEER_MODELS`` for another)."""
PEER_MODELS = {"openhands_opus_5": "claude-opus-5"}
"""OpenHands' default condenser rewrites the history before signed thinking, which the Claude
models that check the prefix refuse (on claude-opus-5-5 the run ends at its first
condensation); on claude-opus-5, which runs no such check, it runs to the end (in Opus 5's
units: its list input price)."""
NATIVE_ARMS: tuple[Arm, ...] = ("native_default", "native_best", *PEERS)  # type: ignore[arg-type]
CLI_ARMS: tuple[Arm, ...] = ("cli_alone", "condensate_default", "condensate_wrapped")
PEER_TIMEOUT = 3_600.0


@dataclass
class PeerRouter(cli.Router):
    """The router for a peer: its own summary requests are compactions."""

    summary_prompt: str | None = None

    def classify(self, endpoint: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> str:
        if self.summary_prompt is not None and self.summary_prompt in cli.body_text(body):
            return "compaction"
        return super().classify(endpoint, body, headers)


async def peer_arm(name: str, arm: cli.Arm, model: str) -> cli.ArmRun:
    """The peer's own loop over every human turn, against the arm's router."""
    peer = PEERS[name]
    if peer_python(peer.PEER) is None:
        msg = f"the peer {name} is not installed here: run scripts/setup-peers"
        raise RuntimeError(msg)
    humans = [t.human for t in arm.task.turns]
    done = await peer.run(arm.router.url, model, arm.work, humans, PEER_TIMEOUT)
    run = cli.ArmRun()
    for outcome in done.turns:
        failed = outcome.error is not None
        run.turns.append(
            cli.TurnRecord(
                outcome.index + 1,
                "failed" if failed else "completed",
                outcome.seconds,
                outcome.error or "",
            )
        )
    if done.error is not None:
        run.turns.append(cli.TurnRecord(len(run.turns) + 1, "failed", done.seconds, done.error))
    run.compactions = done.condensations
    run.extra["context_management"] = done.context_management
    return run


@dataclass(frozen=True)
class Setup:
    task: Task
    root: Path
    pace: float
    engine: cli.Engine | None = None
    """None: the native loop's arms; else that CLI's."""
    ceiling: int | None = None
    """A cap on every managed arm's ceiling (``--ceiling``); None: the defaults."""


def native_env(extra: Mapping[str, str]) -> dict[str, str]:
    return {
        "CONDENSATE_MODEL_WINDOWS": json.dumps({NATIVE_MODEL: NATIVE_WINDOW}),
        "CONDENSATE_CURATOR_MODEL": cli.CURATOR_MODEL,
        **extra,
    }


async def run_arm(name: str, setup: Setup, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One arm against a fake and a router of its own, in a fresh working directory."""
    task = setup.task
    state = setup.root / name.replace(" ", "_").replace(",", "")
    work = state / "work"
    work.mkdir(parents=True)
    write_workspace(task, work)
    engine = setup.engine
    peer = PEERS.get(name)
    model = NATIVE_MODEL if engine is None else cli.MODELS[engine]
    window = NATIVE_WINDOW if engine is None else cli.WINDOWS[engine]
    if peer is not None:
        model = PEER_MODELS.get(name, peer.MODEL)
        window = REAL_WINDOWS[model]
    main_model = bare_model(model)
    windows = {main_model: window, bare_model(cli.CURATOR_MODEL): cli.CURATOR_WINDOW}
    fake = cli.FakeProcess(windows, state / "fake.log")
    await asyncio.to_thread(fake.start)
    dialect = Dialect("native" if engine is None else engine, str(work))
    agent = ReactiveAgent(task.turns, dialect)
    router = PeerRouter(
        fake.url,
        AgentScript({}, agent=agent, follow=peer is not None),
        functools.partial(stand_in_summary, task, engine == "claude"),
        main_model,
        bare_model(cli.CURATOR_MODEL),
        windows,
        pace=setup.pace,
        summary_prompt=None if peer is None else peer.SUMMARY_PROMPT,
    )
    turns = tuple(cli.HumanTurn(n, t.human, (), t.final) for n, t in enumerate(task.turns, start=1))
    recorder = cli.Recorder(fake.url, len(turns), state / "requests.jsonl")
    binary = "" if engine is None else cli.binary_of(engine)
    arm = cli.Arm(
        name, engine or "claude", binary, cli.Task(turns, {}, {}), router, recorder, work, state
    )
    started = time.perf_counter()
    try:
        await router.start()
        if peer is not None:
            run = await peer_arm(name, arm, main_model)
        elif name == "cli_alone":
            run = await cli.cli_alone(arm)
        elif engine is None:
            body = {"engine": "api", "model": NATIVE_MODEL}
            settings = native_env(tier_env(engine, setup.ceiling, env))
            run = await cli.managed(arm, None, thread_body=body, env=settings)
        elif name == "condensate_wrapped":
            own = cli.daemon_env(engine, binary, None)
            run = await cli.wrapped(arm, {**own, **tier_env(engine, setup.ceiling, env)})
        else:
            own = cli.daemon_env(engine, binary, None)
            run = await cli.managed(arm, None, env={**own, **tier_env(engine, setup.ceiling, env)})
        wall = time.perf_counter() - started
        async with aiohttp.ClientSession() as session:
            await recorder.collect(session)
    finally:
        await router.close()
        await asyncio.to_thread(fake.close)
    return figures(name, agent, recorder.seen, run, wall, model=main_model)


def tier_env(
    engine: cli.Engine | None, ceiling: int | None, env: Mapping[str, str] | None
) -> dict[str, str]:
    """The daemon's settings for an arm: ``env`` with ``ceiling`` as the engine's setting."""
    setting = CEILING_PI if engine is None else cli.CEILING_SETTING[engine]
    out = {setting if k == "ceiling" else k: v for k, v in (env or {}).items()}
    if ceiling is not None:
        out.setdefault(setting, str(ceiling))
    return out


@dataclass(frozen=True)
class Units:
    """Bills in one unit: base input tokens of the arm's own model (its input price per
    token), each call at its own model's list price, long-context tiers included; a call on a
    model without a price falls back to its own ratios (``cli.Seen.weighted``)."""

    model: str

    def input(self, seen: cli.Seen) -> float:
        tokens = seen.tokens
        billed = prices.cost(seen.model, replace(tokens, output=0))
        return seen.weighted if billed is None else billed / self.per_token

    def output(self, seen: cli.Seen) -> float:
        billed = prices.cost(seen.model, prices.Tokens(output=seen.output_tokens))
        return 5.0 * seen.output_tokens if billed is None else billed / self.per_token

    @property
    def per_token(self) -> float:
        price = prices.price_of(self.model)
        return (price.input if price is not None and price.input else 1.0) / 1_000_000


def figures(
    name: str,
    agent: ReactiveAgent,
    seen: Sequence[cli.Seen],
    run: cli.ArmRun,
    wall: float,
    *,
    model: str,
) -> dict[str, Any]:
    answered = [s for s in seen if s.answered]
    main = [s for s in answered if s.kind == "main"]
    total_input = sum(s.input_tokens for s in answered)
    cache_read = sum(s.cache_read for s in answered)
    units = Units(model)
    weighted_input = sum(units.input(s) for s in answered)
    weighted_output = sum(units.output(s) for s in answered)
    out: dict[str, Any] = {
        "arm": name,
        "model": model,
        "weighted_input": round(weighted_input, 1),
        "weighted_output": round(weighted_output, 1),
        "weighted_total": round(weighted_input + weighted_output, 1),
        "usd": round(sum(s.usd or 0.0 for s in answered), 4),
        "calls": len(answered),
        "calls_by_kind": dict(Counter(s.kind for s in answered)),
        **agent.to_json(),
        "refused": sum(1 for s in seen if s.reply == "window" or s.thinking_refused),
        "other_failed_requests": sum(1 for s in seen if not s.answered and s.reply != "window"),
        "rethink_tokens": sum(s.rethink_tokens for s in answered),
        "thinking_dropped": run.extra.get("thinking_dropped"),
        "model_calls_logged": run.extra.get("model_calls_logged"),
        "peak_prompt": max((s.input_tokens for s in main), default=0),
        "cache_read_share": round(cache_read / total_input, 4) if total_input else None,
        "summary_weighted_input": round(
            sum(units.input(s) for s in answered if s.kind in ("compaction", "curator")), 1
        ),
        "by_model": cli.by_model(answered),
        "windows": run.windows,
        "cli_compactions": run.compactions,
        "ceiling": run.ceiling,
        "turns_not_completed": [t.to_json() for t in run.turns if t.outcome != "completed"],
        "wall_s": round(wall, 2),
    }
    if "daemon_log_tail" in run.extra and out["turns_not_completed"]:
        out["daemon_log_tail"] = run.extra["daemon_log_tail"]
    return out


async def measure(setup: Setup, arms: Sequence[Arm]) -> list[dict[str, Any]]:
    results = []
    for name in arms:
        env = BEST if name == "native_best" else None
        results.append(await run_arm(name, setup, env))
    return results


async def sweep(setup: Setup, settings: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    """Condensate's arm under each of ``settings`` (a CLI's alone first, as the baseline), each
    with its weighted input against the first arm's."""
    results = [] if setup.engine is None else [await run_arm("cli_alone", setup)]
    prefix = "native" if setup.engine is None else "condensate"
    for name, env in settings.items():
        result = await run_arm(f"{prefix} {name}", setup, env)
        result["settings"] = tier_env(setup.engine, setup.ceiling, env)
        results.append(result)
    base = results[0]["weighted_input"]
    for result in results:
        result["vs_first"] = ratio(result["weighted_input"], base)
    return results


def ratio(ours: float | None, theirs: float | None) -> float | None:
    return round(ours / theirs, 4) if ours is not None and theirs else None


def goals(arms: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The issue's goals, where the arms measured them."""
    by = {a["arm"]: a for a in arms}
    out: dict[str, Any] = {}
    alone = by.get("cli_alone")
    for goal, name in (
        ("cli_vs_alone", "condensate_default"),
        ("wrapped_vs_alone", "condensate_wrapped"),
    ):
        ours = by.get(name)
        if alone is None or ours is None:
            continue
        allowed = alone["extra_calls"] * (1 + GOALS["extra_calls_margin"])
        measured = ratio(ours["weighted_input"], alone["weighted_input"])
        out[goal] = {
            "arm": name,
            "goal": GOALS[goal],
            "measured": measured,
            "failed_steps": ours["failed_steps"],
            "refused": ours["refused"],
            "extra_calls": ours["extra_calls"],
            "extra_calls_allowed": allowed,
            "met": measured is not None
            and measured <= GOALS[goal]
            and ours["failed_steps"] == 0
            and ours["refused"] == 0
            and ours["extra_calls"] <= allowed,
        }
    native = by.get("native_default")
    finished = [by[p] for p in PEERS if p in by and not by[p]["turns_not_completed"]]
    if native is not None and finished:
        cheapest = min(finished, key=lambda a: a["weighted_input"])
        measured = ratio(native["weighted_input"], cheapest["weighted_input"])
        allowed = cheapest["extra_calls"] * (1 + GOALS["extra_calls_margin"])
        out["native_vs_cheapest_peer"] = {
            "arm": "native_default",
            "goal": GOALS["native_vs_cheapest_peer"],
            "peer": cheapest["arm"],
            "measured": measured,
            "failed_steps": native["failed_steps"],
            "peer_failed_steps": cheapest["failed_steps"],
            "extra_calls": native["extra_calls"],
            "extra_calls_allowed": allowed,
            "met": measured is not None
            and measured <= GOALS["native_vs_cheapest_peer"]
            and native["failed_steps"] <= cheapest["failed_steps"]
            and native["extra_calls"] <= allowed,
        }
    return out


def run(
    arms: Sequence[Arm],
    turns: int,
    actions: int,
    *,
    engine: cli.Engine | None,
    pace: float,
    sweep_settings: Mapping[str, Mapping[str, str]] | None = None,
    keep: Path | None = None,
    ceiling: int | None = None,
) -> dict[str, Any]:
    task = build_task(turns, actions)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="condensate-reactive-") as tmp:
        root = keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        setup = Setup(task, root, pace, engine, ceiling)
        if sweep_settings is not None:
            measured = asyncio.run(sweep(setup, sweep_settings))
        else:
            measured = asyncio.run(measure(setup, arms))
    return {
        "benchmark": "reactive_task",
        "command": shlex.join(["python", *sys.argv]),
        "model": NATIVE_MODEL if engine is None else cli.MODELS[engine],
        "window": NATIVE_WINDOW if engine is None else cli.WINDOWS[engine],
        "engine": engine or "native",
        "pace_s": pace,
        "ceiling_cap": ceiling,
        "task": {
            "seed": SEED,
            "human_turns": len(task.turns),
            "steps_per_turn": actions,
            "scripted_calls": task.steps,
            "needs": dict(task.needs),
            "files": len(task.files),
            "prepared_outputs": len(task.outputs),
        },
        "arms": measured,
        "goals": goals(measured),
        "wall_s": round(time.perf_counter() - started, 2),
    }


def table(report: Mapping[str, Any]) -> str:
    task = report["task"]
    lines = [
        f"reactive_task: {report['engine']} on {report['model']} (window {report['window']:,}); "
        f"{task['human_turns']} turns x {task['steps_per_turn']} steps, "
        f"{task['scripted_calls']} scripted calls, needs {task['needs']}",
        "",
        f"{'arm':<52}{'weighted in':>12}{'out':>9}{'USD':>8}{'calls':>7}{'extra':>7}"
        f"{'failed':>8}{'refused':>9}{'peak':>9}{'cache':>8}{'wall s':>8}",
    ]
    for arm in report["arms"]:
        share = arm["cache_read_share"]
        lines.append(
            f"{arm['arm']:<52}{cli._k(arm['weighted_input']):>12}{cli._k(arm['weighted_output']):>9}"
            f"{arm['usd']:>8.2f}{arm['calls']:>7}{arm['extra_calls']:>7}"
            f"{arm['failed_steps']:>8}{arm['refused']:>9}{cli._k(arm['peak_prompt']):>9}"
            f"{'-' if share is None else f'{share:.1%}':>8}{arm['wall_s']:>8}"
        )
        versus = f", {arm['vs_first']}x the first arm" if arm.get("vs_first") else ""
        lines.append(f"    windows {arm['windows']}, compactions {arm['cli_compactions']}{versus}")
        if arm["turns_not_completed"]:
            lines.append(f"    turns not completed: {arm['turns_not_completed']}")
    for name, goal in report["goals"].items():
        lines.append(f"goal {name}: {goal}")
    lines.append(f"{report['wall_s']} s in all; {report['command']}")
    return "\n".join(lines)


MEDIAN_KEYS = (
    "weighted_input",
    "weighted_output",
    "weighted_total",
    "usd",
    "calls",
    "extra_calls",
    "failed_steps",
    "refused",
    "peak_prompt",
    "wall_s",
)


def medians(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The first report with each arm's figures the median over all of them (``runs``: how
    many; ``spread``: the lowest and highest weighted input)."""
    merged = dict(reports[0])
    arms = []
    for arm in reports[0]["arms"]:
        rows = [a for r in reports for a in r["arms"] if a["arm"] == arm["arm"]]
        middle = dict(arm)
        for key in MEDIAN_KEYS:
            middle[key] = statistics.median(row[key] for row in rows)
        weighted = [row["weighted_input"] for row in rows]
        middle["runs"] = len(rows)
        middle["spread"] = [min(weighted), max(weighted)]
        arms.append(middle)
    merged["arms"] = arms
    merged["goals"] = goals(arms)
    merged["wall_s"] = round(sum(r["wall_s"] for r in reports), 2)
    return merged


def json_lines(report: Mapping[str, Any]) -> str:
    """One JSON object per arm, each with what the run shared and the goals it is judged by."""
    shared = {k: report[k] for k in ("benchmark", "engine", "model", "window", "pace_s")}
    shared["seed"] = report["task"]["seed"]
    shared["scripted_calls"] = report["task"]["scripted_calls"]
    lines = []
    for arm in report["arms"]:
        judged = {k: g for k, g in report["goals"].items() if g.get("arm") == arm["arm"]}
        lines.append(json.dumps({**shared, **arm, "goals": judged}))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object per arm")
    parser.add_argument("--engine", choices=cli.ENGINES, default=None, help="run a CLI's arms")
    parser.add_argument("--sweep", action="store_true", help="Condensate's arm over SWEEP")
    parser.add_argument("--small", action="store_true", help="the CI size")
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None, help="steps a human turn")
    parser.add_argument("--arms", default=None, help="comma-separated arms to run")
    parser.add_argument("--pace", type=float, default=PACE)
    parser.add_argument("--keep", type=Path, default=None, help="keep state under this dir")
    parser.add_argument("--ceiling", type=int, default=None, help="cap the managed ceilings")
    parser.add_argument("--runs", type=int, default=1, help="report each arm's median of N")
    parser.add_argument("--report", type=Path, default=None, help="write the whole report here")
    args = parser.parse_args(argv)
    turns = args.turns or (SMALL_TURNS if args.small else TURNS)
    actions = args.steps or (SMALL_ACTIONS if args.small else ACTIONS)
    allowed = NATIVE_ARMS if args.engine is None else CLI_ARMS
    arms = [a for a in (args.arms or ",".join(allowed)).split(",") if a]
    if unknown := set(arms) - set(allowed):
        parser.error(f"unknown arms {sorted(unknown)}; choose from {', '.join(allowed)}")
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(30),
    )
    reports = [
        run(
            arms,  # type: ignore[arg-type]
            turns,
            actions,
            engine=args.engine,
            pace=args.pace,
            sweep_settings=SWEEP if args.sweep else None,
            keep=None if args.keep is None else args.keep / f"run{i + 1}",
            ceiling=args.ceiling,
        )
        for i in range(max(args.runs, 1))
    ]
    report = medians(reports)
    if args.report is not None:
        args.report.write_text(json.dumps(report, indent=2) + "\n")
    print(json_lines(report) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
