"""The parent's side: starts a peer's child on its own interpreter, hands it the job and reads
its events. Standard library only, like the rest of the package's shared modules, so the
children can import the package."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.peers import PEERS_DIR, ROOT, Job, PeerRun, TurnOutcome, peer_python

STDERR_TAIL = 4_000
"""Characters of a child's stderr kept in ``PeerRun.stderr_tail``."""
LINE_LIMIT = 64 * 1024 * 1024
"""The longest event line read from a child (an answer can be long)."""


def child_environment(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """A child's environment: the machine's PATH and locale, a HOME of its own (the peers keep
    state and caches there), and no model keys, proxies or settings of the caller's."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    return {**env, "HOME": str(home), "PYTHONUNBUFFERED": "1", **extra}


@dataclass(frozen=True)
class ChildDriver:
    """A peer's ``run`` (a ``Driver``): the human turns through its child, ``python -m
    module`` on the peer's interpreter, with ``env`` added to the child's environment."""

    peer: str
    module: str
    env: Mapping[str, str] = field(default_factory=dict)

    async def __call__(
        self,
        base_url: str,
        model: str,
        workdir: Path,
        human_turns: Sequence[str],
        timeout: float,
        *,
        condenser_args: Mapping[str, Any] | None = None,
    ) -> PeerRun:
        job = Job(base_url, model, str(workdir), tuple(human_turns), dict(condenser_args or {}))
        return await run_child(self.peer, self.module, job, timeout, self.env)


async def run_child(
    peer: str,
    module: str,
    job: Job,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> PeerRun:
    """Runs ``python -m MODULE`` on the peer's interpreter for ``job``, at most ``timeout``
    seconds in all; the turns it reported before a crash or the time-out are kept."""
    started = time.monotonic()
    python = peer_python(peer)
    if python is None:
        missing = f"{PEERS_DIR / peer} is missing: run scripts/setup-peers"
        return PeerRun(peer, job.model, "", (), missing, 0.0)
    turns: list[TurnOutcome] = []
    described: list[str] = []
    error: str | None = None
    with tempfile.TemporaryDirectory(prefix=f"peer-{peer}-") as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        stderr_path = Path(scratch) / "stderr"
        with stderr_path.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                str(python),
                "-m",
                module,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=ROOT,
                env=child_environment(home, env or {}),
                start_new_session=True,
                limit=LINE_LIMIT,
            )
            try:
                async with asyncio.timeout(timeout):
                    await _talk(process, job, turns, described)
            except TimeoutError:
                error = f"timed out after {timeout:g} s"
            finally:
                await _stop(process)
        if error is None and process.returncode != 0:
            error = f"the {peer} child exited with {process.returncode}"
        elif error is None and len(turns) < len(job.human_turns) and not _failed(turns):
            error = f"the {peer} child reported {len(turns)} of {len(job.human_turns)} turns"
        tail = stderr_path.read_text(errors="replace")[-STDERR_TAIL:]
    context_management = described[0] if described else ""
    seconds = time.monotonic() - started
    return PeerRun(peer, job.model, context_management, tuple(turns), error, seconds, tail)


async def _talk(
    process: asyncio.subprocess.Process,
    job: Job,
    turns: list[TurnOutcome],
    described: list[str],
) -> None:
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(json.dumps(asdict(job)).encode() + b"\n")
    await process.stdin.drain()
    process.stdin.close()
    async for line in process.stdout:
        if not line.strip():
            continue
        event: dict[str, Any] = json.loads(line)
        if event["event"] == "started":
            described.append(str(event["context_management"]))
        elif event["event"] == "turn":
            turns.append(_turn(event))
    await process.wait()


def _turn(event: Mapping[str, Any]) -> TurnOutcome:
    return TurnOutcome(
        index=int(event["index"]),
        answer=event.get("answer"),
        error=event.get("error"),
        seconds=float(event["seconds"]),
        tool_calls=int(event["tool_calls"]),
        condensations=int(event["condensations"]),
    )


def _failed(turns: list[TurnOutcome]) -> bool:
    return any(t.error is not None for t in turns)


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Ends the child's whole session: the child if it is still there, and whatever its tools'
    shells left running (a server started in the background)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()
