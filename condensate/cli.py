"""The ``condensate`` command. Every subcommand takes ``--json`` for scripts.

For now it reads the embedded log directly: ``doctor`` sets up and checks the state directory,
``threads`` lists threads, ``tail`` pages a thread's log, ``view`` rebuilds a thread's view and
shows what the planner would do next. The daemon's commands arrive with the daemon.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from condensate import __version__
from condensate.errors import CondensateError
from condensate.events import EVENT_TYPES, now_utc
from condensate.logs import configure_logging
from condensate.meter import ModelWindow, measure
from condensate.planner import Cut, HoldBack, Stop, plan
from condensate.rebuild import rebuild
from condensate.render import render_window
from condensate.settings import Settings, load_settings
from condensate.store import EventLog
from condensate.tokens import counter_for


def _emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    sys.stdout.write((json.dumps(data, default=str) if args.json else text) + "\n")


def _open(settings: Settings, args: argparse.Namespace) -> EventLog:
    path = Path(args.db) if args.db else settings.db_path
    return EventLog.open(path)


def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    with _open(settings, args) as log:
        counter = counter_for("")
        data = {
            "version": __version__,
            "home": str(settings.home),
            "db": str(log.path),
            "threads": len(log.thread_ids()),
            "tokenizer": counter.name,
            "event_kinds": len(EVENT_TYPES),
        }
    text = "\n".join(f"{k}: {v}" for k, v in data.items())
    _emit(args, data, text)
    return 0


def cmd_threads(settings: Settings, args: argparse.Namespace) -> int:
    with _open(settings, args) as log:
        ids = log.thread_ids()
        rows = [{"thread": t, "events": log.last_seq(t)} for t in ids]
    text = "\n".join(f"{r['thread']}\t{r['events']} events" for r in rows) or "no threads"
    _emit(args, {"threads": rows}, text)
    return 0


def cmd_tail(settings: Settings, args: argparse.Namespace) -> int:
    with _open(settings, args) as log:
        page = log.tail(args.thread, after=args.after, limit=args.limit, history=args.history)
    events = [
        {"seq": s.seq, "tokens": s.tokens, **s.event.model_dump(mode="json")} for s in page.events
    ]
    lines = [f"{e['seq']:>6} {e['kind']:<20} {e['tokens']:>7} tok" for e in events]
    data = {"events": events, "nextAfter": page.next_after, "hasMore": page.has_more}
    _emit(args, data, "\n".join(lines) or "no events")
    return 0


def cmd_view(settings: Settings, args: argparse.Namespace) -> int:
    with _open(settings, args) as log:
        projection = rebuild(log, args.thread)
    window = ModelWindow(args.window, resolved=args.window_resolved)
    usage = measure(projection, window, settings.ceilings())
    decision = plan(projection, usage, settings.planner(), now_utc())
    summary: dict[str, Any] = {"decision": type(decision).__name__}
    if isinstance(decision, Cut):
        summary |= {"kind": decision.kind, "freed": decision.freed, "reason": decision.reason}
    elif isinstance(decision, HoldBack | Stop):
        summary |= {"reason": getattr(decision, "detail", getattr(decision, "reason", ""))}
    data = {"usage": asdict(usage), "next": summary, "entries": len(projection.entries)}
    text = (
        f"used {usage.used} of line {usage.line} (ceiling {usage.ceiling}, window "
        f"{usage.window}, {usage.fraction:.0%})\nnext: {json.dumps(summary)}"
    )
    if args.render:
        text += "\n\n" + render_window(projection)
        data["rendered"] = render_window(projection)
    _emit(args, data, text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="condensate", description=__doc__)
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--db", help="the log file (default: the state directory's)")
        return p

    command("doctor", "create or check the state directory and the event log")
    command("threads", "list the threads in the log")
    tail = command("tail", "print a thread's events")
    tail.add_argument("thread")
    tail.add_argument("--after", type=int, default=0)
    tail.add_argument("--limit", type=int, default=200)
    tail.add_argument("--history", action="store_true", help="include events before a snapshot")
    view = command("view", "rebuild a thread's view and show the planner's next decision")
    view.add_argument("thread")
    view.add_argument("--window", type=int, default=200_000, help="the model's window")
    view.add_argument("--window-resolved", action="store_true")
    view.add_argument("--render", action="store_true", help="print the view as one message")
    return parser


COMMANDS = {"doctor": cmd_doctor, "threads": cmd_threads, "tail": cmd_tail, "view": cmd_view}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
        configure_logging(settings.log_format)
        return COMMANDS[args.command](settings, args)
    except CondensateError as exc:
        sys.stderr.write(f"condensate: {exc}\n")
        return 2
