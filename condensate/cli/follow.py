"""Following a turn on the command line (``run``, ``send --wait``, piped ``chat``): the
thread's live stream printed as a person follows it (JSON lines with ``--json``), a progress
line on stderr while the model works (only when stderr is a terminal, so ``--json`` and piped
output stay clean), and Ctrl-C: the first asks the daemon to stop the turn and waits for its
end, the second detaches and leaves the turn running in the daemon.

A failed turn's reason is said once: on stderr as the command ends. The turn's end line on
stdout names only its outcome, and a system line that only said the same reason moments
before the end (a provider's error, an engine's) is held back for ``HOLD_SECONDS`` so that it
can be left out.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
from anyio.abc import TaskGroup

from condensate.cli.output import Style, cost_text, turn_event, usage_bar
from condensate.client import AsyncDaemonClient, DaemonError

HOLD_SECONDS = 0.5
"""How long a system line waits for the turn's end that may repeat it."""
TICK_SECONDS = 0.1
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
EX_INTERRUPTED = 130
"""What a shell reports for a command ended by Ctrl-C (128 + SIGINT)."""


@dataclass
class Progress:
    """One line on a terminal, redrawn in place: a spinner, the time the turn has taken, and
    what Ctrl-C does now. Nothing at all when ``stream`` is None (not a terminal)."""

    stream: TextIO | None
    clock: Callable[[], float] = time.monotonic
    started: float = field(default_factory=time.monotonic)
    label: str = "Working"
    hint: str = "Ctrl-C stops the turn"
    shown: bool = False

    @classmethod
    def on_stderr(cls) -> Progress:
        return cls(sys.stderr if sys.stderr.isatty() else None)

    def text(self) -> str:
        elapsed = self.clock() - self.started
        frame = SPINNER[int(elapsed / TICK_SECONDS) % len(SPINNER)]
        return f"{frame} {self.label} ({int(elapsed)}s · {self.hint})"

    def draw(self) -> None:
        if self.stream is not None:
            self.stream.write("\r\033[K" + self.text())
            self.stream.flush()
            self.shown = True

    def clear(self) -> None:
        if self.stream is not None and self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


@dataclass
class Held:
    """Logged events passed on to ``show`` in order, except that a system line (and what
    follows it) waits up to ``HOLD_SECONDS`` for a turn's end: a system line that only says
    the reason that end gives is left out, so the reason is said once."""

    show: Callable[[dict[str, Any]], None]
    hold: bool = True
    """False (JSON lines): every event is passed on at once, as it is."""
    held: list[dict[str, Any]] = field(default_factory=list)
    held_since: float = 0.0

    def take(self, item: dict[str, Any], now: float) -> None:
        """One logged event (the live stream's items with a seq)."""
        if self.held or (item["kind"] == "system.line" and self.hold):
            if not self.held:
                self.held_since = now
            self.held.append(item)
            if item["kind"] == "turn.ended":
                self.release()
            return
        self.show(item)

    def tick(self, now: float) -> None:
        if self.held and now - self.held_since >= HOLD_SECONDS:
            self.release()

    def release(self) -> None:
        ended = self.held[-1] if self.held[-1]["kind"] == "turn.ended" else None
        reason = "" if ended is None else ended.get("reason", "")
        for item in self.held:
            if reason and item["kind"] == "system.line" and reason in item["text"]:
                continue  # the turn's end says it
            self.show(item)
        self.held = []


@dataclass
class Lines:
    """Logged events on ``out`` as ``run`` prints them: JSON lines, or lines a person reads
    (a turn's end naming only its outcome: its reason goes to stderr)."""

    out: TextIO
    as_json: bool
    style: Style
    before_write: Callable[[], None] = lambda: None

    def __call__(self, item: dict[str, Any]) -> None:
        if self.as_json:
            shown: str | None = json.dumps(item)
        elif item["kind"] == "turn.ended":
            shown = turn_event({**item, "reason": ""}, self.style)
        else:
            shown = turn_event(item, self.style)
        if shown is not None:
            self.before_write()
            self.out.write(shown + "\n")
            self.out.flush()


@dataclass
class Follow:
    """One turn followed to its end, or until the second Ctrl-C detaches."""

    client: AsyncDaemonClient
    thread: str
    echo: Held
    progress: Progress
    interrupts: int = 0
    ended: dict[str, Any] | None = None
    gone: bool = False
    """The live stream ended before the turn did (the daemon stopped)."""
    failure: DaemonError | None = None

    async def run(self, after: int) -> dict[str, Any] | None:
        """The turn's ``turn.ended`` event, or None when detached."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](1_024)
        with receive:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._read, after, send)
                tasks.start_soon(self._on_sigint, tasks)
                while self.ended is None and self.interrupts < 2 and not self.gone:
                    with anyio.move_on_after(TICK_SECONDS):
                        async for item in receive:
                            if self._take(item):
                                break
                        else:
                            self.gone = True
                    self.echo.tick(time.monotonic())
                    self.progress.draw()
                self.progress.clear()
                tasks.cancel_scope.cancel()
        if self.failure is not None:
            raise self.failure
        if self.ended is None and self.interrupts < 2:
            raise DaemonError(code="stream-ended", detail="The daemon ended the live stream.")
        return self.ended

    def _take(self, item: dict[str, Any]) -> bool:
        """Print a logged event; True once the turn ended."""
        if "seq" not in item:
            return False  # ephemeral: a reply's chunks, a status
        self.echo.take(item, time.monotonic())
        if item["kind"] == "turn.ended":
            self.ended = item
            return True
        return False

    async def _read(self, after: int, send: anyio.abc.ObjectSendStream[dict[str, Any]]) -> None:
        async with send:
            try:
                async for kind, item in self.client.live(self.thread, after):
                    await send.send({"kind": kind, **item})
            except DaemonError as exc:
                self.failure = exc  # raised by ``run``, not out of the task group

    async def _on_sigint(self, tasks: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                self.interrupts += 1
                if self.interrupts >= 2:
                    return
                self.progress.label = "Stopping the turn"
                self.progress.hint = "Ctrl-C again detaches"
                tasks.start_soon(self._interrupt)

    async def _interrupt(self) -> None:
        try:
            await self.client.interrupt(self.thread)
        except DaemonError as exc:
            if exc.code != "not-running":  # it ended meanwhile: its end is on its way
                self.progress.clear()
                sys.stderr.write(f"condensate: {exc}\n")


async def follow_turn(client: AsyncDaemonClient, thread: str, after: int, as_json: bool) -> int:
    """Print the thread's events as a person follows a turn until a turn ends after
    ``after``: 0 when it completed, else 1 with its whole reason on stderr (130 when Ctrl-C
    stopped it); then, as text, its usage and cost on one line. A second Ctrl-C detaches
    (130)."""
    async with client:
        return await one_turn(client, thread, after, as_json, usage=not as_json)


async def one_turn(
    client: AsyncDaemonClient, thread: str, after: int, as_json: bool, *, usage: bool
) -> int:
    """``follow_turn`` on an open client; ``usage``: end with the usage line."""
    style = Style.of(sys.stdout)
    progress = Progress.on_stderr()
    echo = Held(Lines(sys.stdout, as_json, style, progress.clear), hold=not as_json)
    follow = Follow(client, thread, echo, progress)
    ended = await follow.run(after)
    if ended is None:
        sys.stderr.write(detached(thread))
        return EX_INTERRUPTED
    if usage:
        shown = await client.call("GET", f"/threads/{thread}")
        used = shown["usage"]
        status = f"{usage_bar(used['used'], used['line'], 20)}  {cost_text(shown['costs'])}"
        sys.stdout.write(style(f"   {status}", "dim") + "\n")
        sys.stdout.flush()
    if ended["outcome"] == "completed":
        return 0
    say_why(ended)
    return EX_INTERRUPTED if follow.interrupts else 1


def detached(thread: str) -> str:
    """What a command that left a running turn says on stderr."""
    return (
        f"condensate: detached; the turn goes on in the daemon; follow it with "
        f"condensate tail -f {thread}\n"
    )


def say_why(ended: dict[str, Any]) -> None:
    """A turn that did not complete, and its whole reason, on stderr."""
    reason = ended.get("reason") or "no reason was given"
    sys.stderr.write(f"condensate: the turn {ended['outcome']}: {reason}\n")
