"""The ``condensate`` command. Every subcommand takes ``--json`` for scripts.

``serve`` runs the daemon; ``run``, ``threads``, ``tail``, ``compact``, ``status``,
``approvals``, ``approve`` and ``stop`` talk to it over HTTP (it is found by itself, with its
token); ``doctor`` and ``view`` read the embedded log directly and work without a daemon.
``export`` and ``archive`` keep a log (see ``cmd_export`` and ``cmd_archive``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import get_args

from condensate import __version__
from condensate.cli import completion
from condensate.cli.local import (
    cmd_archive,
    cmd_config,
    cmd_doctor,
    cmd_export,
    cmd_replay,
    cmd_serve,
    cmd_view,
    warn_unknown,
)
from condensate.cli.remote import (
    cmd_approvals,
    cmd_approve,
    cmd_chat,
    cmd_compact,
    cmd_pin,
    cmd_run,
    cmd_send,
    cmd_status,
    cmd_stop,
    cmd_tail,
    cmd_threads,
    cmd_ui,
)
from condensate.cli.wrap import cmd_wrap, wrapped
from condensate.engine import registry as engines
from condensate.errors import CondensateError, ConfigError, TemporaryFailure
from condensate.events import AskMode
from condensate.logs import configure_logging
from condensate.settings import load_settings


def _log_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The commands that keep a log: exporting a thread, archiving it."""
    export = command("export", "print a thread's events as JSON lines (replay reads them)")
    export.add_argument("thread")
    export.add_argument("-o", "--output", help="write them to this file (default: stdout)")
    archived = command("archive", "move a finished thread out of the live log, into its archive")
    archived.add_argument("thread")


def _operator_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The commands that answer a running thread: its approvals, and stopping its turn."""
    listed = command("approvals", "list the tool calls a thread waits to have allowed")
    listed.add_argument("thread")
    approve = command("approve", "allow (or --deny) a tool call a thread waits on")
    approve.add_argument("thread")
    approve.add_argument("approval", help="the id `condensate approvals THREAD` shows")
    approve.add_argument("--deny", action="store_true", help="refuse it instead")
    approve.add_argument("--reason", default="", help="told to the agent")
    talk = command("chat", "talk to a thread: its replies stream, a status line keeps its usage")
    talk.add_argument("thread", nargs="?", help="the thread (none: start one with --model)")
    talk.add_argument("--model", help="start a new thread on this model with your first message")
    talk.add_argument("--engine")
    talk.add_argument("--cwd", default=".")
    talk.add_argument("--permissions", default="default", help=PERMISSIONS_HELP)
    send = command("send", "send a thread a message (a steer, or the start of its next turn)")
    send.add_argument("thread")
    send.add_argument("text")
    send.add_argument("--wait", action="store_true", help="follow the turn until it ends")
    send.add_argument("--pin", action="store_true", help="keep the message through every window")
    stop = command("stop", "end a thread's running turn")
    stop.add_argument("thread")
    pin = command("pin", "keep a message of a thread through every window")
    pin.add_argument("thread")
    pin.add_argument("seq", type=int, help="the message's seq (condensate tail shows it)")


def _setup_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Running the daemon and checking its settings."""
    serve_parser = command("serve", "run the daemon (what the systemd unit runs)")
    serve_parser.add_argument("--host")
    serve_parser.add_argument("--port", type=int)
    command("doctor", "create or check the state directory and the event log")
    shell = command("completion", "print a shell completion script (bash, zsh or fish)")
    shell.add_argument("shell", choices=completion.SHELLS)
    configured = command("config", "show the effective settings and where each came from")
    configured.add_argument("action", nargs="?", choices=("show", "set", "unset"), default="show")
    configured.add_argument("name", nargs="?", help="a setting, e.g. CONDENSATE_PORT")
    configured.add_argument("value", nargs="?", help="its value (for set)")


def _thread_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Starting threads and reading them."""
    run = command("run", "start a thread and follow its log until its turn ends")
    run.add_argument("brief")
    run.add_argument(
        "--engine",
        help=f"the engine the thread runs on (installed: {', '.join(engines.names())}; "
        "default: the daemon's default)",
    )
    run.add_argument("--model", required=True, help="e.g. anthropic:claude-opus-5-5")
    run.add_argument("--cwd", default=".")
    run.add_argument("--persona", default="")
    run.add_argument("--permissions", default="default", help=PERMISSIONS_HELP)
    run.add_argument(
        "--head",
        action="store_true",
        help="a head thread: its line is the model's window less the reserves, not the ceiling",
    )
    run.add_argument("--detach", action="store_true", help="print the thread id and return")
    listed = command("threads", "list the daemon's threads")
    listed.add_argument("-q", "--quiet", action="store_true", help="only their ids")
    command("status", "each thread's usage against its line, as a bar")
    tail = command("tail", "print a thread's events")
    tail.add_argument("thread")
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    tail.add_argument("--after", type=int, default=0)
    tail.add_argument("--limit", type=int, default=200)
    tail.add_argument("--history", action="store_true", help="include events before a snapshot")
    compact = command("compact", "show a thread's pending ask and a preview; answer it")
    compact.add_argument("thread")
    compact.add_argument("--answer", choices=get_args(AskMode))
    compact.add_argument("--summary")
    compact.add_argument("--keep-from", type=int)
    compact.add_argument("--reason", default="")


def _offline_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Reading a log without a daemon: a view, a replay."""
    view = command("view", "rebuild a thread's view and show the planner's next decision")
    view.add_argument("thread")
    view.add_argument("--window", type=int, default=200_000, help="the model's window")
    view.add_argument("--window-resolved", action="store_true")
    view.add_argument("--render", action="store_true", help="print the view as one message")
    replay_parser = command("replay", "replay a recorded thread through windowing policies")
    replay_parser.add_argument(
        "log", help="a Condensate log (SQLite or JSON lines), a Claude Code or Codex transcript"
    )
    replay_parser.add_argument("--thread", help="the thread, in a Condensate log with several")
    replay_parser.add_argument(
        "--curator",
        default="fake",
        help="fake (a stand-in through the fake server) or a model, e.g. "
        "anthropic:claude-haiku-5-5 (needs its API key)",
    )
    replay_parser.add_argument(
        "--policies",
        default="condensate,unmanaged,single-summary",
        help="comma-separated (default: %(default)s)",
    )
    replay_parser.add_argument("--window", type=int, help="the model's window (default: known)")
    replay_parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a tier or trigger setting for this replay, e.g. keep_pairs=4 or target_share=0.5 "
        "(repeatable)",
    )
    for name in ("input", "cache-read", "cache-write", "output"):
        replay_parser.add_argument(
            f"--price-{name}",
            type=float,
            help="USD per million tokens (default: the list price of the recording's model, "
            "else of Claude Opus 5.5)",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="condensate", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=__version__)
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name, help=help_text, description=help_text[:1].upper() + help_text[1:] + "."
        )
        # SUPPRESS: a --json given before the subcommand is not undone by its default here.
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=JSON_HELP)
        if name in READS_A_LOG:
            p.add_argument("--db", help="the log file (default: the state directory's)")
        return p

    _setup_commands(command)
    _thread_commands(command)
    _operator_commands(command)
    _log_commands(command)
    command("ui", "print the status page's address (with the token)").add_argument(
        "--open", action="store_true", help="open it in a browser too"
    )
    _offline_commands(command)
    for name in wrapped():
        wrapper = command(
            name,
            f"run your own {name} in this terminal, its context managed through the daemon's "
            "gateway (--no-manage: costs and logging only; --head: asked before a cut); its "
            "arguments pass through",
        )
        wrapper.add_argument("cli_args", nargs=argparse.REMAINDER, help=f"{name}'s own")
    return parser


COMMANDS = {
    "serve": cmd_serve,
    "doctor": cmd_doctor,
    "run": cmd_run,
    "threads": cmd_threads,
    "status": cmd_status,
    "tail": cmd_tail,
    "compact": cmd_compact,
    "approvals": cmd_approvals,
    "approve": cmd_approve,
    "chat": cmd_chat,
    "send": cmd_send,
    "stop": cmd_stop,
    "pin": cmd_pin,
    "view": cmd_view,
    "replay": cmd_replay,
    "export": cmd_export,
    "archive": cmd_archive,
    "ui": cmd_ui,
}


DESCRIPTION = (
    "Condensate manages the context of long-running coding agents. `serve` runs the daemon; "
    "`run`, `chat`, `threads`, `status`, `tail`, `compact` and the rest talk to it; `doctor`, "
    "`view` and `export` read the log and need no daemon."
)
JSON_HELP = "print JSON for scripts, before or after the command"
PERMISSIONS_HELP = (
    "what a new thread's tools may do (default, workspace, read-only, ...; each engine says "
    "which it can enforce)"
)
READS_A_LOG = frozenset({"doctor", "view", "export", "archive"})
"""The commands that read the log in place, and so take --db."""

EX_TEMPFAIL = 75


EX_CONFIG = 78
ARGUMENT_SETTINGS = frozenset({"config", "replay"})
"""The commands that take settings as arguments: a bad one is the command's error (2)."""


def exit_status(command: str, error: CondensateError) -> int:
    """78 (EX_CONFIG, which the systemd unit does not restart) for a setting in effect that
    cannot work, whatever the command (``config set`` refusing a value, or ``replay --set``
    one, is its argument's error: 2); else 2 for a command's error, but ``serve`` tells its
    supervisor whether trying again can help: 75 (EX_TEMPFAIL) for something that stands in
    the way for now (a busy port, the state directory another daemon holds)."""
    if isinstance(error, ConfigError) and command not in ARGUMENT_SETTINGS:
        return EX_CONFIG
    if command != "serve":
        return 2
    if isinstance(error, TemporaryFailure):
        return EX_TEMPFAIL
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given and given[0] in wrapped() and not {"-h", "--help"} & set(given[1:2]):
        # Everything after the CLI's name is the CLI's own (but a leading --no-manage).
        return _wrap(given[0], given[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "completion":
            sys.stdout.write(completion.script(args.shell, parser))
            return 0
        if args.command == "config":
            return cmd_config(args)
        warn_unknown()
        settings = load_settings()
        configure_logging(settings.log_format)
        return COMMANDS[args.command](settings, args)
    except CondensateError as exc:
        sys.stderr.write(f"condensate: {exc}\n")
        return exit_status(args.command, exc)
    except KeyboardInterrupt:
        return 130


def _wrap(engine: str, argv: list[str]) -> int:
    try:
        settings = load_settings()
        configure_logging(settings.log_format)
        return cmd_wrap(settings, engine, argv)
    except CondensateError as exc:
        sys.stderr.write(f"condensate: {exc}\n")
        return exit_status(engine, exc)
