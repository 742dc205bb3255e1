"""CLI latency: what a real Condensate daemon adds to a turn of the ``claude`` or ``codex`` CLI.

One fake model server (short text replies) serves both sides in the same run:

* **direct**: the pinned CLI started as its engine starts it (the same command line and
  environment: ``claude -p --input-format stream-json ...``, or ``codex app-server`` with the
  generated ``CODEX_HOME``); a turn is timed from writing the user line (``turn/start``) to
  reading its ``result`` line (``turn/completed``);
* **condensate**: a real daemon (``python -m condensate serve``) running a thread on that
  engine; a turn is timed from ``POST /threads/:id/messages`` to ``turn.ended`` seen on a
  long-polling ``tail``.

Each side's first turn (the CLI's start; reported as ``first_turn_ms``) is a warm-up and not
counted; then N warm turns run, alternating direct and daemon turns so that both see the same
machine load. Added latency per turn = the daemon's median less the direct median (and the
same for p90).

    python benchmarks/cli_latency.py --engine claude            # a table
    python benchmarks/cli_latency.py --engine codex --json      # one JSON object
    python benchmarks/cli_latency.py --engine codex --json --turns 2   # CI
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import structlog

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters import _child
from adapters.claude_code import _cli as claude_cli
from adapters.claude_code._translate import unprompted
from adapters.codex import _cli as codex_cli
from adapters.codex._rpc import AppServer
from condensate.engine import EngineEnv, EngineSettings, ThreadSpec
from condensate.testing.fake_model import FakeModelServer
from tests.integration.daemon import DaemonProcess, call

# Claude Code's default model; for Codex gpt-5.5, the one model of the pinned catalog
# (0.171.0) whose tools are not code-mode only: the engine is checked with those tools.
MODELS = {"claude": "anthropic:claude-opus-5-5", "codex": "openai:gpt-5.5"}
WINDOW = 200_000
TURNS = 7
BRIEF = "Answer in one short sentence."
TURN_TIMEOUT = 60.0


def binary_of(engine: str) -> str:
    return claude_cli.resolve_binary(None) if engine == "claude" else codex_cli.resolve_binary(None)


def machine(engine: str, binary: str) -> dict[str, Any]:
    check = claude_cli.check_version if engine == "claude" else codex_cli.check_version
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        engine: check(binary),
        f"{engine}_binary": binary,
    }


def engine_env(work: Path, fake_url: str, own: EngineSettings) -> EngineEnv:
    return EngineEnv(
        home=work,
        thread_id="direct",
        anthropic_base_url=fake_url,
        anthropic_api_key="sk-bench",
        openai_base_url=f"{fake_url}/v1",
        openai_api_key="sk-bench",
        settings=own,
    )


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def summary(seconds: list[float]) -> dict[str, Any]:
    return {
        "median_ms": ms(statistics.median(seconds)),
        "p90_ms": ms(percentile(seconds, 0.9)),
        "min_ms": ms(min(seconds)),
        "max_ms": ms(max(seconds)),
        "turns_ms": [ms(s) for s in seconds],
    }


class DirectClaude:
    """The ``claude`` CLI on its own, started with the engine's command line and environment."""

    def __init__(self, binary: str, work: Path, fake_url: str) -> None:
        self.binary = binary
        self.work = work
        self.fake_url = fake_url
        self.process: asyncio.subprocess.Process | None = None
        self.session = str(uuid.uuid4())

    async def start(self) -> None:
        config = self.work / "direct-claude"
        config.mkdir(mode=0o700)
        spec = ThreadSpec("claude", MODELS["claude"], str(self.work), BRIEF)
        own = claude_cli.ClaudeSettings(claude_binary=self.binary)
        env = engine_env(self.work, self.fake_url, own)
        args = claude_cli.command(
            self.binary, spec, resume=None, fork_at=None, new_session=self.session
        )
        self.process = await _child.spawn(
            args, cwd=str(self.work), state_dir=config, env=claude_cli.environment(config, env)
        )

    async def turn(self, text: str) -> float:
        """Seconds from writing the user line to reading its turn's ``result``."""
        process = self.process
        assert process is not None
        assert process.stdout is not None
        started = time.perf_counter()
        await claude_cli.write(process, claude_cli.user_line(text, self.session))
        while True:
            raw = await asyncio.wait_for(process.stdout.readline(), TURN_TIMEOUT)
            if not raw:
                msg = f"claude exited mid-turn ({await process.wait()})"
                raise RuntimeError(msg)
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and line.get("type") == "result" and not unprompted(line):
                elapsed = time.perf_counter() - started
                if line.get("is_error"):
                    msg = f"the direct turn failed: {line.get('result')}"
                    raise RuntimeError(msg)
                return elapsed

    async def close(self) -> None:
        if self.process is not None:
            await _child.stop(self.process)


class DirectCodex:
    """``codex app-server`` on its own, with the engine's generated ``CODEX_HOME``."""

    def __init__(self, binary: str, work: Path, fake_url: str) -> None:
        self.binary = binary
        self.work = work
        self.fake_url = fake_url
        self.server: AppServer | None = None
        self.thread = ""

    async def start(self) -> None:
        home = self.work / "direct-codex"
        spec = ThreadSpec("codex", MODELS["codex"], str(self.work), BRIEF)
        env = engine_env(
            self.work, self.fake_url, codex_cli.CodexSettings(codex_binary=self.binary)
        )
        await asyncio.to_thread(codex_cli.prepare_home, self.binary, spec, env, home)
        process = await _child.spawn(
            codex_cli.command(self.binary),
            cwd=str(self.work),
            state_dir=home,
            env=codex_cli.environment(home, env),
        )
        self.server = AppServer(process)
        await self.server.initialize()
        started = await self.server.request(
            "thread/start",
            {"cwd": str(self.work), "approvalPolicy": "never", "sandbox": "danger-full-access"},
        )
        self.thread = started["thread"]["id"]

    async def turn(self, text: str) -> float:
        """Seconds from sending ``turn/start`` to reading its ``turn/completed``."""
        server = self.server
        assert server is not None
        started = time.perf_counter()
        begun = await server.request(
            "turn/start",
            {"threadId": self.thread, "input": [{"type": "text", "text": text}]},
        )
        turn = begun["turn"]["id"]
        while True:
            note = await asyncio.wait_for(server.next_notification(), TURN_TIMEOUT)
            params = note.get("params") or {}
            if note.get("method") == "turn/completed" and params["turn"]["id"] == turn:
                elapsed = time.perf_counter() - started
                if params["turn"]["status"] != "completed":
                    msg = f"the direct turn ended {params['turn']}"
                    raise RuntimeError(msg)
                return elapsed

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()


class ThroughDaemon:
    """A thread of a real daemon on the given engine, driven over its HTTP API."""

    def __init__(self, engine: str, binary: str, work: Path, fake_url: str) -> None:
        self.engine = engine
        home = work / "home"
        home.mkdir()
        self.work = work / "thread"
        self.work.mkdir()
        self.daemon = DaemonProcess(
            home,
            fake_url,
            extra_env={
                "CONDENSATE_CLAUDE_BINARY": binary,
                "CONDENSATE_CODEX_BINARY": binary,
                "CONDENSATE_MODEL_WINDOWS": json.dumps({MODELS[engine]: WINDOW}),
                "CONDENSATE_CURATOR_MODEL": "anthropic:claude-haiku-5-5",
            },
        )
        self.thread = ""
        self.after = 0

    async def start(self, session: aiohttp.ClientSession) -> float:
        """Start the daemon and the thread; seconds of its first turn (the CLI's start)."""
        await asyncio.to_thread(self.daemon.start)
        started = time.perf_counter()
        status, created = await call(
            session,
            self.daemon,
            "POST",
            "/threads",
            {
                "engine": self.engine,
                "model": MODELS[self.engine],
                "cwd": str(self.work),
                "brief": BRIEF,
            },
        )
        if status != 201:
            msg = f"the daemon refused the thread: {created}"
            raise RuntimeError(msg)
        self.thread = str(created["id"])
        await self._turn_ended(session)
        return time.perf_counter() - started

    async def turn(self, session: aiohttp.ClientSession, text: str) -> float:
        """Seconds from posting the message to seeing its turn's ``turn.ended``."""
        started = time.perf_counter()
        status, body = await call(
            session, self.daemon, "POST", f"/threads/{self.thread}/messages", {"text": text}
        )
        if status != 202:
            msg = f"the daemon refused the message: {body}"
            raise RuntimeError(msg)
        await self._turn_ended(session)
        return time.perf_counter() - started

    async def _turn_ended(self, session: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + TURN_TIMEOUT
        while time.monotonic() < deadline:
            path = f"/threads/{self.thread}/tail?after={self.after}&limit=1000&wait=25"
            status, page = await call(session, self.daemon, "GET", path)
            if status != 200:
                msg = f"tail failed: {page}"
                raise RuntimeError(msg)
            self.after = page["nextAfter"]
            for event in page["events"]:
                if event["kind"] == "turn.ended":
                    if event["outcome"] != "completed":
                        msg = f"the daemon's turn ended {event}:\n{self.daemon.log_tail()}"
                        raise RuntimeError(msg)
                    return
        msg = f"no turn.ended within {TURN_TIMEOUT} s:\n{self.daemon.log_tail()}"
        raise RuntimeError(msg)

    def close(self) -> None:
        self.daemon.close()


async def measure(engine: str, turns: int, work: Path, binary: str) -> dict[str, Any]:
    async with FakeModelServer(window=WINDOW) as fake, aiohttp.ClientSession() as session:
        direct = (DirectClaude if engine == "claude" else DirectCodex)(binary, work, fake.url)
        daemon = ThroughDaemon(engine, binary, work, fake.url)
        try:
            started = time.perf_counter()
            await direct.start()
            await direct.turn(BRIEF)
            direct_first = time.perf_counter() - started
            daemon_first = await daemon.start(session)
            direct_s: list[float] = []
            daemon_s: list[float] = []
            for i in range(turns):
                direct_s.append(await direct.turn(f"Short question {i}?"))
                daemon_s.append(await daemon.turn(session, f"Short question {i}?"))
        finally:
            await direct.close()
            await asyncio.to_thread(daemon.close)
        requests = len([r for r in fake.requests if r.endpoint in ("messages", "responses")])
    ours, theirs = summary(daemon_s), summary(direct_s)
    return {
        "direct": {**theirs, "first_turn_ms": ms(direct_first)},
        "condensate": {**ours, "first_turn_ms": ms(daemon_first)},
        "added_median_ms": round(ours["median_ms"] - theirs["median_ms"], 2),
        "added_p90_ms": round(ours["p90_ms"] - theirs["p90_ms"], 2),
        "model_requests": requests,
    }


def run(engine: str, turns: int) -> dict[str, Any]:
    binary = binary_of(engine)
    with tempfile.TemporaryDirectory(prefix=f"condensate-{engine}-latency-") as tmp:
        measured = asyncio.run(measure(engine, turns, Path(tmp), binary))
    return {
        "benchmark": "cli_latency",
        "engine": engine,
        "command": shlex.join(["python", *sys.argv]),
        "machine": machine(engine, binary),
        "model": MODELS[engine],
        "turns": turns,
        **measured,
    }


def table(report: dict[str, Any]) -> str:
    d, c = report["direct"], report["condensate"]
    engine = report["engine"]
    return "\n".join(
        [
            f"cli_latency: {report['model']}; {engine} {report['machine'][engine]}; python "
            f"{report['machine']['python']}, {report['machine']['cpu_count']} cpus; "
            f"{report['command']}",
            "",
            f"{report['turns']} warm turns, one short text reply each:",
            f"  direct CLI   median {d['median_ms']} ms, p90 {d['p90_ms']} ms "
            f"({d['min_ms']}-{d['max_ms']} ms; first turn {d['first_turn_ms']} ms)",
            f"  condensate   median {c['median_ms']} ms, p90 {c['p90_ms']} ms "
            f"({c['min_ms']}-{c['max_ms']} ms; first turn {c['first_turn_ms']} ms)",
            f"  added per turn: median {report['added_median_ms']} ms, "
            f"p90 {report['added_p90_ms']} ms",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--engine", choices=sorted(MODELS), default="claude")
    parser.add_argument("--turns", type=int, default=TURNS, help="warm turns per side")
    args = parser.parse_args(argv)
    if args.turns < 1:
        parser.error("--turns must be at least 1")
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(30),
    )
    report = run(args.engine, args.turns)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
