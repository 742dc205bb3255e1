"""Overhead: what the daemon adds to each native model call, and how fast the log appends.

**Per call.** A real runtime (the embedded SQLite log, the projector, meter, planner and the
native engine from ``adapters``) runs one native turn of N model calls against the fake model
server, which runs in a process of its own as a provider would (its request log and its
garbage collections are not the daemon's); each call reads a ~300-token file. The client is
wrapped to time each model call, and the read tool to time each tool run. The daemon's time
for call k is the wall time from the end of call k-1 to the end of call k, less the tool's own
time: it covers appending the usage, the reply and the tool result (token counting and
SQLite), folding them into the view, the window check and building the request, plus the HTTP
call itself. Every
request the engine sent is then sent again, directly, to the same fake, and timed. Added
latency per call = the daemon's time for the call less the direct call's time.

**Appends.** ``EventLog.append`` of tool results with ~300-token outputs, one event per
transaction and in batches of 100, sustained over N events; and the same with token counting
switched off (a counter that returns 0), with tiktoken alone, and with tiktoken's
``encode_ordinary_batch`` over a batch of 100, to show where the time goes.

    python benchmarks/overhead.py               # a table
    python benchmarks/overhead.py --json        # one JSON object
    python benchmarks/overhead.py --json --small   # CI
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import structlog

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import adapters.native.engine
from benchmarks.planner_scale import search_output
from condensate.core.messages import Completion, Request
from condensate.core.meter import ModelWindow
from condensate.core.projector import Projection
from condensate.core.prompt import to_messages
from condensate.core.tokens import Counter, TiktokenCounter, count_event, counter_for
from condensate.runtime.curator import Curator
from condensate.engine import ThreadSpec
from condensate.engine.registry import installed
from condensate.events import Event, ToolResult, now_utc
from condensate.providers import ModelClient, make_client
from condensate.providers.anthropic import AnthropicClient
from condensate.runtime import Runtime
from condensate.settings import Settings
from condensate.eventlog.sqlite import SqliteStore
from condensate.eventlog.sqlite_sync import EventLog
from condensate.testing.fake_model import Call, Text, ToolCalls, reply_to_json
from tests.integration.daemon import fake_process

MODEL = "anthropic:claude-opus-5-5"
SEED = 20_261_208
TARGET_MEDIAN_MS = 1.0
TARGET_APPENDS = 20_000
FULL = {"calls": 300, "appends": 5_000}
SMALL = {"calls": 40, "appends": 600}
BATCH = 100


def machine() -> dict[str, Any]:
    import tiktoken  # noqa: PLC0415  (only its version is wanted here)

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "tiktoken": tiktoken.__version__,
        "encoding": counter_for(MODEL).name,
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 4)


# -- per call ---------------------------------------------------------------------------------


@dataclass
class TimedClient:
    """Wraps the engine's client: when each call started and ended, and what it sent."""

    inner: ModelClient
    provider: str = "anthropic"
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)

    async def complete(self, request: Request) -> Completion:
        self.requests.append(request)
        self.starts.append(time.perf_counter())
        try:
            return await self.inner.complete(request)
        finally:
            self.ends.append(time.perf_counter())


async def queue_replies(session: aiohttp.ClientSession, url: str, replies: list[Any]) -> None:
    body = {"model": None, "replies": [reply_to_json(r) for r in replies]}
    async with session.post(f"{url}/_fake/queue", json=body) as response:
        response.raise_for_status()


@dataclass
class FullCollections:
    """When the garbage collector's full (generation 2) collections ran: they stop the whole
    daemon process for as long as its heap is large."""

    pauses: list[tuple[float, float]] = field(default_factory=list)
    started: float | None = None

    def seen(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self.started = time.perf_counter()
        elif self.started is not None:
            self.pauses.append((self.started, time.perf_counter()))
            self.started = None

    def during(self, start: float, end: float) -> list[float]:
        """The lengths of the collections that overlapped ``start``..``end``."""
        return [b - a for a, b in self.pauses if a < end and start < b]


async def per_call(calls: int, work: Path) -> dict[str, Any]:
    rng = random.Random(SEED)
    (work / "notes.py").write_text(search_output(rng, 1_000))
    tool_seconds: list[float] = []
    engine_globals = vars(adapters.native.engine)
    real_run_tool = engine_globals["run_tool"]

    async def timed_run_tool(name: str, arguments: Mapping[str, Any], ctx: Any) -> Any:
        started = time.perf_counter()
        try:
            return await real_run_tool(name, arguments, ctx)
        finally:
            tool_seconds.append(time.perf_counter() - started)

    engine_globals["run_tool"] = timed_run_tool  # the benchmark times the tool the engine runs
    collections = FullCollections()
    gc.callbacks.append(collections.seen)
    try:
        async with fake_process(1_000_000) as fake_url, aiohttp.ClientSession() as session:
            settings = Settings(
                home=work / "home",
                anthropic_base_url=fake_url,
                anthropic_api_key="bench",
                model_windows={MODEL: 1_000_000},
            )
            providers = settings.providers()
            timed = TimedClient(make_client(MODEL, providers, session))

            def client_for(model: str) -> ModelClient:
                return timed if model == MODEL else make_client(model, providers, session)

            async def window_for(model: str) -> ModelWindow:
                return ModelWindow(1_000_000, resolved=True)

            log = SqliteStore.open(settings.db_path)
            curator = Curator(settings.curator(), client_for, session)
            runtime = Runtime(settings, log, installed(), curator, client_for, window_for)
            await queue_replies(
                session,
                fake_url,
                [
                    *[ToolCalls([Call("read", {"path": "notes.py"})]) for _ in range(calls - 1)],
                    Text("done"),
                ],
            )
            async with anyio.create_task_group() as tasks:
                runtime.bind(tasks)
                spec = ThreadSpec("api", MODEL, str(work), "Read notes.py again and again.")
                thread = await runtime.create(spec)
                await thread.turn_done.wait()
            await log.close()
            view = thread.projection
            build = time_to_messages(view)
            direct = await time_directly(AnthropicClient(fake_url, "bench", session=session), timed)
    finally:
        engine_globals["run_tool"] = real_run_tool
        gc.callbacks.remove(collections.seen)
    model = [e - s for s, e in zip(timed.starts, timed.ends, strict=True)]
    daemon: list[float] = []
    added: list[float] = []
    between: list[float] = []
    for k in range(1, len(timed.ends)):
        gap = timed.starts[k] - timed.ends[k - 1] - tool_seconds[k - 1]
        between.append(gap)
        daemon.append(gap + model[k])
        added.append(gap + model[k] - direct[k])
    untouched = [
        added[k - 1]
        for k in range(1, len(timed.ends))
        if not collections.during(timed.ends[k - 1], timed.ends[k])
    ]
    in_run = collections.during(timed.starts[0], timed.ends[-1])
    return {
        "calls": len(timed.requests),
        "tool_runs": len(tool_seconds),
        "prompt_chars_first_last": [
            fake_prompt(timed.requests[0]),
            fake_prompt(timed.requests[-1]),
        ],
        "median_ms": ms(statistics.median(added)),
        "p99_ms": ms(percentile(added, 0.99)),
        "mean_ms": ms(statistics.fmean(added)),
        "full_gc_during_run": len(in_run),
        "full_gc_max_ms": ms(max(in_run, default=0.0)),
        "p99_ms_calls_without_full_gc": ms(percentile(untouched, 0.99)),
        "daemon_between_calls_median_ms": ms(statistics.median(between)),
        "daemon_between_calls_p99_ms": ms(percentile(between, 0.99)),
        "model_call_in_daemon_median_ms": ms(statistics.median(model[1:])),
        "direct_call_median_ms": ms(statistics.median(direct[1:])),
        "daemon_call_median_ms": ms(statistics.median(daemon)),
        "tool_median_ms": ms(statistics.median(tool_seconds)),
        "to_messages_final_view_ms": ms(statistics.median(build)),
        "final_view_entries": len(view.entries),
    }


def time_to_messages(view: Projection) -> list[float]:
    build: list[float] = []
    for _ in range(20):
        started = time.perf_counter()
        to_messages(view)
        build.append(time.perf_counter() - started)
    return build


async def time_directly(client: ModelClient, timed: TimedClient) -> list[float]:
    """Every request the engine sent, sent again straight to the fake, each timed."""
    direct: list[float] = []
    for request in timed.requests:
        started = time.perf_counter()
        await client.complete(request)
        direct.append(time.perf_counter() - started)
    return direct


def fake_prompt(request: Request) -> int:
    """Characters of the request's messages: a size marker, not a token count."""
    return sum(len(str(m.content)) for m in request.messages)


# -- appends ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZeroCounter:
    name: str = "zero"

    def count(self, text: str) -> int:
        return 0


def tool_results(n: int, distinct: int = 50) -> list[Event]:
    """``n`` results whose outputs cycle through ``distinct`` texts (each with its own last line):
    with ``distinct`` = ``n`` no text repeats, the worst case for remembered token counts."""
    rng = random.Random(SEED)
    pool = [search_output(rng, 1_080) for _ in range(distinct)]
    return [
        ToolResult(
            at=now_utc(),
            call_id=f"call_{i}",
            tool="search",
            argument="def render_",
            output=pool[i % len(pool)] + f"\n# {i}",
        )
        for i in range(n)
    ]


def _rate(fn: Callable[[], object], events: int) -> float:
    started = time.perf_counter()
    fn()
    return events / (time.perf_counter() - started)


def _appender(
    log: EventLog, events: list[Event], size: int, counter: Counter
) -> Callable[[], object]:
    def go() -> None:
        for i in range(0, len(events), size):
            log.append("t", events[i] if size == 1 else events[i : i + size], counter)

    return go


def appends(n: int, work: Path) -> dict[str, Any]:
    events = tool_results(n)
    counter = counter_for(MODEL)
    tokens = [count_event(e, counter) for e in events[:200]]
    out: dict[str, Any] = {
        "events": n,
        "batch": BATCH,
        "event_tokens_median": statistics.median(tokens),
    }
    counters: tuple[tuple[str, Counter], ...] = (("counted", counter), ("uncounted", ZeroCounter()))
    for label, chosen in counters:
        for size in (1, BATCH):
            kind = "single" if size == 1 else "batch"
            with EventLog.open(work / f"{label}-{kind}.db") as log:
                appender = _appender(log, events, size, fresh_counter(chosen))
                out[f"{kind}_per_s_{label}"] = round(_rate(appender, n))
    unique = tool_results(n, distinct=n)
    with EventLog.open(work / "counted-batch-unique.db") as log:
        out["batch_per_s_counted_unique"] = round(
            _rate(_appender(log, unique, BATCH, fresh_counter(counter)), n)
        )
    out["counter_per_s"] = round(_rate(lambda: [count_event(e, counter) for e in events], n))
    if isinstance(counter, TiktokenCounter):
        encoding = counter.encoding
        texts = [e.output for e in events if isinstance(e, ToolResult)]
        out["tiktoken_count_per_s"] = round(
            _rate(lambda: [encoding.encode_ordinary(t) for t in texts], n)  # type: ignore[attr-defined]
        )
        out["tiktoken_batch_count_per_s"] = round(
            _rate(
                lambda: [
                    encoding.encode_ordinary_batch(texts[i : i + BATCH])  # type: ignore[attr-defined]
                    for i in range(0, n, BATCH)
                ],
                n,
            )
        )
    out["sustained_per_s"] = out["batch_per_s_counted"]
    return out


def fresh_counter(counter: Counter) -> Counter:
    """A fresh counter of the same encoding, with nothing remembered from earlier measures."""
    if isinstance(counter, TiktokenCounter):
        return TiktokenCounter(counter.encoding, counter.name)
    return counter


# -- report -----------------------------------------------------------------------------------


def run(calls: int, n_appends: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="condensate-overhead-") as tmp:
        work = Path(tmp)
        call = anyio.run(per_call, calls, work)
        appended = appends(n_appends, work)
    return {
        "benchmark": "overhead",
        "command": shlex.join(["python", *sys.argv]),
        "machine": machine(),
        "model": MODEL,
        "per_call": call,
        "appends": appended,
        "targets": {
            "median_ms_max": TARGET_MEDIAN_MS,
            "appends_per_s_min": TARGET_APPENDS,
            "median_met": call["median_ms"] <= TARGET_MEDIAN_MS,
            "appends_met": appended["sustained_per_s"] >= TARGET_APPENDS,
        },
    }


def table(report: dict[str, Any]) -> str:
    c, a, t = report["per_call"], report["appends"], report["targets"]
    return "\n".join(
        [
            f"overhead: {report['model']}; python {report['machine']['python']}, "
            f"{report['machine']['cpu_count']} cpus; {report['command']}",
            "",
            f"per native model call ({c['calls']} calls): added median {c['median_ms']} ms, "
            f"p99 {c['p99_ms']} ms (target <= {t['median_ms_max']} ms: "
            f"{'met' if t['median_met'] else 'MISSED'})",
            f"  {c['full_gc_during_run']} full collections during the run (longest "
            f"{c['full_gc_max_ms']} ms); p99 of the calls none overlapped "
            f"{c['p99_ms_calls_without_full_gc']} ms",
            f"  daemon between calls median {c['daemon_between_calls_median_ms']} ms; model call "
            f"in daemon {c['model_call_in_daemon_median_ms']} ms, direct "
            f"{c['direct_call_median_ms']} ms; tool {c['tool_median_ms']} ms",
            f"appends ({a['events']} tool results of ~{a['event_tokens_median']} tokens): "
            f"single {a['single_per_s_counted']:,}/s, batches of {a['batch']} "
            f"{a['batch_per_s_counted']:,}/s (target >= {t['appends_per_s_min']:,}/s: "
            f"{'met' if t['appends_met'] else 'MISSED'})",
            f"  batches of never-seen text {a['batch_per_s_counted_unique']:,}/s; without "
            f"counting: single {a['single_per_s_uncounted']:,}/s, batch "
            f"{a['batch_per_s_uncounted']:,}/s",
            f"  counter {a['counter_per_s']:,}/s; tiktoken alone "
            f"{a.get('tiktoken_count_per_s', 0):,}/s, encode_ordinary_batch "
            f"{a.get('tiktoken_batch_count_per_s', 0):,}/s",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--small", action="store_true", help="CI size")
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--appends", type=int, default=None)
    args = parser.parse_args(argv)
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(30),
    )
    sizes = SMALL if args.small else FULL
    calls = args.calls or sizes["calls"]
    n = args.appends or sizes["appends"]
    if calls < 5 or n < BATCH:
        parser.error(f"--calls must be at least 5 and --appends at least {BATCH}")
    report = run(calls, n)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
