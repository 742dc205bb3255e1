"""The crash soak's hands: the fake model server in its own process, the daemon it kills and
restarts, the threads it steers, and everything it has read of their logs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio

from benchmarks import soak_checks as checks
from benchmarks.machine import clear_stale_pyenv_lock
from condensate.testing.fake_model import Call, Reply, Slow, Text, ToolCalls, reply_to_json
from tests.integration.daemon import REPO, DaemonProcess, call, fake_process

MODELS: dict[str, tuple[str, int]] = {
    "api": ("anthropic:claude-opus-5-5", 100_000),
    "claude": ("anthropic:claude-sonnet-4-5", 200_000),
    "codex": ("openai:gpt-5.5", 100_000),
    "curator": ("openai:gpt-5-mini", 100_000),
}
"""Engine -> (model, window). Each engine has a model of its own, so that each has its own
reply queue at the fake."""
FILE_LINES = 60
"""Lines in each file the native thread reads (~600 tokens): small, yet a few batches cross
the native ceiling so that windows happen."""
MOMENT_TIMEOUT = 15.0
FILL_CALLS = 100
FILL_BATCHES = 11
"""11 batches of 100 one-line reads: about 2,200 events, past the runtime's snapshot interval
(1,000 events) twice."""
FILL_TIMEOUT = 120.0


def bare(engine: str) -> str:
    return MODELS[engine][0].split(":", 1)[1]


@dataclass
class Ack:
    """An input the daemon acknowledged (201 or 202) that must get a final reply."""

    thread: str
    seq: int
    what: str
    uptime: float

    def describe(self) -> str:
        return f"{self.what} at seq {self.seq} of thread {self.thread}"


class Driver:
    def __init__(self, work: Path, fake_url: str, session: aiohttp.ClientSession) -> None:
        self.work = work
        self.home = work / "home"
        self.cwd = work / "cwd"
        self.fake_url = fake_url
        self.session = session
        self.daemon: DaemonProcess | None = None
        self.threads: dict[str, str] = {}
        self.seen: dict[str, dict[int, checks.Event]] = {}
        self.after: dict[str, int] = {}
        self.inputs: dict[str, dict[int, str]] = {}
        """Thread -> seq -> the text of a steer acknowledged at that seq."""
        self.briefs: dict[str, str] = {}
        self.acks: list[Ack] = []
        self.native = self.claude = self.codex = ""
        self._up_total = 0.0
        self._up_since: float | None = None
        self._fake_seen = 0
        self._inputs_sent = 0
        self._calls_made = 0
        self.stale_pyenv_locks = 0
        """How often the janitor found pyenv's rehash lock held by no process (see machine)."""

    @classmethod
    @contextlib.asynccontextmanager
    async def running(
        cls, work: Path, env: Callable[[dict[str, str]], dict[str, str]]
    ) -> AsyncIterator[Driver]:
        """A fake model server in a process of its own, a session, and a started daemon."""
        async with fake_process() as url, aiohttp.ClientSession() as session:
            driver = cls(work, url, session)
            driver.home.mkdir(exist_ok=True)
            driver.cwd.mkdir(exist_ok=True)
            bin_dir = REPO / "node_modules" / ".bin"
            binaries = {
                "CONDENSATE_CLAUDE_BINARY": str(bin_dir / "claude"),
                "CONDENSATE_CODEX_BINARY": str(bin_dir / "codex"),
            }
            driver.daemon = DaemonProcess(driver.home, url, extra_env=env(binaries))
            async with anyio.create_task_group() as janitor:
                janitor.start_soon(driver._clear_stale_locks)
                try:
                    await driver.restart()
                    yield driver
                finally:
                    await asyncio.to_thread(driver.daemon.close)
                    janitor.cancel_scope.cancel()

    async def _clear_stale_locks(self) -> None:
        """Undo, as the machine's own rule allows, what a SIGKILLed login shell leaves: the
        soak measures the daemon, not 60 s stalls of this machine's profile."""
        while True:
            if await asyncio.to_thread(clear_stale_pyenv_lock):
                self.stale_pyenv_locks += 1
            await asyncio.sleep(0.5)

    @property
    def database(self) -> Path:
        return self.home / "condensate.db"

    def _daemon(self) -> DaemonProcess:
        assert self.daemon is not None
        return self.daemon

    # -- the daemon's life -------------------------------------------------------------------

    async def restart(self) -> None:
        await asyncio.to_thread(self._daemon().start)
        self._up_since = time.monotonic()

    def kill(self) -> tuple[float, list[checks.Proc]]:
        """SIGKILL the daemon now; when, and the CLIs (and their children) it had."""
        process = self._daemon().process
        assert process is not None
        clis = checks.cli_descendants(process.pid)
        os.kill(process.pid, signal.SIGKILL)
        killed = time.monotonic()
        process.wait(timeout=30)
        if self._up_since is not None:
            self._up_total += killed - self._up_since
            self._up_since = None
        return killed, clis

    def uptime(self) -> float:
        """Seconds the daemon has run, summed over its restarts."""
        running = 0.0 if self._up_since is None else time.monotonic() - self._up_since
        return self._up_total + running

    def cli_environments(self) -> list[checks.Proc]:
        return checks.environment_matches([f"{self.home}/claude/", f"{self.home}/codex/"])

    # -- the fake ----------------------------------------------------------------------------

    async def reset_fake(self) -> None:
        """Forget the replies still queued and the request log: each round scripts its own."""
        async with self.session.post(f"{self.fake_url}/_fake/reset") as response:
            response.raise_for_status()
        self._fake_seen = 0

    async def queue(self, engine: str, *replies: Reply) -> None:
        body = {"model": bare(engine), "replies": [reply_to_json(r) for r in replies]}
        async with self.session.post(f"{self.fake_url}/_fake/queue", json=body) as response:
            response.raise_for_status()

    async def _new_requests(self) -> list[dict[str, Any]]:
        url = f"{self.fake_url}/_fake/requests?since={self._fake_seen}"
        async with self.session.get(url) as response:
            response.raise_for_status()
            found: list[dict[str, Any]] = (await response.json())["requests"]
        if found:
            self._fake_seen = max(r["number"] for r in found)
        return found

    async def fake_requests_since(self, mark: int) -> int:
        """With ``mark`` 0: the number of the fake's latest request (a mark); else how many
        requests came after the mark."""
        await self._new_requests()
        return self._fake_seen if mark == 0 else self._fake_seen - mark

    # -- threads -----------------------------------------------------------------------------

    async def setup(self) -> None:
        for name in ("a.txt", "b.txt"):
            text = "".join(
                f"{name} line {i}: some words to read {i * 7}\n" for i in range(FILE_LINES)
            )
            (self.cwd / name).write_text(text)
        (self.cwd / "c.txt").write_text("c.txt, read many times\nits second line\n")
        self.native = await self.create_thread("api")
        self.claude = await self.create_thread("claude")
        self.codex = await self.create_thread("codex")
        await self.fill(self.native)

    async def fill(self, thread: str) -> None:
        """Drive ``thread`` past the runtime's snapshot interval with cheap reads, so that
        restarts rebuild it from a snapshot and the replay check compares something."""
        batches = [
            ToolCalls([self._call("read", {"path": "c.txt"}) for _ in range(FILL_CALLS)])
            for _ in range(FILL_BATCHES)
        ]
        await self.queue("api", *batches, Text("Filled."))
        ack = await self.steer(thread, "Read c.txt many times.")
        deadline = time.monotonic() + FILL_TIMEOUT
        while time.monotonic() < deadline:
            await self.read_new(thread, wait=1)
            if checks.answered(list(self.seen[thread].values()), ack.seq):
                return
        msg = f"the native thread did not finish its reads within {FILL_TIMEOUT} s"
        raise RuntimeError(msg)

    def _register(self, thread: str, engine: str) -> None:
        self.threads[thread] = engine
        self.seen.setdefault(thread, {})
        self.after.setdefault(thread, 0)
        self.inputs.setdefault(thread, {})

    def _text(self, text: str) -> str:
        self._inputs_sent += 1
        return f"{text} (input {self._inputs_sent})"

    async def create_thread(self, engine: str) -> str:
        brief = self._text(f"A {engine} thread of the crash soak: answer briefly.")
        status, body = await call(
            self.session,
            self._daemon(),
            "POST",
            "/threads",
            {
                "engine": engine,
                "model": MODELS[engine][0],
                "cwd": str(self.cwd),
                "brief": brief,
                "head": False,  # windowed without asking (a head is asked, and runs an MCP server)
            },
        )
        if status != 201:
            msg = f"POST /threads answered {status}: {body}"
            raise RuntimeError(msg)
        thread = str(body["id"])
        self._register(thread, engine)
        self.briefs[thread] = brief
        self.acks.append(Ack(thread, 1, "brief", self.uptime()))
        return thread

    async def steer(self, thread: str, text: str) -> Ack:
        text = self._text(text)
        path = f"/threads/{thread}/messages"
        status, body = await call(self.session, self._daemon(), "POST", path, {"text": text})
        if status != 202:
            msg = f"POST {path} answered {status}: {body}"
            raise RuntimeError(msg)
        ack = Ack(thread, int(body["seq"]), "steer", self.uptime())
        self.inputs[thread][ack.seq] = text
        self.acks.append(ack)
        return ack

    def _call(self, name: str, arguments: dict[str, Any]) -> Call:
        """A call with an id unique over the whole soak: the fake numbers its own ids from
        its request counter, which each round's reset starts again."""
        self._calls_made += 1
        return Call(name, arguments, id=f"call_soak{self._calls_made:05d}")

    async def steer_batch(self, thread: str) -> Ack:
        batch = ToolCalls(
            [
                self._call("read", {"path": "a.txt"}),
                self._call("shell", {"command": "sleep 0.3; echo batch"}),
                self._call("read", {"path": "b.txt"}),
            ],
            text="Reading both files.",
        )
        await self.queue("api", batch, Text("The batch is done."))
        return await self.steer(thread, "Read a.txt and b.txt, then answer.")

    async def steer_cli(self, thread: str) -> Ack:
        engine = self.threads[thread]
        command = "sleep 0.3; echo cli"
        tool = (
            self._call("Bash", {"command": command})
            if engine == "claude"
            else self._call("exec_command", {"cmd": command})
        )
        await self.queue(
            engine, ToolCalls([tool], text="Running it."), Slow(Text("It ran."), 0.05, 10)
        )
        return await self.steer(thread, "Run one short command, then answer.")

    # -- moments -----------------------------------------------------------------------------

    async def _until(self, thread: str, found: Callable[[checks.Event], bool]) -> bool:
        deadline = time.monotonic() + MOMENT_TIMEOUT
        while time.monotonic() < deadline:
            if any(found(e) for e in await self.read_new(thread, wait=1)):
                return True
        return False

    async def seen_tool_calls(self, thread: str, after: int, delay: Callable[[], float]) -> bool:
        """Once the model's tool batch after ``after`` is logged, sleep ``delay()``."""
        hit = await self._until(
            thread,
            lambda e: (
                e["seq"] > after and e["kind"] == "message.assistant" and bool(e["tool_calls"])
            ),
        )
        await asyncio.sleep(delay())
        return hit

    async def turn_running(self, thread: str, after: int, delay: Callable[[], float]) -> bool:
        """Once anything after ``after`` is logged (the turn has begun), sleep ``delay()``."""
        hit = await self._until(thread, lambda e: e["seq"] > after)
        await asyncio.sleep(delay())
        return hit

    async def summary_in_flight(self, thread: str, delay: Callable[[], float]) -> bool:
        """Queue a summary compaction and a steer that starts a turn; once the curator's call
        reaches the fake (it streams for ~0.8 s), sleep ``delay()``."""
        await self.queue("curator", Slow(Text("Summary: the soak read files."), 0.05, 16))
        await self.queue("api", Text("Carrying on after the summary."))
        path = f"/threads/{thread}/compact"
        status, body = await call(self.session, self._daemon(), "POST", path, {"mode": "summary"})
        if status not in (200, 202):
            msg = f"POST {path} answered {status}: {body}"
            raise RuntimeError(msg)
        await self.steer(thread, "Go on after the compaction.")
        deadline = time.monotonic() + MOMENT_TIMEOUT
        while time.monotonic() < deadline:
            if any(r["model"] == bare("curator") for r in await self._new_requests()):
                await asyncio.sleep(delay())
                return True
            await asyncio.sleep(0.05)
        return False

    # -- reading -----------------------------------------------------------------------------

    def _keep(self, thread: str, events: list[checks.Event]) -> None:
        for event in events:
            self.seen[thread][event["seq"]] = event
            self.after[thread] = max(self.after[thread], event["seq"])

    async def read_new(self, thread: str, wait: int = 0) -> list[checks.Event]:
        """The events after the last one read (one page), remembered as acknowledged."""
        after = self.after[thread]
        path = f"/threads/{thread}/tail?after={after}&history=1&limit=1000&wait={wait}"
        status, page = await call(self.session, self._daemon(), "GET", path)
        if status != 200:
            return []
        events: list[checks.Event] = page["events"]
        self._keep(thread, events)
        return events

    async def full_log(self, thread: str) -> list[checks.Event]:
        """The whole log of ``thread`` from seq 1 (empty if the daemon does not know it)."""
        events: list[checks.Event] = []
        after = 0
        while True:
            path = f"/threads/{thread}/tail?after={after}&history=1&limit=1000"
            status, page = await call(self.session, self._daemon(), "GET", path)
            if status != 200:
                return events
            events += page["events"]
            after = page["nextAfter"]
            if not page["hasMore"]:
                break
        self._keep(thread, events)
        return events

    async def inspect(self, thread: str) -> dict[str, Any] | None:
        status, body = await call(self.session, self._daemon(), "GET", f"/threads/{thread}")
        return body if status == 200 else None

    def input_problems(self, thread: str, events: list[checks.Event]) -> list[str]:
        """Each acknowledged steer is the human message at its seq; the brief is logged."""
        at = {e["seq"]: e for e in events}
        problems = [
            f"the steer acknowledged at seq {seq} is not there"
            for seq, text in sorted(self.inputs[thread].items())
            if at.get(seq, {}).get("kind") != "message.user" or at[seq].get("text") != text
        ]
        brief = self.briefs.get(thread)
        if brief is not None and not any(e.get("text") == brief for e in events):
            problems.append("the acknowledged brief is not logged")
        return problems
