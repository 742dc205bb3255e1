"""``condensate chat`` on a terminal: a prompt_toolkit prompt over the thread's live stream.

Everything the thread does prints above the prompt (``patch_stdout``): replies rendered as
Markdown by rich and wrapped to the terminal, a paragraph at a time as the model writes them
(the paragraph still being written shows just above the prompt), each tool call and how it
ended, windows, asks, approvals. Under the prompt a toolbar keeps the thread's status, usage
and cost; above it, while a turn runs, a progress line with the time it has taken.

The prompt is always open: a message typed during a turn goes to the daemon at once, as a
steer of that turn. While an approval waits, the prompt asks for it and takes ``y``, ``n`` or
``n REASON`` (the agent is told the reason). Esc or Ctrl-C stops a running turn (at rest
Ctrl-C clears the line); a Ctrl-C while it is being stopped detaches: the chat leaves (130)
and the turn goes on in the daemon. Ctrl-D or ``/quit`` leaves, and prompt_toolkit leaves the
terminal as it found it (no scroll region, the cursor below the last line).
"""

from __future__ import annotations

import io
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.markdown import Markdown

from condensate.cli.follow import EX_INTERRUPTED, SPINNER, TICK_SECONDS, Held, detached
from condensate.cli.output import Style, compaction_lines, cost_text, turn_event
from condensate.client import AsyncDaemonClient, DaemonError
from condensate.runtime.live import DELTA

HELP = (
    "/stop ends the running turn, /status shows the thread, /compact previews a compaction, "
    "/quit (or Ctrl-D) leaves; anything else is a message to the thread (a steer while a "
    "turn runs). Esc or Ctrl-C stops a running turn; Ctrl-C again detaches from it. An "
    "approval takes y, n, or n REASON (the agent is told why)."
)
FENCE = "```"
ANSWER = re.compile(r"(?is)(yes|y)|(no|n)(?:(?:\s*[:,]|\s)\s*(.*))?")
"""An approval's answer: ``y``, ``n``, or ``n REASON`` (``n: REASON``, ``no, REASON``)."""


def parse_answer(text: str) -> tuple[Literal["allow", "deny"], str] | None:
    """The decision ``text`` gives and the reason it gives for a denial; None when it is no
    answer."""
    match = ANSWER.fullmatch(text.strip())
    if match is None:
        return None
    if match[1]:
        return "allow", ""
    return "deny", (match[3] or "").strip()


def split_blocks(text: str) -> tuple[str, str]:
    """``text`` cut after its last finished Markdown block: (the finished blocks, the rest).
    A block ends at a blank line outside a code fence."""
    cut = 0
    fenced = False
    at = 0
    for line in text.splitlines(keepends=True):
        at += len(line)
        if line.lstrip().startswith(FENCE):
            fenced = not fenced
        elif not fenced and not line.strip() and line.endswith("\n"):
            cut = at
    return text[:cut], text[cut:]


@dataclass
class Chat:
    """One chat with one thread: the live stream shown above a prompt."""

    client: AsyncDaemonClient
    thread: str
    style: Style = field(default_factory=lambda: Style(on=True))
    running: bool = False
    stopping: bool = False
    started: float = 0.0
    status: str = ""
    partial: str = ""
    """What the model has written of the reply in progress and is not printed yet."""
    printed: str = ""
    """What is printed already of the reply in progress."""
    approvals: list[dict[str, Any]] = field(default_factory=list)
    """Approvals waiting, oldest first: the prompt asks for the first."""
    sent: list[str] = field(default_factory=list)
    """Messages typed here: shown where they were typed, not again from the stream."""
    held: Held = field(init=False)

    def __post_init__(self) -> None:
        self.held = Held(self.show)

    # -- what is printed above the prompt ---------------------------------------------------

    def write(self, text: str) -> None:
        print(text, flush=True)  # noqa: T201 - patch_stdout puts it above the prompt

    def markdown(self, text: str) -> None:
        if not text.strip():
            return
        buffer = io.StringIO()
        width = shutil.get_terminal_size().columns
        Console(file=buffer, force_terminal=True, width=width).print(Markdown(text.strip()))
        self.write(buffer.getvalue().rstrip("\n"))

    def show(self, item: dict[str, Any]) -> None:
        """One logged event."""
        match item["kind"]:
            case "message.user" if item.get("author", "human") == "human" and (
                item["text"] in self.sent
            ):
                self.sent.remove(item["text"])  # on the screen already, where it was typed
            case "message.assistant":
                text = item.get("text") or ""
                rest = text[len(self.printed) :] if text.startswith(self.printed) else text
                self.markdown(rest)
                self.partial = self.printed = ""
                calls = turn_event({**item, "text": ""}, self.style)
                if calls:
                    self.write(calls)
            case _:
                line = turn_event(item, self.style)
                if line is not None:
                    self.write(line)

    def delta(self, text: str) -> None:
        self.partial += text
        done, self.partial = split_blocks(self.partial)
        if done:
            self.markdown(done)
            self.printed += done

    # -- the live stream ------------------------------------------------------------------

    async def read(self, after: int) -> None:
        try:
            async for kind, item in self.client.live(self.thread, after):
                if kind == DELTA:
                    self.delta(str(item.get("text", "")))
                elif "seq" in item:
                    self.held.take({"kind": kind, **item}, time.monotonic())
                    await self.note(item)
                get_app().invalidate()
        except DaemonError as exc:
            self.write(self.style(f"── {exc}", "red"))
            return
        self.write(self.style("── the daemon ended the live stream", "red"))

    async def note(self, item: dict[str, Any]) -> None:
        """What an event changes in the chat's state."""
        match item["kind"]:
            case "turn.started":
                self.running, self.stopping, self.started = True, False, time.monotonic()
            case "turn.ended":
                self.running = self.stopping = False
            case "approval.requested":
                self.approvals.append(item)
            case "approval.answered":
                self.approvals = [
                    a for a in self.approvals if a["approval_id"] != item["approval_id"]
                ]
        if item["kind"] in ("model.usage", "turn.started", "turn.ended", "window", "ask.opened"):
            await self.refresh()

    async def tick(self) -> None:
        while True:
            await anyio.sleep(TICK_SECONDS)
            self.held.tick(time.monotonic())

    async def refresh(self) -> None:
        # The status line is a courtesy: the stream says what matters.
        try:
            shown = await self.client.call("GET", f"/threads/{self.thread}")
        except DaemonError:
            return
        usage = shown["usage"]
        share = usage["used"] / usage["line"] if usage["line"] else 1.0
        parts = [
            f" {self.thread}",
            shown["status"],
            f"{usage['used']:,}/{usage['line']:,} tokens ({share:.0%} of the line; "
            f"ceiling {usage['ceiling']:,})",
            cost_text(shown["costs"]),
        ]
        if shown.get("pendingAsk"):
            parts.append(f"ask {shown['pendingAsk']} pending")
        self.status = " · ".join(parts)

    # -- the prompt -------------------------------------------------------------------------

    def message(self) -> ANSI:
        """Above the input: the paragraph being written and the progress line, while a turn
        runs; then what the prompt asks for. Only the question stays once a line is taken."""
        if self.approvals:
            first = self.approvals[0]
            ask = self.style(f"allow {first['tool']} {first['argument']}? [y/n] ", "yellow", "bold")
        else:
            ask = self.style("you> ", "bold")
        if get_app().is_done or not self.running:
            return ANSI(ask)
        elapsed = time.monotonic() - self.started
        frame = SPINNER[int(elapsed / TICK_SECONDS) % len(SPINNER)]
        label = "Stopping the turn" if self.stopping else "Working"
        hint = "Ctrl-C detaches" if self.stopping else "Esc or Ctrl-C stops the turn"
        progress = self.style(f"{frame} {label} ({int(elapsed)}s · {hint})", "dim")
        above = f"{self.partial.rstrip()}\n" if self.partial.strip() else ""
        return ANSI(f"{above}{progress}\n{ask}")

    def toolbar(self) -> str:
        return self.status

    def interrupt(self, tasks: anyio.abc.TaskGroup) -> None:
        """Stop the running turn, once (a key pressed twice asks the daemon once)."""
        if self.running and not self.stopping:
            self.stopping = True
            tasks.start_soon(self.stop)

    async def stop(self) -> None:
        self.stopping = True
        try:
            # Shielded: a Ctrl-C that detaches right after must not take back the stop.
            with anyio.CancelScope(shield=True):
                await self.client.interrupt(self.thread)
        except DaemonError as exc:
            if exc.code != "not-running":
                self.write(self.style(f"── {exc}", "dim"))

    async def answer(self, text: str) -> None:
        answer = parse_answer(text)
        if answer is None:
            self.write(
                self.style("── answer y (allow), n (deny) or n REASON (deny, saying why)", "yellow")
            )
            return
        decision, reason = answer
        first = self.approvals.pop(0)
        try:
            await self.client.call(
                "POST",
                f"/threads/{self.thread}/approvals",
                {"id": first["approval_id"], "decision": decision, "reason": reason},
            )
        except DaemonError as exc:
            self.write(self.style(f"── {exc}", "red"))

    async def say(self, text: str) -> None:
        self.sent.append(text)
        if self.running:
            self.write(self.style("── sent as a steer of the running turn", "dim"))
        await self.client.call("POST", f"/threads/{self.thread}/messages", {"text": text})

    async def command(self, text: str) -> None:
        match text.split(maxsplit=1)[0]:
            case "/stop":
                await self.stop()
            case "/status":
                await self.refresh()
                self.write(self.status)
            case "/compact":
                shown = await self.client.call("GET", f"/threads/{self.thread}/compact")
                for line in compaction_lines(shown):
                    self.write(line)
            case _:
                self.write(HELP)

    def keys(self, tasks: anyio.abc.TaskGroup) -> KeyBindings:
        """Esc stops a running turn. A terminal sends Alt-x as Esc then x at once, so Esc
        counts only when no key came with it: Alt-Backspace while a turn runs edits the line
        and leaves the turn alone."""
        bindings = KeyBindings()
        alone = Condition(lambda: not get_app().key_processor.input_queue)
        stoppable = Condition(lambda: self.running and not self.stopping)

        @bindings.add("escape", filter=alone & stoppable, eager=True)
        def _(event: KeyPressEvent) -> None:
            self.interrupt(tasks)

        return bindings

    async def converse(self, prompt: PromptSession[str], tasks: anyio.abc.TaskGroup) -> int:
        """Lines from the prompt until Ctrl-D or ``/quit`` (0), or a Ctrl-C while the turn
        is being stopped (``EX_INTERRUPTED``: the turn is left to the daemon)."""
        keys = self.keys(tasks)
        while True:
            try:
                text = await prompt.prompt_async(
                    self.message,
                    bottom_toolbar=self.toolbar,
                    refresh_interval=TICK_SECONDS,
                    key_bindings=keys,
                )
            except KeyboardInterrupt:
                if self.running and self.stopping:
                    return EX_INTERRUPTED
                self.interrupt(tasks)
                continue
            except EOFError:
                return 0
            text = text.strip()
            if self.approvals and text:
                await self.answer(text)
            elif text in ("/quit", "/exit"):
                return 0
            elif text.startswith("/"):
                await self.command(text)
            elif text:
                await self.say(text)


async def interactive(
    client: AsyncDaemonClient, thread: str | None, new_thread: Callable[[str], dict[str, object]]
) -> int:
    """The chat with ``thread``, or with a new one (``new_thread``: its body, given the
    brief asked for first)."""
    prompt: PromptSession[str] = PromptSession()
    style = Style.of(sys.stdout)
    async with client:
        if thread is None:
            try:
                brief = await prompt.prompt_async(ANSI(style("brief> ", "bold")))
            except (EOFError, KeyboardInterrupt):
                return 0
            created = await client.call("POST", "/threads", new_thread(brief))
            chat = Chat(client, str(created["id"]), style, sent=[brief])
            after = 0
        else:
            chat = Chat(client, thread, style)
            after = int((await client.call("GET", f"/threads/{thread}"))["events"])
            waiting = await client.call("GET", f"/threads/{thread}/approvals")
            chat.approvals = [
                {"approval_id": a["id"], "tool": a["tool"], "argument": a["argument"]}
                for a in waiting["approvals"]
            ]
        await chat.refresh()
        chat.running = " · running" in chat.status
        chat.started = time.monotonic()
        with patch_stdout(raw=True):
            chat.write(style(f"chat with {chat.thread}: {HELP}", "dim"))
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(chat.read, after)
                tasks.start_soon(chat.tick)
                status = await chat.converse(prompt, tasks)
                tasks.cancel_scope.cancel()
    if status == EX_INTERRUPTED:
        sys.stderr.write(detached(chat.thread))
    return status
