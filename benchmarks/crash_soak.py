"""Crash soak: SIGKILL a real daemon at random moments and check that nothing acknowledged is lost.

One fake model server (its own process) serves a real daemon (``python -m condensate serve``)
that runs a native thread (``api``), a Claude Code thread (``claude``) and a Codex thread
(``codex``), plus the threads the soak starts on the way. Each round picks a moment (seeded):

* ``mid-batch``: a native tool batch (read, shell, read) is running or being appended;
* ``mid-summary``: the curator's summary call for a queued compaction is streaming;
* ``after-201`` / ``after-202``: right after ``POST /threads`` / ``POST /threads/:id/messages``;
* ``mid-cli-turn``: a Claude Code or Codex turn runs a command and streams its answer;
* ``mid-recovery``: two steers, a kill, a restart, and a second kill while the restarted
  daemon closes the cut-off turns and answers what was acknowledged;
* ``random``: a random delay after steering two random threads.

It SIGKILLs the daemon there, checks the CLIs died with it and called the model no more,
checks the log file offline (a view rebuilt from its snapshot equals a full replay), restarts
the daemon on the same state directory and checks every thread: each event read before the
kill is still there unchanged, seqs run without gap or duplicate, no cut is windowed twice,
the daemon's live view equals a full replay, and every acknowledged brief and steer gets a
final reply within ``ANSWER_WITHIN`` seconds of the restart (before the next kill).

    python benchmarks/crash_soak.py --kills 20 --json
    python benchmarks/crash_soak.py --kills 200 --seed 7
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shlex
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import soak_checks as checks
from benchmarks.soak_driver import MODELS, Ack, Driver
from condensate.core.ceilings import CeilingSettings
from condensate.engine.registry import installed, profile
from condensate.settings import Settings

BOUNDARIES = (
    "mid-batch",
    "mid-summary",
    "after-201",
    "after-202",
    "mid-cli-turn",
    "mid-recovery",
    "random",
)
CHECKS = [
    "events_kept",
    "seq_contiguous",
    "one_window_per_cut",
    "inputs_answered",
    "snapshot_equals_replay",
    "live_view_equals_replay",
    "no_orphan_child",
    "no_orphan_requests",
]
ANSWER_WITHIN = 30.0
"""Seconds of daemon uptime after the restart within which every input acknowledged before
the kill must have its final reply."""
ORPHAN_GRACE = 3.0
"""Seconds after the SIGKILL within which every CLI child must be gone."""
QUIET = 0.5
"""Seconds, once the CLIs are gone, during which the fake must get no request."""
CEILING_PI = 24_000
CEILING_CLAUDE = 40_000
RESERVE = 2_048


def daemon_env(binaries: dict[str, str]) -> dict[str, str]:
    return {
        "CONDENSATE_MODEL_WINDOWS": json.dumps(dict(MODELS.values())),
        "CONDENSATE_WINDOW_CEILING_PI": str(CEILING_PI),
        "CONDENSATE_WINDOW_CEILING_CLAUDE": str(CEILING_CLAUDE),
        "CONDENSATE_OUTPUT_RESERVE": str(RESERVE),
        "CONDENSATE_CURATOR_MODEL": MODELS["curator"][0],
        "CONDENSATE_WINDOW_DEADLINE_MS": "10000",
        **binaries,
    }


def ceiling_settings(home: Path) -> dict[str, CeilingSettings]:
    """Each engine's ceilings as the soak's daemon runs it (its caps, its reserve)."""
    base = Settings(home=home, output_reserve=RESERVE)
    caps = {"window_ceiling_pi": CEILING_PI, "window_ceiling_claude": CEILING_CLAUDE}
    return {
        name: profile(
            info, base.ceilings(), base.planner(), info.settings.model_validate(caps)
        ).ceilings
        for name, info in installed().items()
    }


class Soak:
    """One soak run: the rounds, the checks after each kill, and the report."""

    def __init__(self, driver: Driver, rng: random.Random, results: checks.Checks) -> None:
        self.d = driver
        self.rng = rng
        self.checks = results
        self.boundaries: dict[str, int] = dict.fromkeys(BOUNDARIES, 0)
        self.moments_missed: dict[str, int] = dict.fromkeys(BOUNDARIES, 0)
        self.settings = ceiling_settings(driver.home)
        self.kills = 0
        self.kills_with_cli = 0
        self.clis_at_kill = 0

    async def round(self) -> None:
        """One moment set up and killed, then the daemon restarted and checked."""
        boundary = self.rng.choice(BOUNDARIES)
        await self.d.reset_fake()
        if boundary == "mid-recovery":
            # A first kill right after two steers; a second while the restarted daemon is
            # still closing cut-off turns and answering what was acknowledged.
            for thread in self.rng.sample(sorted(self.d.threads), 2):
                await self.d.steer(thread, "A steer before two kills.")
            await self._kill("after-202")
            await self.d.restart()
            await asyncio.sleep(self.rng.uniform(0.0, 1.0))
            context = await self._kill(boundary)
        else:
            hit = await self._reach(boundary)
            if not hit:
                self.moments_missed[boundary] += 1
            context = await self._kill(boundary)
        await self.d.restart()
        await self._after_restart(context)

    async def _kill(self, boundary: str) -> str:
        self.kills += 1
        self.boundaries[boundary] += 1
        context = f"kill {self.kills} ({boundary})"
        killed_at, clis = self.d.kill()
        self.kills_with_cli += bool(clis)
        self.clis_at_kill += len(clis)
        await self._after_kill(context, killed_at, clis)
        return context

    async def _reach(self, boundary: str) -> bool:
        """Set the moment up and return once it is reached (False: it was not seen in time,
        the kill happens anyway)."""
        d, rng = self.d, self.rng
        if boundary == "mid-batch":
            ack = await d.steer_batch(d.native)
            return await d.seen_tool_calls(d.native, ack.seq, lambda: rng.uniform(0.0, 0.45))
        if boundary == "mid-summary":
            return await d.summary_in_flight(d.native, lambda: rng.uniform(0.05, 0.7))
        if boundary == "after-201":
            await d.create_thread(rng.choice(("api", "api", "claude", "codex")))
            return True
        if boundary == "after-202":
            await d.steer(rng.choice(sorted(d.threads)), "A steer right before a kill.")
            return True
        if boundary == "mid-cli-turn":
            thread = rng.choice((d.claude, d.codex))
            ack = await d.steer_cli(thread)
            return await d.turn_running(thread, ack.seq, lambda: rng.uniform(0.0, 1.2))
        for thread in rng.sample(sorted(d.threads), 2):
            await d.steer(thread, "A steer at a random moment.")
        await asyncio.sleep(rng.uniform(0.0, 1.5))
        return True

    async def _after_kill(self, context: str, killed_at: float, clis: list[checks.Proc]) -> None:
        d = self.d
        await asyncio.sleep(0.5)
        mark = await d.fake_requests_since(0)
        deadline = killed_at + ORPHAN_GRACE
        left: list[checks.Proc] = []
        while True:
            left = [p for p in {*clis, *d.cli_environments()} if checks.alive(p)]
            if not left or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        self.checks.record(
            "no_orphan_child",
            [
                f"pid {p.pid} `{p.command[:120]}` ({what(p)}) alive {ORPHAN_GRACE} s after the kill"
                for p in left
            ],
            context,
        )
        await asyncio.sleep(QUIET)
        late = await d.fake_requests_since(mark)
        self.checks.record(
            "no_orphan_requests",
            [f"{late} model request(s) while no daemon ran, {QUIET} s after the CLIs' grace"]
            if late
            else [],
            context,
        )
        await end(left)
        problems, _ = checks.replay_problems(d.database)
        for thread, found in sorted(problems.items()):
            self.checks.record("snapshot_equals_replay", found, f"{context}, thread {thread}")

    async def _after_restart(self, context: str) -> None:
        d = self.d
        for thread in sorted(d.threads):
            before = dict(d.seen[thread])
            events = await d.full_log(thread)
            where = f"{context}, thread {thread} ({d.threads[thread]})"
            kept = checks.kept_problems(before, events) + d.input_problems(thread, events)
            self.checks.record("events_kept", kept, where)
            self.checks.record("seq_contiguous", checks.seq_problems(events), where)
            self.checks.record("one_window_per_cut", checks.window_problems(events), where)
            live = await d.inspect(thread)
            window = MODELS[d.threads[thread]][1]
            found = (
                ["the restarted daemon does not know the thread"]
                if live is None
                else checks.live_problems(
                    d.database, live, window, self.settings[d.threads[thread]]
                )
            )
            self.checks.record("live_view_equals_replay", found, where)
        # Every input acknowledged before the kill must be answered before the next kill: a
        # turn killed again and again before its CLI starts would otherwise never finish.
        await self.settle_acks(wait=True)

    async def settle_acks(self, *, wait: bool) -> None:
        """Score every acknowledged input that has its final reply or ran out of time; with
        ``wait``, keep reading until none is left open."""
        d = self.d
        while d.acks:
            open_acks: list[Ack] = []
            for ack in d.acks:
                events = list(d.seen[ack.thread].values())
                if checks.answered(events, ack.seq):
                    self.checks.record("inputs_answered", [], ack.describe())
                elif d.uptime() - ack.uptime > ANSWER_WITHIN:
                    seen = [f"{e['seq']}:{e['kind']}" for e in events if e["seq"] >= ack.seq]
                    problem = f"no final reply within {ANSWER_WITHIN} s up; after it: {seen[-8:]}"
                    self.checks.record("inputs_answered", [problem], ack.describe())
                else:
                    open_acks.append(ack)
            d.acks = open_acks
            if not wait or not open_acks:
                return
            await asyncio.gather(*(d.read_new(t, wait=1) for t in {a.thread for a in open_acks}))


def what(proc: checks.Proc) -> str:
    return "a CLI" if checks.is_cli(proc.command) else "started by a CLI"


async def end(procs: list[checks.Proc]) -> None:
    """End what the daemon this soak started left behind: SIGTERM, and SIGKILL after two
    seconds for the CLIs alone. A shell is left to its trap: a SIGKILLed ``pyenv rehash``
    leaves its lock behind, and every later login shell then waits 60 s for it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for proc in procs:
            if checks.alive(proc) and (sig == signal.SIGTERM or checks.is_cli(proc.command)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, sig)
        for _ in range(20):
            if not any(checks.alive(p) for p in procs):
                return
            await asyncio.sleep(0.1)


async def soak(kills: int, seed: int, work: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    results = checks.Checks()
    started = time.monotonic()
    async with Driver.running(work, daemon_env) as driver:
        run = Soak(driver, rng, results)
        error: str | None = None
        try:
            await driver.setup()
            while run.kills < kills:
                await run.round()
            await run.settle_acks(wait=True)
        except (RuntimeError, OSError, aiohttp.ClientError, AssertionError) as exc:
            # A daemon that dies on its own or will not start again ends the soak, reported.
            error = f"after {run.kills} kills: {type(exc).__name__}: {exc}"
        threads = dict(driver.threads)
        snapshots = checks.replay_problems(driver.database)[1]
        evidence = checks.evidence(driver.database)
        stale_locks = driver.stale_pyenv_locks
    return {
        "kills": run.kills,
        "boundaries": run.boundaries,
        "moments_missed": run.moments_missed,
        "threads": {
            e: sum(1 for v in threads.values() if v == e) for e in ("api", "claude", "codex")
        },
        "threads_with_snapshot": snapshots,
        "kills_with_cli_running": run.kills_with_cli,
        "cli_processes_at_kills": run.clis_at_kill,
        "evidence": evidence,
        "stale_pyenv_locks_cleared": stale_locks,
        "checks": results.to_json(CHECKS),
        "error": error,
        "ok": results.ok() and error is None,
        "wall_s": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it")
    args = parser.parse_args(argv)
    if args.kills < 1:
        parser.error("--kills must be at least 1")
    command = shlex.join(["python", *sys.argv])
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = asyncio.run(soak(args.kills, args.seed, args.keep))
    else:
        with tempfile.TemporaryDirectory(prefix="condensate-soak-") as tmp:
            report = asyncio.run(soak(args.kills, args.seed, Path(tmp)))
    report = {"benchmark": "crash_soak", "command": command, "seed": args.seed, **report}
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0 if report["ok"] else 1


def table(report: dict[str, Any]) -> str:
    lines = [
        f"crash_soak: {report['kills']} kills in {report['wall_s']} s (seed {report['seed']})",
        "boundaries: " + ", ".join(f"{k} {v}" for k, v in report["boundaries"].items()),
        f"kills with a CLI running: {report['kills_with_cli_running']} "
        f"({report['cli_processes_at_kills']} CLI processes)",
        f"in the log: {json.dumps(report['evidence'])}",
        f"stale pyenv locks cleared: {report['stale_pyenv_locks_cleared']}",
    ]
    if report["error"]:
        lines.append(f"  ERROR {report['error'][:2000]}")
    for name, result in report["checks"].items():
        verdict = "ok" if not result["failed"] else "FAILED"
        lines.append(
            f"  {name:<24} {result['passed']:>5} passed {result['failed']:>4} failed  {verdict}"
        )
        lines += [f"      {f}" for f in result["first_failures"]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
