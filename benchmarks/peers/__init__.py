"""Peer arms: other libraries' own agent loops, each with its default context management, run
against a model base URL (the fake model server) in a working directory, with two tools the
peer executes itself there: ``read(path)`` and ``shell(command)``.

Each peer runs in a child process on the interpreter of its own virtualenv
(``.venv-peers/NAME``, made by ``scripts/setup-peers`` from the pyproject extra ``peer-NAME``):
the peers' pins clash with the project's and with each other's, and OpenHands needs Python
3.12 or newer. The driver of a peer (``run`` in its module) starts ``python -m
benchmarks.peers.MODULE`` there (``_driver``), hands it a ``Job`` as JSON on stdin and reads
one JSON line per event on its stdout (``_runner``); the same module's ``main`` is the child's
side. The package's shared modules use the standard library only, since the children import
them too.

    run = await openhands.run(fake.url, "claude-opus-5-5", workdir, ["Fix the bug."], 300.0)
    run.turns[0].answer, run.condensations, run.errors
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = ROOT / ".venv-peers"


@dataclass(frozen=True)
class Job:
    """What a child runs: the human turns, in order, in one conversation."""

    base_url: str
    model: str
    workdir: str
    human_turns: tuple[str, ...]
    condenser_args: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments that replace the peer's own defaults for its context management (a
    small threshold for a test); empty for the defaults."""


@dataclass(frozen=True)
class TurnOutcome:
    """One human turn: the peer's final text answer, or the error that ended the turn."""

    index: int
    answer: str | None
    error: str | None
    seconds: float
    tool_calls: int
    """Calls of ``read`` and ``shell`` the peer executed during the turn."""
    condensations: int
    """Times the peer's context management changed its history during the turn."""


@dataclass(frozen=True)
class PeerRun:
    """A peer's run: the turns it finished (in order), and what went wrong."""

    peer: str
    model: str
    context_management: str
    """The peer's context management as configured, in the peer's own terms."""
    turns: tuple[TurnOutcome, ...]
    error: str | None
    """What stopped the run as a whole: a failed start, a crash, a time-out; ``None`` when the
    child ran every turn (a turn's own failure is in that turn)."""
    seconds: float
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None and all(t.error is None for t in self.turns)

    @property
    def errors(self) -> list[str]:
        found = [f"turn {t.index}: {t.error}" for t in self.turns if t.error is not None]
        return [*found, self.error] if self.error is not None else found

    @property
    def condensations(self) -> int:
        return sum(t.condensations for t in self.turns)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "condensations": self.condensations}


class Driver(Protocol):
    """A peer's ``run``: the human turns in order in one conversation through the peer's own
    loop, against ``base_url`` (the fake's URL, without ``/v1``), within ``timeout`` seconds in
    all; ``condenser_args`` replace the peer's defaults for its context management."""

    async def __call__(
        self,
        base_url: str,
        model: str,
        workdir: Path,
        human_turns: Sequence[str],
        timeout: float,
        *,
        condenser_args: Mapping[str, Any] | None = None,
    ) -> PeerRun: ...


def peer_python(peer: str) -> Path | None:
    """The interpreter of the peer's virtualenv, when ``scripts/setup-peers`` has made it."""
    python = PEERS_DIR / peer / "bin" / "python"
    return python if python.exists() else None
