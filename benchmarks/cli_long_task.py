"""CLI long task: one scripted long coding task driven through the real ``claude`` or ``codex``
CLI against the fake model server, in three arms in the same run.

* ``cli_alone``: the pinned CLI started directly (as ``cli_latency.py`` starts it) but with
  its own compaction at its defaults: Claude Code without ``DISABLE_AUTO_COMPACT`` (it
  compacts reactively when the provider refuses a prompt as too long), Codex without
  Condensate's out-of-reach model catalog (its bundled catalog gives gpt-5.5 a 272,000-token
  window, and Codex compacts at 90 % of it);
* ``condensate_default``: a real daemon, a thread on that engine (not a head), the default
  ceiling (Claude Code 75 % of the window capped at 200k; Codex 40 % capped at 120k), the
  model's window set to the fake's, the curator on ``anthropic:claude-haiku-4-5`` (served by
  the same fake; its summary calls are billed too);
* ``condensate_recommended``: the same with ``RECOMMENDED_CEILING`` for that engine
  (``CONDENSATE_WINDOW_CEILING_CLAUDE`` or ``CONDENSATE_WINDOW_CEILING_PI``).

The fake's window for the model is the same in every arm: 200,000 for claude-sonnet-4-5
(its real window; Claude Code does not compact it proactively, so its compaction is the
reactive one on the fake's prompt-too-long 400) and 272,000 for gpt-5.5 (what Codex's bundled
catalog says, so that Codex alone compacts where it would against the real model).

The task: a report tool's ``--format`` option over ``TURNS`` human turns (the brief, then
steers; each carries a unique ``[HUMAN-MARKER-k]``), each turn ``CALLS_PER_TURN`` tool calls
then a short answer. The calls read generated source files of 2-15 KB (Claude Code's ``Read``
or ``cat`` in its ``Bash``; Codex's ``exec_command``), grep the tree, and run the "tests"
(``ci/pytest``: prepared pytest output, failing runs with tracebacks exiting 1 early in a
turn, passing runs later).

Each arm runs against a fake model server of its own (``python -m
condensate.testing.fake_model`` in its own process), behind a small router in this process
that queues each reply at the fake just before the request that takes it: the next scripted
reply for the thread's own requests, a stand-in summary for a compaction request (Claude
Code's "Do NOT call any tools" summary request, Codex's ``request_kind: compaction``) and for
Condensate's curator, nothing (the fake's default text) for anything else. A request the fake
will refuse by size gets nothing queued, so a refusal never shifts the script. The stand-in
summary names the files read and the failing test runs and copies every human message it
sees verbatim, for the CLIs and for the curator alike. The router tags each request
(``x-bench-kind``, ``x-bench-turn``) and every figure comes from the fake's request log.

Per arm: model calls, weighted billed input = sum(uncached x 1.0 + cache write x 1.25 + cache
read x 0.1) over every answered request (compaction and curator calls included; a refused
request is not billed), cache-read share, the largest request against the ceiling, requests
over it, session restarts (managed: ``session-*`` notices beyond the first; the CLI alone: its
own compactions), each human marker's share of the thread's later requests that still carry
it, and wall time.

    python benchmarks/cli_long_task.py --engine claude            # a table
    python benchmarks/cli_long_task.py --engine codex --json      # one JSON object
    python benchmarks/cli_long_task.py --engine claude --json --turns 2 --calls-per-turn 4  # CI
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import platform
import random
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
import structlog
from aiohttp import web

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters import _child
from adapters.claude_code import _cli as claude_cli
from adapters.claude_code._translate import unprompted
from adapters.codex import _cli as codex_cli
from adapters.codex._rpc import AppServer
from benchmarks.planner_scale import code_file, ident, prose, sentence
from benchmarks.tasks import BRIEF, MODULES, STEERS, failing_run, passing_run
from condensate.core import prices
from condensate.core.ceilings import CeilingSettings, working_ceiling
from condensate.core.planner import PlannerSettings
from condensate.core.tokens import bare_model
from condensate.engine import EngineEnv, EngineSettings, ThreadSpec
from condensate.engine.registry import installed, profile
from condensate.replay import WEIGHTS
from condensate.testing.fake_model import Call, Reply, Text, ToolCalls, reply_to_json
from condensate.testing.fake_model._accounting import (
    chat_blocks,
    count_blocks,
    responses_blocks,
)
from condensate.testing.fake_model._parts import anthropic_parts, total_tokens
from tests.integration.daemon import REPO, DaemonProcess, call

Engine = Literal["claude", "codex"]
ENGINES: tuple[Engine, ...] = ("claude", "codex")
MODELS: dict[Engine, str] = {"claude": "anthropic:claude-opus-5-5", "codex": "openai:gpt-6.2-sol"}
"""Each pinned CLI's default model: ``claude`` 2.1.332 sends claude-opus-5-5 (observed);
``codex`` 0.171.0 runs gpt-6.2-sol when no model is set (observed; ``codex debug models
--bundled``). ``--model`` runs another."""
WINDOWS: dict[Engine, int] = {"claude": 1_000_000, "codex": 1_050_000}
"""The fake's window for the thread's model, the same in all three arms: the provider's own
(claude-opus-5-5: 1M; gpt-6.2-sol: 1.05M at the API). Claude Code alone compacts proactively
only near its model's window (967k for Opus 5.5); Codex alone compacts at 90 % of its catalog's
window for gpt-6.2-sol (500,000, used at 95 %). ``--window`` sets another."""
RECOMMENDED_CEILING: dict[Engine, int] = {"claude": 60_000, "codex": 60_000}
"""The lower ceiling of the third arm (``--ceiling``; docs/performance.md, "The CLIs over a
scripted task"), set by ``CONDENSATE_WINDOW_CEILING_CLAUDE`` /
``CONDENSATE_WINDOW_CEILING_PI``: the cheapest of the values tried (``--ceiling``) at which
every turn of this task completed with no request over the ceiling. Claude Code, weighted
input: 60k 1.51M, 70k 1.55M (with a CLI summary keeping 10 % of the line; with 25 %: 60k
1.72M, 70k 1.69M, 80k 1.79M, 90k 1.80M, 110k 2.13M); Codex: 60k 1.22M. (Before two fixes
found with this benchmark, every ceiling below 110k / 90k stopped the thread part-way: cheap
tiers cleared results that were text in a new session's first message, and summaries carried
every earlier failure forward.)"""
CEILING_SETTING: dict[Engine, str] = {
    "claude": "CONDENSATE_WINDOW_CEILING_CLAUDE",
    "codex": "CONDENSATE_WINDOW_CEILING_PI",
}
CURATOR_MODEL = "anthropic:claude-haiku-5-5"
CURATOR_WINDOW = 1_000_000
TURNS = 9
CALLS_PER_TURN = 20
SEED = 20_261_214
PACE = 38.0
"""Seconds of the fake's clock per model call of the thread: 95 calls an hour, the pace of
the long task's log (``benchmarks/log_growth.py``). Cache entries expire by that clock
(Anthropic's after 5 minutes unused, OpenAI's after 5 to 30); ``--pace 0`` runs without."""
TURN_TIMEOUT = 900.0
"""Seconds one human turn may take before the arm is abandoned as hung."""
GOALS = {
    "requests_over_ceiling_managed": 0,
    "weighted_input_vs_cli_alone_at_recommended": 0.6,
    "human_messages_kept": 1.0,
}
ARMS = ("cli_alone", "condensate_default", "condensate_recommended")
GENERATION = frozenset({"messages", "responses", "chat"})
ENDPOINTS = {
    "/v1/messages": "messages",
    "/v1/responses": "responses",
    "/v1/chat/completions": "chat",
}
HOP = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade"}
)
CLAUDE_COMPACTION = ("Do NOT call any tools", "create a detailed summary of the conversation")
CODEX_COMPACTION = "CONTEXT CHECKPOINT COMPACTION"
CURATOR_SYSTEM = "You write the summary that replaces the earlier part"
CHARS_PER_TOKEN = 3.6


def marker(turn: int) -> str:
    return f"[HUMAN-MARKER-{turn}]"


# -- the task ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One tool call of the script: what it does and the command (or path) it names."""

    kind: Literal["read", "cat", "grep", "ls", "test"]
    target: str
    text: str


@dataclass(frozen=True)
class HumanTurn:
    number: int
    human: str
    steps: tuple[Step, ...]
    final: str


@dataclass(frozen=True)
class Task:
    turns: tuple[HumanTurn, ...]
    files: dict[str, str]
    runs: dict[int, tuple[str, int]]
    """Each test run's prepared output and exit code, by run number."""

    @property
    def calls(self) -> int:
        return sum(len(t.steps) + 1 for t in self.turns)

    @property
    def failing_runs(self) -> int:
        return sum(1 for _, code in self.runs.values() if code)

    def command_of(self, run: int) -> str:
        return next(s.target for t in self.turns for s in t.steps if f"--run {run} " in s.target)


def _chars(rng: random.Random, low: int, high: int) -> int:
    """A log-uniform size in characters for a token range."""
    return int(math.exp(rng.uniform(math.log(low), math.log(high))) * CHARS_PER_TOKEN)


TEST_TARGETS = (
    "tests/test_formats.py",
    "tests/test_cli.py",
    "tests/test_totals.py",
    "tests",
    "tests/integration",
)
GREPS = ("def render_", "format_rows", "--format", "Money(", "class ", "csv.writer", "import ")


def build_task(turns: int, calls_per_turn: int, seed: int = SEED) -> Task:
    """The scripted task: ``turns`` human turns of ``calls_per_turn`` tool calls and an answer.
    Early in a turn the agent reads; then it greps, rereads and runs the tests, which fail
    (tracebacks, exit 1) less often as the turn goes on."""
    rng = random.Random(seed)
    files: dict[str, str] = {}
    for path in MODULES:
        own = random.Random(f"{seed}:{path}")
        if path.endswith(".md"):
            files[path] = prose(own, own.randint(40, 160))
        elif path.endswith(".toml"):
            files[path] = "\n".join(f"{ident(own)} = {own.randint(0, 99)}" for _ in range(80))
        else:
            files[path] = code_file(own, _chars(own, 700, 4_200))
    weights = [1 / (i + 1) ** 0.6 for i in range(len(MODULES))]
    runs: dict[int, tuple[str, int]] = {}
    humans = [BRIEF, *STEERS]
    out: list[HumanTurn] = []
    for number in range(1, turns + 1):
        steps: list[Step] = []
        for i in range(calls_per_turn):
            progress = i / max(calls_per_turn - 1, 1)
            roll = rng.random()
            if progress < 0.3 or roll < 0.35:
                path = rng.choices(MODULES, weights)[0]
                kind: Literal["read", "cat"] = "read" if rng.random() < 0.5 else "cat"
                steps.append(Step(kind, path, f"Reading {path}."))
            elif roll < 0.5:
                pattern = rng.choice(GREPS)
                command = (
                    f"grep -rn -e {shlex.quote(pattern)} src tests | head -n {rng.randint(30, 90)}"
                )
                steps.append(Step("grep", command, f"Searching for {pattern}."))
            elif roll < 0.56:
                steps.append(Step("ls", "ls -la src/report tests", "Listing the tree."))
            else:
                run = len(runs) + 1
                target = rng.choice(TEST_TARGETS)
                command = f"./ci/pytest --run {run} -q {target}"
                fails = rng.random() < 0.85 - 0.6 * progress
                if fails:
                    text = failing_run(rng, f"pytest -q {target}", _chars(rng, 700, 3_000))
                    text = text.removesuffix("\n[exit code 1]")
                else:
                    text = passing_run(rng, f"pytest -q {target}").removesuffix("\n[exit code 0]")
                runs[run] = (text, 1 if fails else 0)
                steps.append(Step("test", command, f"Running the tests: {target}."))
        human = f"{humans[(number - 1) % len(humans)]} {marker(number)}"
        final = f"Done with this step. {prose(rng, 3)}"
        out.append(HumanTurn(number, human, tuple(steps), final))
    return Task(tuple(out), files, runs)


PYTEST = """#!/bin/sh
# The project's test runner, as this benchmark scripts it: prints run N's output, exits its code.
here=$(dirname "$0")
cat "$here/runs/$2.out"
exit "$(cat "$here/runs/$2.code")"
"""


def write_workspace(task: Task, work: Path) -> None:
    for path, text in task.files.items():
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + "\n")
    runs = work / "ci" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    for number, (text, code) in task.runs.items():
        (runs / f"{number}.out").write_text(text + "\n")
        (runs / f"{number}.code").write_text(f"{code}\n")
    script = work / "ci" / "pytest"
    script.write_text(PYTEST)
    script.chmod(0o755)


def scripted_reply(engine: Engine, step: Step, work: Path) -> Reply:
    """The model's tool call for ``step``, in the engine's own tools."""
    if engine == "codex":
        command = f"cat {step.target}" if step.kind in ("read", "cat") else step.target
        return ToolCalls([Call("exec_command", {"cmd": command})], text=step.text)
    if step.kind == "read":
        return ToolCalls([Call("Read", {"file_path": str(work / step.target)})], text=step.text)
    command = f"cat {step.target}" if step.kind == "cat" else step.target
    return ToolCalls([Call("Bash", {"command": command, "description": step.text})], text=step.text)


# -- the fake and the router in front of it ---------------------------------------------------


@dataclass
class FakeProcess:
    """``python -m condensate.testing.fake_model`` in a process of its own."""

    windows: dict[str, int]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    url: str = ""

    def start(self) -> None:
        command = [sys.executable, "-m", "condensate.testing.fake_model", "--window", "0"]
        for model, size in self.windows.items():
            command += ["--model-window", f"{model}={size}"]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
                command, cwd=REPO, stdout=subprocess.PIPE, stderr=log
            )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().decode().strip()
        if not self.url.startswith("http"):
            msg = f"the fake model server did not start: {self.log_path.read_text()[-2000:]}"
            raise RuntimeError(msg)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def body_text(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False)


def system_text(body: Mapping[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, list):
        return " ".join(str(b.get("text", "")) for b in system if isinstance(b, Mapping))
    return str(system or "")


def last_message_text(endpoint: str, body: Mapping[str, Any]) -> str:
    items = body.get("messages" if endpoint == "messages" else "input") or []
    return body_text(items[-1]) if isinstance(items, list) and items else ""


def is_compaction(endpoint: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> bool:
    """A CLI's own summary request: Claude Code's "Do NOT call any tools" request, or one
    Codex marks ``request_kind: compaction``."""
    metadata = headers.get("x-codex-turn-metadata", "")
    if '"compaction"' in metadata:
        return True
    last = last_message_text(endpoint, body)
    return CODEX_COMPACTION in last or any(text in last for text in CLAUDE_COMPACTION)


@dataclass
class Script:
    """The replies the thread's own requests take, turn by turn."""

    replies: dict[int, list[Reply]]
    turn: int = 0
    taken: int = 0
    extra: int = 0
    """Requests of a turn past its script (answered with a short text)."""

    def next(self, body: Mapping[str, Any]) -> tuple[Reply, bool]:
        """The reply to the thread's next request, and whether the script had one."""
        own = self.replies.get(self.turn, [])
        if self.taken < len(own):
            return own[self.taken], True
        return Text("Nothing more to do for this step."), False

    def accept(self) -> None:
        """The provider answered the scripted reply: the script moves on."""
        self.taken += 1

    def begin(self, turn: int) -> None:
        self.turn, self.taken = turn, 0


def stand_in_summary(task: Task, claude_summary: bool, body: Any, kind: str) -> Text:
    """The stand-in summary: the human messages seen, verbatim, the files read and the
    failing test runs; as Claude Code's compaction prompt asks, in a summary block."""
    text = body_text(body)
    humans = [t.human for t in task.turns if marker(t.number) in text]
    files = [p for p in task.files if p in text]
    failed = [
        f"{task.command_of(n)} (exit 1; {out.rsplit(chr(10), 1)[-1].strip('= ')})"
        for n, (out, code) in task.runs.items()
        if code and f"--run {n} " in text
    ]
    parts = [
        "Summary of the work so far: adding a --format option to the report CLI.",
        "Every human message, verbatim, in order:",
        *(f'- "{h}"' for h in humans),
        f"Files read: {', '.join(files) or 'none'}.",
        "Failed test runs:",
        *(f"- {f}" for f in failed or ["none"]),
        f"State: {sentence(random.Random(len(text)))} Next: keep going with the "
        "current step, rerun the failing tests.",
    ]
    return summary_reply("\n".join(parts), kind, claude_summary)


def summary_reply(summary: str, kind: str, claude_summary: bool) -> Text:
    """A summary as the request asked for it: Claude Code's compaction in a summary block."""
    if kind == "compaction" and claude_summary:
        summary = f"<analysis>Going over it.</analysis>\n<summary>\n{summary}\n</summary>"
    return Text(summary)


@dataclass
class Router:
    """Forwards every request to the fake, queueing its reply there just before it."""

    fake_url: str
    script: Script
    summarize: Callable[[Any, str], Text]
    """The stand-in summary for a compaction or curator request (its body, its kind)."""
    main_model: str
    curator_model: str
    windows: dict[str, int]
    pace: float = 0.0
    """Seconds the fake's clock moves before each of the thread's model calls: the run takes
    seconds, the work it stands for an hour, and a cache entry expires by the clock."""
    runner: web.AppRunner | None = None
    session: aiohttp.ClientSession | None = None
    url: str = ""
    leftovers: int = 0
    """Replies queued for a request the fake then did not answer: each would shift the
    script by one (none is expected; the report says how many)."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(
            auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None, sock_read=600)
        )
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # aiohttp keeps the bound port only here
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        if self.session is not None:
            await self.session.close()

    def classify(self, endpoint: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> str:
        model = str(body.get("model", ""))
        if model == self.main_model:
            return "compaction" if is_compaction(endpoint, body, headers) else "main"
        if model == self.curator_model and CURATOR_SYSTEM in system_text(body):
            return "curator"
        return "side"

    def refused(self, endpoint: str, body: Mapping[str, Any], size: int) -> bool:
        """Whether the fake will refuse this prompt as too long (counted as the fake counts)."""
        model = str(body.get("model", ""))
        limit = self.windows.get(model)
        if limit is None or size <= limit:  # never more tokens than bytes
            return False
        if endpoint == "messages":
            return total_tokens(anthropic_parts(body, model)) > limit
        if endpoint == "chat":
            return sum(count_blocks(model, chat_blocks(body))) > limit
        return sum(count_blocks(model, responses_blocks(body))) > limit

    async def pending(self) -> dict[str, int]:
        """Replies still queued at the fake."""
        assert self.session is not None
        async with self.session.get(f"{self.fake_url}/_fake/config") as answer:
            answer.raise_for_status()
            pending: dict[str, int] = (await answer.json())["pending"]
            return pending

    async def advance(self, seconds: float) -> None:
        assert self.session is not None
        payload = {"advance": seconds}
        async with self.session.post(f"{self.fake_url}/_fake/clock", json=payload) as answer:
            answer.raise_for_status()

    async def queue(self, model: str, reply: Reply) -> None:
        assert self.session is not None
        payload = {"replies": [reply_to_json(reply)], "model": model}
        async with self.session.post(f"{self.fake_url}/_fake/queue", json=payload) as answer:
            answer.raise_for_status()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        assert self.session is not None
        raw = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        endpoint = ENDPOINTS.get(request.path)
        if endpoint is None or request.method != "POST":
            return await self.forward(request, raw, headers)
        body = json.loads(raw)
        kind = self.classify(endpoint, body, request.headers)
        reply: Reply | None = None
        scripted = False
        if kind == "main":
            reply, scripted = self.script.next(body)
            if not scripted:
                self.script.extra += 1
        elif kind in ("compaction", "curator"):
            reply = self.summarize(body, kind)
        headers["x-bench-kind"] = kind
        headers["x-bench-turn"] = str(self.script.turn)
        async with self._lock:
            if kind == "main" and self.pace > 0:
                await self.advance(self.pace)
            queued = reply is not None and not self.refused(endpoint, body, len(raw))
            if queued:
                assert reply is not None
                await self.queue(str(body["model"]), reply)
            upstream = await self.session.request(
                request.method, self.fake_url + request.path_qs, data=raw, headers=headers
            )
            if upstream.status == 200 and scripted:
                self.script.accept()
            if queued and upstream.status != 200:
                self.leftovers += 1
        return await self.relay(request, upstream)

    async def forward(
        self, request: web.Request, raw: bytes, headers: dict[str, str]
    ) -> web.StreamResponse:
        assert self.session is not None
        upstream = await self.session.request(
            request.method, self.fake_url + request.path_qs, data=raw, headers=headers
        )
        return await self.relay(request, upstream)

    @staticmethod
    async def relay(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        async with upstream:
            response = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in HOP},
            )
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                with contextlib.suppress(ConnectionError):
                    await response.write(chunk)
            with contextlib.suppress(ConnectionError):
                await response.write_eof()
            return response


# -- what the fake saw ------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One request in the fake's log, without its body."""

    number: int
    kind: str
    turn: int
    model: str
    status: int
    reply: str
    input_tokens: int
    cache_read: int
    cache_write: int
    markers: frozenset[int]
    output_tokens: int = 0
    cache_write_1h: int = 0
    rethink_tokens: int = 0
    """Output the model spent re-creating thinking the request went without (the fake's
    stated estimate of what lost thinking costs)."""
    thinking_refused: bool = False
    """Refused for a thinking block's binding."""

    @property
    def answered(self) -> bool:
        return self.status == 200 and self.reply not in ("window", "invalid", "fail")

    @property
    def uncached(self) -> int:
        return self.input_tokens - self.cache_read - self.cache_write

    @property
    def tokens(self) -> prices.Tokens:
        return prices.Tokens(
            input=self.uncached,
            cache_write=self.cache_write,
            cache_read=self.cache_read,
            output=self.output_tokens,
            cache_write_1h=self.cache_write_1h,
        )

    @property
    def usd(self) -> float | None:
        return prices.cost(self.model, self.tokens)

    @property
    def weighted(self) -> float:
        """The prompt in the model's base input tokens: each class at its price's ratio to
        input, the prompt's long-context tier included (Anthropic's ratios without a price)."""
        price = prices.price_of(self.model)
        if price is None or not price.input:
            return (
                self.uncached * WEIGHTS["uncached"]
                + self.cache_write * WEIGHTS["cache_write"]
                + self.cache_read * WEIGHTS["cache_read"]
            )
        rates = price.rates(self.input_tokens)
        five_minute = self.cache_write - self.cache_write_1h
        return (
            self.uncached * rates.input
            + five_minute * rates.cache_write
            + self.cache_write_1h * rates.cache_write_1h
            + self.cache_read * rates.cache_read
        ) / price.input


def output_of(usage: Mapping[str, Any]) -> int:
    """A reply's output tokens, as Messages and Responses (``output_tokens``) or Chat
    Completions (``completion_tokens``) report them."""
    return int(usage.get("output_tokens") or usage.get("completion_tokens") or 0)


async def fetch_seen(
    session: aiohttp.ClientSession, fake_url: str, since: int, turns: int
) -> tuple[list[Seen], int]:
    """The fake's generation requests after ``since``, each reduced to what the report needs,
    and the number of the last request it logged."""
    async with session.get(f"{fake_url}/_fake/requests", params={"since": str(since)}) as answer:
        answer.raise_for_status()
        entries = (await answer.json())["requests"]
    seen: list[Seen] = []
    last = max((int(e["number"]) for e in entries), default=since)
    for entry in entries:
        if entry["endpoint"] not in GENERATION:
            continue
        text = body_text(entry["body"])
        headers = entry["headers"]
        seen.append(
            Seen(
                number=entry["number"],
                kind=headers.get("x-bench-kind", "unknown"),
                turn=int(headers.get("x-bench-turn", "0")),
                model=entry["model"],
                status=entry["status"],
                reply=entry["reply"],
                input_tokens=entry["input_tokens"],
                cache_read=entry["cache_read"],
                cache_write=entry["cache_write"],
                markers=frozenset(k for k in range(1, turns + 1) if marker(k) in text),
                output_tokens=output_of(entry.get("usage") or {}),
                cache_write_1h=int(entry.get("cache_write_1h") or 0),
                rethink_tokens=int(entry.get("rethink_tokens") or 0),
                thinking_refused=bool((entry.get("thinking") or {}).get("refused")),
            )
        )
    return seen, last


@dataclass
class Recorder:
    """Collects the fake's log as the arm goes (after each turn), bodies dropped."""

    fake_url: str
    turns: int
    path: Path
    """Where each request's figures go, one JSON line each (kept with ``--keep``)."""
    seen: list[Seen] = field(default_factory=list)
    last: int = 0

    async def collect(self, session: aiohttp.ClientSession) -> None:
        new, self.last = await fetch_seen(session, self.fake_url, self.last, self.turns)
        self.seen += new
        with self.path.open("a") as out:
            for s in new:
                row = {**asdict(s), "markers": sorted(s.markers)}
                out.write(json.dumps(row) + "\n")


# -- the arms ---------------------------------------------------------------------------------


@dataclass
class TurnRecord:
    turn: int
    outcome: str
    seconds: float
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "turn": self.turn,
            "outcome": self.outcome,
            "seconds": round(self.seconds, 2),
        }
        if self.detail:
            out["detail"] = self.detail[:600]
        return out


@dataclass
class ArmRun:
    """What an arm's driver saw, beside the fake's log."""

    turns: list[TurnRecord] = field(default_factory=list)
    compactions: int = 0
    session_restarts: int = 0
    ceiling: int | None = None
    line: int | None = None
    windows: dict[str, int] = field(default_factory=dict)
    notices: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def engine_env(work: Path, url: str, own: EngineSettings) -> EngineEnv:
    return EngineEnv(
        home=work,
        thread_id="cli-alone",
        anthropic_base_url=url,
        anthropic_api_key="sk-bench",
        openai_base_url=f"{url}/v1",
        openai_api_key="sk-bench",
        settings=own,
    )


class AloneClaude:
    """``claude`` on its own: the engine's command line, its environment less
    ``DISABLE_AUTO_COMPACT``, so Claude Code compacts as it would by default."""

    config_name = "claude-alone"

    def __init__(self, binary: str, work: Path, state: Path, url: str) -> None:
        self.binary, self.work, self.state, self.url = binary, work, state, url
        self.process: asyncio.subprocess.Process | None = None
        self.session = str(uuid.uuid4())
        self.compactions = 0
        self.results: list[dict[str, Any]] = []

    def command_line(self) -> tuple[list[str], dict[str, str], Path]:
        """The CLI's arguments and environment, and its config directory (made here)."""
        config = self.state / self.config_name
        config.mkdir(mode=0o700)
        spec = ThreadSpec("claude", MODELS["claude"], str(self.work), "")
        env = engine_env(self.state, self.url, claude_cli.ClaudeSettings(claude_binary=self.binary))
        environment = claude_cli.environment(config, env)
        environment.pop("DISABLE_AUTO_COMPACT")
        args = claude_cli.command(
            self.binary, spec, resume=None, fork_at=None, new_session=self.session
        )
        return args, environment, config

    async def start(self) -> None:
        args, environment, config = self.command_line()
        self.process = await _child.spawn(
            args, cwd=str(self.work), state_dir=config, env=environment, reaper=True
        )

    async def turn(self, text: str) -> tuple[str, str]:
        """Writes the human line and reads to its turn's ``result``: the outcome and why."""
        process = self.process
        assert process is not None
        assert process.stdout is not None
        await claude_cli.write(process, claude_cli.user_line(text, self.session))
        while True:
            raw = await process.stdout.readline()
            if not raw:
                return "failed", f"claude exited mid-turn ({await process.wait()})"
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(line, dict):
                continue
            if line.get("type") == "system" and line.get("subtype") == "compact_boundary":
                self.compactions += 1
            if line.get("type") == "result" and not unprompted(line):
                self.results.append(
                    {k: line.get(k) for k in ("subtype", "is_error", "terminal_reason")}
                )
                if line.get("is_error"):
                    return "failed", str(line.get("result") or line.get("terminal_reason"))
                return "completed", ""

    async def close(self) -> None:
        if self.process is not None:
            await _child.stop(self.process)


class WrappedClaude(AloneClaude):
    """The same ``claude``, the same arguments and the person's environment, started through
    the wrapper (``python -m condensate claude ...``) of the daemon whose state is
    ``daemon_home``: the wrapper sets the base URL (the gateway, the session's pass in it)
    and turns the CLI's own compaction off; the person's key goes on to the provider."""

    config_name = "claude-wrapped"

    def __init__(self, binary: str, work: Path, state: Path, daemon_home: Path) -> None:
        super().__init__(binary, work, state, "")
        self.daemon_home = daemon_home

    async def start(self) -> None:
        args, environment, config = self.command_line()
        del environment["ANTHROPIC_BASE_URL"]
        environment["CONDENSATE_HOME"] = str(self.daemon_home)
        wrapper = [sys.executable, "-m", "condensate", "claude", *args[1:]]
        self.process = await _child.spawn(
            wrapper, cwd=str(self.work), state_dir=config, env=environment, reaper=True
        )


class AloneCodex:
    """``codex app-server`` on its own: a ``CODEX_HOME`` with no ``model_catalog_json``, so
    Codex reads gpt-5.5's window from its bundled catalog and compacts on its own."""

    home_name = "codex-alone"

    def __init__(self, binary: str, work: Path, state: Path, url: str) -> None:
        self.binary, self.work, self.state, self.url = binary, work, state, url
        self.server: AppServer | None = None
        self.thread = ""
        self.compactions = 0
        self.context_window: int | None = None

    async def command_line(self) -> tuple[list[str], dict[str, str], Path]:
        """The app-server's arguments and environment, and its ``CODEX_HOME`` (written here)."""
        home = self.state / self.home_name
        spec = ThreadSpec("codex", MODELS["codex"], str(self.work), "")
        own = codex_cli.CodexSettings(codex_binary=self.binary, codex_windowing=False)
        env = engine_env(self.state, self.url, own)
        await asyncio.to_thread(codex_cli.prepare_home, self.binary, spec, env, home)
        config = (home / "config.toml").read_text()
        assert "model_catalog_json" not in config, config
        return codex_cli.command(self.binary), codex_cli.environment(home, env), home

    async def start(self) -> None:
        args, environment, home = await self.command_line()
        await self.begin(args, environment, home)

    async def begin(self, args: list[str], environment: dict[str, str], home: Path) -> None:
        process = await _child.spawn(
            args, cwd=str(self.work), state_dir=home, env=environment, reaper=True
        )
        self.server = AppServer(process)
        await self.server.initialize()
        started = await self.server.request(
            "thread/start",
            {"cwd": str(self.work), "approvalPolicy": "never", "sandbox": "danger-full-access"},
        )
        self.thread = started["thread"]["id"]

    async def turn(self, text: str) -> tuple[str, str]:
        server = self.server
        assert server is not None
        begun = await server.request(
            "turn/start", {"threadId": self.thread, "input": [{"type": "text", "text": text}]}
        )
        turn = begun["turn"]["id"]
        while True:
            note = await server.next_notification()
            params = note.get("params") or {}
            method = note.get("method")
            item = params.get("item") or {}
            if method == "item/completed" and item.get("type") == "contextCompaction":
                self.compactions += 1
            if method == "thread/tokenUsage/updated":
                window = (params.get("tokenUsage") or {}).get("modelContextWindow")
                if isinstance(window, int):
                    self.context_window = window
            if method == "turn/completed" and params["turn"]["id"] == turn:
                status = params["turn"]["status"]
                if status != "completed":
                    return "failed", json.dumps(params["turn"].get("error"))
                return "completed", ""

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()


class WrappedCodex(AloneCodex):
    """The same ``codex app-server``, its ``CODEX_HOME`` and environment, started through the
    wrapper (``python -m condensate codex app-server``) of the daemon whose state is
    ``daemon_home``: the wrapper's ``-c`` overrides make the gateway the provider and put
    Codex's compaction out of reach; the person's login (``auth.json`` in their
    ``CODEX_HOME``, as ``codex login --with-api-key`` writes it) goes on to the provider."""

    home_name = "codex-wrapped"

    def __init__(self, binary: str, work: Path, state: Path, daemon_home: Path) -> None:
        super().__init__(binary, work, state, "")
        self.daemon_home = daemon_home

    async def start(self) -> None:
        args, environment, home = await self.command_line()
        login = {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-bench"}
        _child.write_private(home / "auth.json", json.dumps(login))
        environment["CONDENSATE_HOME"] = str(self.daemon_home)
        await self.begin(
            [sys.executable, "-m", "condensate", "codex", *args[1:]], environment, home
        )


@dataclass
class Arm:
    """One arm of the run: its engine and task, its fake's router and request log, where the
    CLI works and where the arm keeps its state."""

    name: str
    engine: Engine
    binary: str
    task: Task
    router: Router
    recorder: Recorder
    work: Path
    state: Path


async def run_turns(
    arm: Arm, session: aiohttp.ClientSession, send: Callable[[HumanTurn], Any], run: ArmRun
) -> None:
    """Each human turn in order: the router's script moves to it, ``send`` runs it."""
    for turn in arm.task.turns:
        arm.router.script.begin(turn.number)
        started = time.perf_counter()
        try:
            outcome, detail = await asyncio.wait_for(send(turn), TURN_TIMEOUT)
        except TimeoutError:
            outcome, detail = "timeout", f"no end of turn within {TURN_TIMEOUT} s"
        run.turns.append(TurnRecord(turn.number, outcome, time.perf_counter() - started, detail))
        await arm.recorder.collect(session)
        if outcome == "timeout":
            break


async def cli_alone(arm: Arm) -> ArmRun:
    run = ArmRun()
    kind = AloneClaude if arm.engine == "claude" else AloneCodex
    driver: AloneClaude | AloneCodex = kind(arm.binary, arm.work, arm.state, arm.router.url)
    async with aiohttp.ClientSession() as session:
        try:
            await driver.start()

            async def send(turn: HumanTurn) -> tuple[str, str]:
                return await driver.turn(turn.human)

            await run_turns(arm, session, send, run)
        finally:
            await driver.close()
    run.compactions = driver.compactions
    run.session_restarts = driver.compactions
    if isinstance(driver, AloneCodex):
        run.extra["codex_model_context_window"] = driver.context_window
    else:
        run.extra["results"] = dict(
            Counter(f"{r['subtype']}/{r['terminal_reason']}" for r in driver.results)
        )
    return run


SESSION_NOTICES = ("session-started", "session-forked", "session-fresh")


async def thread_events(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str
) -> list[dict[str, Any]]:
    """The thread's whole log (``history=1``), page by page."""
    events: list[dict[str, Any]] = []
    after = 0
    while True:
        status, page = await call(
            session, daemon, "GET", f"/threads/{thread}/tail?after={after}&limit=1000&history=1"
        )
        if status != 200:
            msg = f"tail failed: {page}"
            raise RuntimeError(msg)
        events += page["events"]
        after = page["nextAfter"]
        if not page["hasMore"]:
            return events


async def turn_ended(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, after: int
) -> tuple[str, str, int]:
    """Long-polls the log until the next ``turn.ended``: its outcome, reason and seq."""
    while True:
        path = f"/threads/{thread}/tail?after={after}&limit=1000&wait=25"
        status, page = await call(session, daemon, "GET", path)
        if status != 200:
            msg = f"tail failed: {page}"
            raise RuntimeError(msg)
        for event in page["events"]:
            if event["kind"] == "turn.ended":
                return str(event["outcome"]), str(event.get("reason", "")), int(event["seq"])
        after = page["nextAfter"]


def daemon_env(engine: Engine, binary: str, ceiling: int | None) -> dict[str, str]:
    env = {
        "CONDENSATE_CLAUDE_BINARY": binary,
        "CONDENSATE_CODEX_BINARY": binary,
        "CONDENSATE_MODEL_WINDOWS": json.dumps({MODELS[engine]: WINDOWS[engine]}),
        "CONDENSATE_CURATOR_MODEL": CURATOR_MODEL,
    }
    if ceiling is not None:
        env[CEILING_SETTING[engine]] = str(ceiling)
    return env


async def managed(
    arm: Arm,
    ceiling: int | None,
    *,
    thread_body: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> ArmRun:
    """A thread of a real daemon on the engine (not a head), its ceiling capped at
    ``ceiling`` when given, driven over the HTTP API; ``thread_body`` and ``env`` replace
    the engine's thread and daemon settings (another engine, model or tier settings)."""
    run = ArmRun()
    home = arm.state / "home"
    home.mkdir()
    extra_env = dict(env) if env is not None else daemon_env(arm.engine, arm.binary, ceiling)
    daemon = DaemonProcess(home, arm.router.url, extra_env=extra_env)
    await asyncio.to_thread(daemon.start)
    thread = ""
    after = 0
    try:
        async with aiohttp.ClientSession() as session:

            async def send(turn: HumanTurn) -> tuple[str, str]:
                nonlocal thread, after
                if not thread:
                    body = {
                        "engine": arm.engine,
                        "model": MODELS[arm.engine],
                        **(thread_body or {}),
                        "cwd": str(arm.work),
                        "brief": turn.human,
                    }
                    status, created = await call(session, daemon, "POST", "/threads", body)
                    if status != 201:
                        return "refused", json.dumps(created)
                    thread = str(created["id"])
                else:
                    path = f"/threads/{thread}/messages"
                    status, sent = await call(session, daemon, "POST", path, {"text": turn.human})
                    if status != 202:
                        return "refused", json.dumps(sent)
                outcome, reason, after = await turn_ended(session, daemon, thread, after)
                return outcome, reason

            await run_turns(arm, session, send, run)
            if thread:
                await describe_thread(session, daemon, thread, run)
    finally:
        if any(t.outcome != "completed" for t in run.turns):
            run.extra["daemon_log_tail"] = daemon.log_tail()[-3000:]
        await asyncio.to_thread(daemon.close)
    return run


async def wrapped(arm: Arm, env: Mapping[str, str]) -> ArmRun:
    """The CLI through ``condensate claude`` or ``condensate codex`` (the wrapper, its
    parent) with a real daemon's gateway in front of the router: the person's session as an
    attached thread."""
    run = ArmRun()
    home = arm.state / "home"
    home.mkdir()
    daemon = DaemonProcess(home, arm.router.url, extra_env=dict(env))
    await asyncio.to_thread(daemon.start)
    kind = WrappedClaude if arm.engine == "claude" else WrappedCodex
    driver: WrappedClaude | WrappedCodex = kind(arm.binary, arm.work, arm.state, home)
    try:
        async with aiohttp.ClientSession() as session:
            try:
                await driver.start()

                async def send(turn: HumanTurn) -> tuple[str, str]:
                    return await driver.turn(turn.human)

                await run_turns(arm, session, send, run)
            finally:
                # The CLI's exit ends the wrapper, which tells the daemon (detach).
                await driver.close()
            status, listed = await call(session, daemon, "GET", "/threads")
            threads = listed.get("threads", []) if status == 200 else []
            if threads:
                await describe_thread(session, daemon, str(threads[0]["id"]), run)
            run.extra["threads"] = len(threads)
    finally:
        if any(t.outcome != "completed" for t in run.turns):
            run.extra["daemon_log_tail"] = daemon.log_tail()[-3000:]
        await asyncio.to_thread(daemon.close)
    run.compactions = driver.compactions
    if isinstance(driver, WrappedCodex):
        run.extra["codex_model_context_window"] = driver.context_window
    else:
        run.extra["results"] = dict(
            Counter(f"{r['subtype']}/{r['terminal_reason']}" for r in driver.results)
        )
    return run


async def describe_thread(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, run: ArmRun
) -> None:
    """The thread's ceiling and line, and what its log says: session notices, windows,
    system lines, refusals."""
    status, shown = await call(session, daemon, "GET", f"/threads/{thread}")
    if status == 200:
        run.ceiling = shown.get("ceiling")
        run.line = shown.get("line")
        run.extra["over_line"] = shown.get("overLine")
        run.extra["thinking_dropped"] = shown["costs"]["thinkingDropped"]
    events = await thread_events(session, daemon, thread)
    notices = Counter(str(e["notice"]) for e in events if e["kind"] == "engine.notice")
    run.notices = dict(notices)
    run.session_restarts = max(0, sum(notices[n] for n in SESSION_NOTICES) - 1)
    run.windows = dict(Counter(str(e["window_kind"]) for e in events if e["kind"] == "window"))
    run.extra["system_lines"] = dict(
        Counter(str(e["code"]) for e in events if e["kind"] == "system.line")
    )
    run.extra["refusals"] = sum(1 for e in events if e["kind"] == "model.refused")
    run.extra["model_calls_logged"] = sum(1 for e in events if e["kind"] == "model.usage")
    run.extra["thread"] = thread


# -- the figures ------------------------------------------------------------------------------


def presence_of(task: Task, main: Sequence[Seen]) -> tuple[dict[str, float], list[str]]:
    """Each human marker's share of the thread's requests from its turn on that carry it; a
    marker no request ever followed (its turn stopped before any model call) counts 0 and is
    named as unsent."""
    presence: dict[str, float] = {}
    unsent: list[str] = []
    for turn in task.turns:
        later = [s for s in main if s.turn >= turn.number]
        if not later:
            presence[marker(turn.number)] = 0.0
            unsent.append(marker(turn.number))
            continue
        kept = sum(1 for s in later if turn.number in s.markers)
        presence[marker(turn.number)] = round(kept / len(later), 4)
    return presence, unsent


def figures(arm: Arm, run: ArmRun, ceiling: int, wall: float) -> dict[str, Any]:
    seen = arm.recorder.seen
    answered = [s for s in seen if s.answered]
    main = [s for s in answered if s.kind == "main"]
    summaries = [s for s in answered if s.kind in ("compaction", "curator")]
    total_input = sum(s.input_tokens for s in answered)
    cache_read = sum(s.cache_read for s in answered)
    presence, unsent = presence_of(arm.task, main)
    largest = max((s.input_tokens for s in main), default=0)
    line = run.line if run.line is not None else ceiling - CeilingSettings().output_reserve
    window = WINDOWS[arm.engine]
    out: dict[str, Any] = {
        "arm": arm.name,
        "ceiling": ceiling,
        "line": line,
        "model_calls": len(answered),
        "calls_by_kind": dict(Counter(s.kind for s in answered)),
        "refused_requests": sum(1 for s in seen if s.reply == "window"),
        "other_failed_requests": sum(1 for s in seen if not s.answered and s.reply != "window"),
        "input_tokens": total_input,
        "uncached_tokens": sum(s.uncached for s in answered),
        "cache_write_tokens": sum(s.cache_write for s in answered),
        "cache_read_tokens": cache_read,
        "weighted_input": round(sum(s.weighted for s in answered), 1),
        "summary_weighted_input": round(sum(s.weighted for s in summaries), 1),
        "by_model": by_model(answered),
        "output_tokens": sum(s.output_tokens for s in answered),
        "usd": round(sum(s.usd or 0.0 for s in answered), 4),
        "unpriced_models": sorted({s.model for s in answered if s.usd is None}),
        "thinking_refused_requests": sum(1 for s in seen if s.thinking_refused),
        "rethink_tokens": sum(s.rethink_tokens for s in answered),
        "cache_write_1h_tokens": sum(s.cache_write_1h for s in answered),
        "cache_read_share": round(cache_read / total_input, 4) if total_input else None,
        "largest_request": largest,
        "largest_vs_ceiling": round(largest / ceiling, 4),
        "largest_vs_window": round(largest / window, 4),
        "requests_over_ceiling": sum(1 for s in main if s.input_tokens > ceiling),
        "requests_over_line": sum(1 for s in main if s.input_tokens > line),
        "session_restarts": run.session_restarts,
        "human_presence": presence,
        "human_presence_min": min(presence.values(), default=None),
        "human_markers_lost": [m for m, p in presence.items() if p < 1.0],
        "human_markers_unsent": unsent,
        "turns": [t.to_json() for t in run.turns],
        "turns_completed": sum(1 for t in run.turns if t.outcome == "completed"),
        "turns_not_completed": sum(1 for t in run.turns if t.outcome != "completed"),
        "script_overrun_requests": arm.router.script.extra,
        "router_leftovers": arm.router.leftovers,
        "fake_pending_at_end": run.pending,
        "wall_s": round(wall, 2),
    }
    if arm.name == "cli_alone":
        out["ceiling_basis"] = "the recommended ceiling (the CLI alone has none)"
        out["cli_compactions"] = run.compactions
    else:
        out["windows"] = run.windows
        out["notices"] = run.notices
    tail = run.extra.pop("daemon_log_tail", None)
    out.update(run.extra)
    if tail is not None:
        out["daemon_log_tail"] = tail
    return out


def ratios(model: str) -> dict[str, float]:
    """Each token class's price as a share of the model's input price (its short-context
    tier); Anthropic's usual ratios for a model without a price."""
    price = prices.price_of(model)
    if price is None or not price.input:
        return {**WEIGHTS, "cache_write_1h": 2.0}
    rates = price.rates(0)
    return {
        "uncached": 1.0,
        "cache_write": rates.cache_write / rates.input,
        "cache_write_1h": rates.cache_write_1h / rates.input,
        "cache_read": rates.cache_read / rates.input,
    }


def by_model(answered: Sequence[Seen]) -> dict[str, dict[str, Any]]:
    """The arm's tokens by class, model by model, with the ratios they are weighted by."""
    out: dict[str, dict[str, Any]] = {}
    for model in sorted({s.model for s in answered}):
        calls = [s for s in answered if s.model == model]
        out[model] = {
            "calls": len(calls),
            "uncached": sum(s.uncached for s in calls),
            "cache_write": sum(s.cache_write for s in calls),
            "cache_write_1h": sum(s.cache_write_1h for s in calls),
            "cache_read": sum(s.cache_read for s in calls),
            "weighted_input": round(sum(s.weighted for s in calls), 1),
            "ratios": ratios(model),
        }
    return out


def default_ceiling(engine: Engine) -> int:
    info = installed()[engine]
    shaped = profile(info, CeilingSettings(), PlannerSettings(), info.settings.model_construct())
    return working_ceiling(WINDOWS[engine], shaped.ceilings)


@dataclass(frozen=True)
class Setup:
    """What every arm of one run shares."""

    engine: Engine
    binary: str
    task: Task
    root: Path
    recommended: int
    pace: float


async def run_arm(name: str, setup: Setup) -> dict[str, Any]:
    """One arm against a fake (and a router) of its own, in a fresh working directory."""
    engine, task = setup.engine, setup.task
    state = setup.root / name
    work = state / "work"
    work.mkdir(parents=True)
    write_workspace(task, work)
    main_model = bare_model(MODELS[engine])
    windows = {main_model: WINDOWS[engine], bare_model(CURATOR_MODEL): CURATOR_WINDOW}
    fake = FakeProcess(windows, state / "fake.log")
    await asyncio.to_thread(fake.start)
    replies = {
        t.number: [*(scripted_reply(engine, s, work) for s in t.steps), Text(t.final)]
        for t in task.turns
    }
    router = Router(
        fake.url,
        Script(replies),
        functools.partial(stand_in_summary, task, engine == "claude"),
        main_model,
        bare_model(CURATOR_MODEL),
        windows,
        pace=setup.pace,
    )
    recorder = Recorder(fake.url, len(task.turns), state / "requests.jsonl")
    arm = Arm(name, engine, setup.binary, task, router, recorder, work, state)
    started = time.perf_counter()
    try:
        await router.start()
        if name == "cli_alone":
            run = await cli_alone(arm)
            ceiling = setup.recommended
        else:
            cap = setup.recommended if name == "condensate_recommended" else None
            run = await managed(arm, cap)
            ceiling = run.ceiling or cap or default_ceiling(engine)
        wall = time.perf_counter() - started
        async with aiohttp.ClientSession() as session:
            await recorder.collect(session)
        run.pending = await router.pending()
    finally:
        await router.close()
        await asyncio.to_thread(fake.close)
    return figures(arm, run, ceiling, wall)


def goals(arms: dict[str, dict[str, Any]]) -> dict[str, Any]:
    managed_arms = [arms[a] for a in ARMS[1:] if a in arms]
    over = sum(a["requests_over_ceiling"] for a in managed_arms)
    alone = arms.get("cli_alone", {}).get("weighted_input")
    ours = arms.get("condensate_recommended", {}).get("weighted_input")
    ratio = round(ours / alone, 4) if alone and ours is not None else None
    kept = [a["human_presence_min"] for a in managed_arms if a["human_presence_min"] is not None]
    kept_min = min(kept) if kept else None
    target_ratio = GOALS["weighted_input_vs_cli_alone_at_recommended"]
    return {
        "requests_over_ceiling_managed": {
            "goal": GOALS["requests_over_ceiling_managed"],
            "measured": over,
            "met": over == 0,
        },
        "weighted_input_vs_cli_alone_at_recommended": {
            "goal": target_ratio,
            "measured": ratio,
            "met": ratio is not None and ratio <= target_ratio,
        },
        "human_messages_kept": {
            "goal": GOALS["human_messages_kept"],
            "measured": kept_min,
            "met": kept_min is not None and kept_min >= GOALS["human_messages_kept"],
        },
    }


def machine(engine: Engine, binary: str) -> dict[str, Any]:
    check = claude_cli.check_version if engine == "claude" else codex_cli.check_version
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        engine: check(binary),
        f"{engine}_binary": binary,
    }


def binary_of(engine: Engine) -> str:
    return claude_cli.resolve_binary(None) if engine == "claude" else codex_cli.resolve_binary(None)


async def measure(setup: Setup, arms: Sequence[str]) -> dict[str, dict[str, Any]]:
    return {name: await run_arm(name, setup) for name in arms}


def run(
    engine: Engine,
    turns: int,
    calls_per_turn: int,
    *,
    recommended: int | None = None,
    arms: Sequence[str] = ARMS,
    keep: Path | None = None,
    pace: float = PACE,
) -> dict[str, Any]:
    binary = binary_of(engine)
    task = build_task(turns, calls_per_turn)
    ceiling = recommended or RECOMMENDED_CEILING[engine]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"condensate-{engine}-long-task-") as tmp:
        root = keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        setup = Setup(engine, binary, task, root, ceiling, pace)
        measured = asyncio.run(measure(setup, arms))
    return {
        "benchmark": "cli_long_task",
        "engine": engine,
        "command": shlex.join(["python", *sys.argv]),
        "machine": machine(engine, binary),
        "model": MODELS[engine],
        "curator_model": CURATOR_MODEL,
        "window": WINDOWS[engine],
        "default_ceiling": default_ceiling(engine),
        "recommended_ceiling": ceiling,
        "recommended_ceiling_setting": CEILING_SETTING[engine],
        "pace_s": pace,
        "weights": WEIGHTS,
        "task": {
            "seed": SEED,
            "human_turns": len(task.turns),
            "calls_per_turn": calls_per_turn,
            "scripted_model_calls": task.calls,
            "test_runs": len(task.runs),
            "failing_test_runs": task.failing_runs,
            "files": len(task.files),
            "file_bytes": sum(len(t) for t in task.files.values()),
        },
        "arms": measured,
        "goals": goals(measured),
        "wall_s": round(time.perf_counter() - started, 2),
    }


def _k(tokens: float | None) -> str:
    return "-" if tokens is None else f"{tokens / 1000:,.1f}k"


def table(report: dict[str, Any]) -> str:
    engine = report["engine"]
    lines = [
        f"cli_long_task: {report['model']} on {engine} {report['machine'][engine]}, window "
        f"{report['window']:,}; python {report['machine']['python']}, "
        f"{report['machine']['cpu_count']} cpus; {report['command']}",
        f"task: {report['task']['human_turns']} human turns, "
        f"{report['task']['scripted_model_calls']} scripted calls, "
        f"{report['task']['failing_test_runs']} failing test runs; ceilings: default "
        f"{report['default_ceiling']:,}, recommended {report['recommended_ceiling']:,}",
        "",
        f"{'arm':<24}{'calls':>7}{'weighted in':>13}{'USD':>9}{'cache read':>12}{'largest':>10}"
        f"{'/ceiling':>10}{'over':>6}{'refused':>9}{'thinking lost':>15}{'restarts':>10}"
        f"{'humans kept':>13}{'wall s':>9}",
    ]
    for name, arm in report["arms"].items():
        kept = arm["human_presence_min"]
        share = arm["cache_read_share"]
        lost = arm.get("thinking_dropped") or {"blocks": 0, "tokens": 0}
        thinking = f"{lost['blocks']} / {_k(lost['tokens'])}"
        lines.append(
            f"{name:<24}{arm['model_calls']:>7}{_k(arm['weighted_input']):>13}"
            f"{arm['usd']:>9.2f}"
            f"{'-' if share is None else f'{share:.1%}':>12}{_k(arm['largest_request']):>10}"
            f"{_k(arm['ceiling']):>10}{arm['requests_over_ceiling']:>6}"
            f"{arm['refused_requests'] + arm['thinking_refused_requests']:>9}"
            f"{thinking:>15}"
            f"{arm['session_restarts']:>10}{'-' if kept is None else f'{kept:.2f}':>13}"
            f"{arm['wall_s']:>9}"
        )
        lost = arm["human_markers_lost"]
        failed = [t for t in arm["turns"] if t["outcome"] != "completed"]
        if lost or failed:
            lines.append(f"    lost: {lost}; turns not completed: {failed}")
    lines.append("")
    for name, goal in report["goals"].items():
        lines.append(
            f"goal {name}: {goal['goal']} -> {goal['measured']} "
            f"({'met' if goal['met'] else 'MISSED'})"
        )
    lines.append(f"{report['wall_s']} s in all")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--engine", choices=ENGINES, default="claude")
    parser.add_argument("--turns", type=int, default=TURNS, help="human turns")
    parser.add_argument("--calls-per-turn", type=int, default=CALLS_PER_TURN)
    parser.add_argument("--ceiling", type=int, default=None, help="override the recommended one")
    parser.add_argument("--arms", default=",".join(ARMS), help="comma-separated arms to run")
    parser.add_argument("--keep", type=Path, default=None, help="keep state under this dir")
    parser.add_argument("--model", default=None, help="provider:model (default: the CLI's own)")
    parser.add_argument("--window", type=int, default=None, help="the fake's window for it")
    parser.add_argument(
        "--pace", type=float, default=PACE, help="seconds of the fake's clock a call"
    )
    args = parser.parse_args(argv)
    if args.model is not None:
        MODELS[args.engine] = args.model
    if args.window is not None:
        WINDOWS[args.engine] = args.window
    if args.turns < 1 or args.calls_per_turn < 1:
        parser.error("--turns and --calls-per-turn must be at least 1")
    arms = [a for a in args.arms.split(",") if a]
    if unknown := set(arms) - set(ARMS):
        parser.error(f"unknown arms {sorted(unknown)}; choose from {', '.join(ARMS)}")
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(30),
    )
    report = run(
        args.engine,
        args.turns,
        args.calls_per_turn,
        recommended=args.ceiling,
        arms=arms,
        keep=args.keep,
        pace=args.pace,
    )
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
