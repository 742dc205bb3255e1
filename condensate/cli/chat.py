"""``condensate chat``: talk to a thread.

On a terminal the session streams the reply as the model writes it (the daemon's live channel
carries ``message.delta`` items), shows each tool call as it is made and how it ended,
announces windows, asks and approvals, and keeps a status line at the bottom of the screen:
the thread's status, its usage against its line and ceiling, and its cost. Between turns it
takes a message at its prompt (``/help`` lists the commands); Ctrl-C stops a running turn,
Ctrl-D leaves. Piped, it reads one message a line from stdin, prints each turn as ``run``
does (JSON lines with ``--json``), and exits as the last turn ended (1 when it failed).

The live stream is read on a thread of its own with its own event loop, so that the prompt is
plain ``input`` (readline's line editing and history) and Ctrl-C reaches the main thread.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import aiohttp
import anyio

from condensate.cli.output import Style, compaction_lines, cost_text, turn_event
from condensate.client import DaemonClient, DaemonError
from condensate.providers.sse import SSEParser
from condensate.runtime.live import DELTA

HELP = (
    "/stop ends the running turn, /status shows the thread, /compact previews a compaction, "
    "/quit (or Ctrl-D) leaves; anything else is a message to the thread."
)


async def sse(
    session: aiohttp.ClientSession, client: DaemonClient, thread: str, after: int
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The thread's live stream from ``after``: (kind, data) per message, reconnecting after
    the last seq seen when the daemon says the reader fell behind."""
    headers = {"Authorization": f"Bearer {client.token}", "Accept": "text/event-stream"}
    while True:
        url = f"{client.url}/threads/{thread}/live?after={after}"
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        async with session.get(url, headers=headers, timeout=timeout) as response:
            if response.status != 200:
                body = await response.json(content_type=None)
                raise DaemonError(code=body.get("error", "http-error"), detail=body["detail"])
            parser = SSEParser()
            resync = False
            async for chunk in response.content.iter_any():
                for event in parser.feed(chunk):
                    if event.event == "resync":
                        resync = True  # read again from the last seq seen
                        break
                    item = json.loads(event.data) if event.data else {}
                    if isinstance(item.get("seq"), int):
                        after = item["seq"]
                    yield event.event, item
                if resync:
                    break
            if not resync:
                return


@dataclass
class Screen:
    """The terminal: text scrolls above a status line kept on the last row (a scroll
    region), redrawn when the thread changes or the window is resized. Plain output
    (no region, no colours) when ``live`` is false."""

    out: TextIO
    live: bool
    status: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    rows: int = 24
    at_line_start: bool = True

    def open(self) -> None:
        if not self.live:
            return
        self.rows = shutil.get_terminal_size().lines
        # Room for the status line: scroll everything else, start at the region's bottom.
        self.out.write(f"\n\033[1;{self.rows - 1}r\033[{self.rows - 1};1H")
        self.draw()

    def close(self) -> None:
        if self.live:
            self.out.write(f"\0337\033[{self.rows};1H\033[2K\0338\033[r")
            self.out.flush()

    def resized(self) -> None:
        if self.live:
            with self.lock:
                self.rows = shutil.get_terminal_size().lines
                self.out.write(f"\0337\033[1;{self.rows - 1}r\0338")
            self.draw()

    def draw(self, status: str | None = None) -> None:
        with self.lock:
            if status is not None:
                self.status = status
            if self.live:
                width = shutil.get_terminal_size().columns
                text = self.status[: width - 1]
                self.out.write(f"\0337\033[{self.rows};1H\033[2K\033[7m{text}\033[0m\0338")
                self.out.flush()

    def write(self, text: str) -> None:
        """Text as it comes (a reply's chunk need not end a line)."""
        with self.lock:
            self.out.write(text)
            self.out.flush()
            if text:
                self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        """A whole line, on a line of its own."""
        self.write(("" if self.at_line_start else "\n") + text + "\n")


@dataclass
class Session:
    """One chat with one thread: what the live stream says, shown on the screen."""

    client: DaemonClient
    thread: str
    screen: Screen
    style: Style
    as_json: bool = False
    turn_done: threading.Event = field(default_factory=threading.Event)
    running: bool = False
    last_outcome: str = "completed"
    last_reason: str = ""
    streamed: bool = False
    """A reply's text came in chunks: its logged message need not be printed again."""
    failure: BaseException | None = None

    def status_line(self) -> str:
        shown = self.client.call("GET", f"/threads/{self.thread}")
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
        return " · ".join(parts)

    def refresh(self) -> None:
        # The status line is a courtesy: the stream says what matters.
        with contextlib.suppress(DaemonError):
            self.screen.draw(self.status_line())

    def show(self, kind: str, item: dict[str, Any]) -> None:
        """One item of the live stream."""
        if self.as_json:
            self.screen.write(json.dumps({"kind": kind, **item}) + "\n")
        elif kind == DELTA:
            self.screen.write(str(item.get("text", "")))
            self.streamed = True
        elif kind == "message.assistant" and self.streamed:
            # Its text is on the screen already, chunk by chunk: only its calls are new.
            self.streamed = False
            shown = turn_event({**item, "text": ""}, self.style)
            if shown:
                self.screen.line(shown)
            elif not self.screen.at_line_start:
                self.screen.write("\n")
        else:
            shown = turn_event(item, self.style) if "kind" in item else None
            if shown is not None:
                self.screen.line(shown)
        if kind == "turn.started":
            self.running = True
        if kind == "turn.ended":
            self.running = False
            self.last_outcome = item.get("outcome", "completed")
            self.last_reason = item.get("reason", "")
            self.turn_done.set()
        if kind in ("model.usage", "turn.ended", "turn.started", "window", "ask.opened"):
            self.refresh()

    def read(self, after: int) -> None:
        """The live stream, read on this thread until the process ends."""

        async def go() -> None:
            async with aiohttp.ClientSession() as session:
                async for kind, item in sse(session, self.client, self.thread, after):
                    self.show(kind, item)

        try:
            anyio.run(go)
        except BaseException as exc:
            self.failure = exc
            self.turn_done.set()

    def send(self, text: str) -> None:
        self.turn_done.clear()
        self.client.call("POST", f"/threads/{self.thread}/messages", {"text": text})

    def wait_for_turn(self) -> None:
        """Until the turn ends; Ctrl-C stops it (asks the daemon to)."""
        while not self.turn_done.wait(0.2):
            pass
        if self.failure is not None:
            raise self.failure

    def stop(self) -> None:
        try:
            self.client.call("POST", f"/threads/{self.thread}/interrupt", {})
        except DaemonError as exc:
            self.screen.line(self.style(f"── {exc}", "dim"))


def _last_seq(client: DaemonClient, thread: str) -> int:
    return int(client.call("GET", f"/threads/{thread}")["events"])


def _start(client: DaemonClient, args: argparse.Namespace, brief: str) -> str:
    body = {
        **({"engine": args.engine} if args.engine else {}),
        "model": args.model,
        "cwd": str(Path(args.cwd).resolve()),
        "brief": brief,
        "permissions": args.permissions,
    }
    return str(client.call("POST", "/threads", body)["id"])


def chat(client: DaemonClient, args: argparse.Namespace) -> int:
    """The chat: interactive on a terminal, one message a line when piped."""
    interactive = sys.stdin.isatty() and sys.stdout.isatty() and not args.json
    style = Style.of(sys.stdout) if interactive else Style(on=False)
    if args.thread is None and args.model is None:
        msg = "chat needs a THREAD, or --model to start a new one with your first message."
        raise DaemonError(code="usage", detail=msg)
    screen = Screen(sys.stdout, live=interactive)
    thread = args.thread
    if thread is not None:
        client.thread(thread)  # a thread the daemon does not have fails here, named (404)
    if interactive:
        return _interactive(client, thread, args, screen, style)
    return _piped(client, thread, args, screen, style)


def _begin(session: Session, after: int) -> None:
    threading.Thread(target=session.read, args=(after,), daemon=True, name="live").start()


def _piped(
    client: DaemonClient, thread: str | None, args: argparse.Namespace, screen: Screen, style: Style
) -> int:
    session: Session | None = None
    for raw in sys.stdin:
        text = raw.rstrip("\n")
        if not text.strip():
            continue
        if session is None:
            if thread is None:
                thread = _start(client, args, text)
                session = Session(client, thread, screen, style, as_json=args.json)
                _begin(session, 0)
                session.wait_for_turn()
                continue
            session = Session(client, thread, screen, style, as_json=args.json)
            _begin(session, _last_seq(client, thread))
        session.send(text)
        session.wait_for_turn()
    if session is None:
        return 0
    if session.last_outcome != "completed":
        reason = session.last_reason or "no reason was given"
        sys.stderr.write(f"condensate: the turn {session.last_outcome}: {reason}\n")
        return 1
    return 0


def _interactive(
    client: DaemonClient, thread: str | None, args: argparse.Namespace, screen: Screen, style: Style
) -> int:
    import readline  # noqa: F401, PLC0415 - line editing and history for input()

    if thread is None:
        brief = _ask(style("brief> ", "bold"))
        if brief is None:
            return 0
        thread = _start(client, args, brief)
        after = 0
    else:
        after = _last_seq(client, thread)
    session = Session(client, thread, screen, style)
    screen.open()
    previous = signal.signal(signal.SIGWINCH, _on_resize(screen))
    try:
        screen.line(style(f"chat with {thread}: {HELP}", "dim"))
        session.refresh()
        _begin(session, after)
        if after == 0:
            _wait(session)
        while True:
            text = _ask(style("you> ", "bold"))
            if text is None or text.strip() in ("/quit", "/exit"):
                return 0
            if not text.strip():
                continue
            if text.startswith("/"):
                _command(session, text.strip())
                continue
            session.send(text)
            _wait(session)
    finally:
        signal.signal(signal.SIGWINCH, previous)
        screen.close()


def _ask(prompt: str) -> str | None:
    """A line from the prompt; None at Ctrl-D. Ctrl-C at the prompt clears the line."""
    while True:
        try:
            return input(prompt)
        except EOFError:
            return None
        except KeyboardInterrupt:
            sys.stdout.write("\n")


def _wait(session: Session) -> None:
    """Until the turn ends; the first Ctrl-C asks the daemon to stop it."""
    while True:
        try:
            session.wait_for_turn()
            return
        except KeyboardInterrupt:
            session.screen.line(session.style("── stopping the turn...", "dim"))
            session.stop()


def _command(session: Session, text: str) -> None:
    name = text.split(maxsplit=1)[0]
    match name:
        case "/stop":
            session.stop()
        case "/status":
            session.refresh()
            session.screen.line(session.status_line())
        case "/compact":
            shown = session.client.call("GET", f"/threads/{session.thread}/compact")
            for line in compaction_lines(shown):
                session.screen.line(line)
        case _:
            session.screen.line(HELP)


def _on_resize(screen: Screen) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        screen.resized()

    return handler
