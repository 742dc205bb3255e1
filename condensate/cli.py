"""The ``condensate`` command. Every subcommand takes ``--json`` for scripts.

``serve`` runs the daemon; ``run``, ``threads``, ``tail``, ``compact``, ``status``,
``approvals``, ``approve`` and ``stop`` talk to it over HTTP (it is found by itself, with its
token); ``doctor`` and ``view`` read the embedded log directly and work without a daemon.
``export`` and ``archive`` keep a log (see ``cmd_export`` and ``cmd_archive``); ``ui`` prints
the status page's address.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
import webbrowser
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar, get_args

import aiohttp
import anyio

from condensate import __version__, archive, engines, statedir, ui
from condensate.app import engine_checks, log_name, open_store, serve
from condensate.client import DaemonClient
from condensate.errors import CondensateError, ConfigError, TemporaryFailure
from condensate.eventlog import EventStore
from condensate.events import EVENT_TYPES, AskMode, ProbeReport, now_utc
from condensate.logs import configure_logging
from condensate.meter import ModelWindow, measure
from condensate.planner import Cut, HoldBack, Stop, plan
from condensate.probes import summary_line
from condensate.providers import make_client
from condensate.render import render_window
from condensate.settings import Settings, load_settings
from condensate.sqlite_store import SqliteStore
from condensate.tokens import counter_for
from condensate.tuning import TuningError, tuned


def _emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    sys.stdout.write((json.dumps(data, default=str) if args.json else text) + "\n")


T = TypeVar("T")


def _read(
    settings: Settings, args: argparse.Namespace, work: Callable[[EventStore], Awaitable[T]]
) -> T:
    """``work`` on the log: the SQLite file ``--db`` names, else the settings' log (the
    state directory's file, or CONDENSATE_DATABASE_URL)."""

    async def run() -> T:
        if args.db:
            store: EventStore = SqliteStore.open(Path(args.db))
        else:
            if not settings.database_url:
                statedir.prepare(settings.home)
            store = await open_store(settings)
        try:
            return await work(store)
        finally:
            await store.close()

    return anyio.run(run)


def _where(settings: Settings, args: argparse.Namespace) -> str:
    return str(args.db) if args.db else log_name(settings)


def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    threads = _read(settings, args, lambda store: store.thread_ids())
    counter = counter_for("")
    data = {
        "version": __version__,
        "home": str(settings.home),
        "db": _where(settings, args),
        "threads": len(threads),
        "tokenizer": counter.name,
        "event_kinds": len(EVENT_TYPES),
        **engine_checks(),
    }
    declared = {name: engines.describe(info) for name, info in sorted(engines.installed().items())}
    text = "\n".join(
        [
            *(f"{k}: {v}" for k, v in data.items()),
            *(f"engine {k}: {v}" for k, v in declared.items()),
        ]
    )
    data["engines"] = declared
    _emit(args, data, text)
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    if args.host:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    # uvloop: its transports take a tenth of a millisecond or so off each gateway request.
    anyio.run(serve, settings.model_copy(update=overrides), backend_options={"use_uvloop": True})
    return 0


def _usage_bar(used: int, line: int, width: int = 30) -> str:
    share = used / line if line else 1.0
    filled = min(width, round(share * width))
    return f"[{'#' * filled}{'.' * (width - filled)}] {share:4.0%} {used:>8,}/{line:,}"


def cmd_threads(settings: Settings, args: argparse.Namespace) -> int:
    data = DaemonClient.find(settings).call("GET", "/threads")
    rows = [
        f"{t['id']}  {t['engine']:<6} {t['status']:<8} {t['model']:<32} {t['events']:>6} events"
        for t in data["threads"]
    ]
    _emit(args, data, "\n".join(rows) or "no threads")
    return 0


def _line_reason(thread: dict[str, Any]) -> str:
    """Why a line stands above the working ceiling (a head's is the window less the
    reserves), and why the last request went on past it, if one did."""
    usage = thread["usage"]
    why = ""
    if thread["head"] and usage["line"] > usage["ceiling"]:
        why += f"  head: line is the window ({usage['window']:,}) less reserves"
    if thread.get("overLine"):
        why += f"  over the line: {thread['overLine']}"
    return why


def _cost(costs: dict[str, Any]) -> str:
    """The thread's cost at list price, or which model has no price."""
    if costs["usd"] is not None:
        return f"${costs['usd']:.4f} ({costs['calls']} calls)"
    return f"cost unknown: no price for {', '.join(costs['unpriced'])}"


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    data = DaemonClient.find(settings).call("GET", "/threads")
    rows = []
    for t in data["threads"]:
        usage = t["usage"]
        ask = "  ask pending" if t["pendingAsk"] else ""
        why = _line_reason(t)
        bar = _usage_bar(usage["used"], usage["line"])
        rows.append(f"{t['id']}  {bar}  {_cost(t['costs'])}{why}{ask}")
    _emit(args, data, "\n".join(rows) or "no threads")
    return 0


def _event_line(event: dict[str, Any]) -> str:
    kind = event["kind"]
    detail = ""
    match kind:
        case "message.user":
            detail = event["text"]
        case "message.assistant":
            calls = ", ".join(c["name"] for c in event.get("tool_calls", []))
            detail = (event.get("text") or "") + (f" [calls: {calls}]" if calls else "")
        case "tool.result":
            status = "error" if event.get("is_error") else "ok"
            detail = f"{event['tool']}({event.get('argument', '')}) {status}"
        case "window":
            detail = f"{event['window_kind']} freed~{event['trigger']['freed']}"
            if event.get("probes"):
                # What the probes found is never cut: a summary that failed must be seen.
                probes = summary_line(ProbeReport.model_validate(event["probes"]))
                return f"{event['seq']:>6} {kind:<20} {detail} by {event['author']}; {probes}"
        case "system.line":
            detail = event["text"]
        case "turn.ended":
            detail = f"{event['outcome']} {event.get('reason', '')}"
    return f"{event['seq']:>6} {kind:<20} {detail[:100]}"


def _follow(
    client: DaemonClient, thread: str, after: int, args: argparse.Namespace, until_turn_ends: bool
) -> int:
    while True:
        page = client.call("GET", f"/threads/{thread}/tail?after={after}&limit=1000&wait=25")
        for event in page["events"]:
            sys.stdout.write((json.dumps(event) if args.json else _event_line(event)) + "\n")
            sys.stdout.flush()
            if until_turn_ends and event["kind"] == "turn.ended":
                return 0
        after = page["nextAfter"]


def cmd_tail(settings: Settings, args: argparse.Namespace) -> int:
    client = DaemonClient.find(settings)
    if args.follow:
        return _follow(client, args.thread, args.after, args, until_turn_ends=False)
    history = "&history=1" if args.history else ""
    data = client.call(
        "GET", f"/threads/{args.thread}/tail?after={args.after}&limit={args.limit}{history}"
    )
    _emit(args, data, "\n".join(_event_line(e) for e in data["events"]) or "no events")
    return 0


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    client = DaemonClient.find(settings)
    body = {
        **({"engine": args.engine} if args.engine else {}),
        "model": args.model,
        "cwd": str(Path(args.cwd).resolve()),
        "brief": args.brief,
        "persona": args.persona,
        "head": args.head,
    }
    thread = client.call("POST", "/threads", body)
    if args.detach:
        _emit(args, thread, thread["id"])
        return 0
    sys.stderr.write(f"thread {thread['id']}\n")
    return _follow(client, thread["id"], 0, args, until_turn_ends=True)


def _dollars(usd: float | None) -> str:
    return "price unknown" if usd is None else f"${usd:,.4f}"


def _tier_cost(cost: dict[str, Any]) -> str:
    """What a tier's cut costs: the cached prefix written again, what each call saves, and
    when it has paid for itself."""
    text = (
        f"rewrites {cost['rewrittenTokens']:,} tokens of a cached prefix of "
        f"{cost['invalidatedTokens']:,} ({_dollars(cost['rewriteUsd'])}), saves "
        f"{_dollars(cost['savedPerCallUsd'])} a call"
    )
    if cost["breakEvenCalls"] is not None:
        text += f", pays off after {cost['breakEvenCalls']:,} calls"
    curator = cost.get("curator")
    if curator is not None:
        text += (
            f"; curator {curator['model']}: ~{curator['inputTokens']:,} tokens in, at most "
            f"{curator['outputTokens']:,} out ({_dollars(curator['usd'])})"
        )
    return text


def _compaction_lines(data: dict[str, Any]) -> list[str]:
    """``GET /threads/:id/compact`` as lines: the ask, the request, the usage, each tier."""
    ask = data["ask"]
    requested = data["requested"]
    preview = data["preview"]
    micro, collapse, summary = preview["microcompact"], preview["collapse"], preview["summary"]
    lines = [
        f"pending ask: {ask['ask_id']} (deadline {ask['deadline']})" if ask else "no ask",
        f"requested: {requested['mode']} by the {requested['by']} (seq {requested['seq']})"
        if requested
        else "nothing requested",
        f"usage: {data['usage']['used']:,} of line {data['usage']['line']:,}",
        f"microcompact would free {micro['freed']:,} tokens ({len(micro['receipts'])} receipts); "
        + _tier_cost(micro["cost"]),
        f"collapse would free {collapse['freed']:,} tokens; " + _tier_cost(collapse["cost"]),
    ]
    if summary["possible"]:
        removed = ", ".join(f"{k} {v:,}" for k, v in sorted(summary["removedByKind"].items()))
        kept = (
            "keep only the brief and pins"
            if summary["keepFrom"] is None
            else f"keep from seq {summary['keepFrom']}"
        )
        lines.append(
            f"summary would {kept}, removing {removed or 'nothing'} tokens, and free "
            f"{summary['freed']:,}; " + _tier_cost(summary["cost"])
        )
    else:
        lines.append("summary: not possible now (nothing before the kept range to summarize)")
    return lines


def cmd_compact(settings: Settings, args: argparse.Namespace) -> int:
    client = DaemonClient.find(settings)
    path = f"/threads/{args.thread}/compact"
    if args.answer is None:
        data = client.call("GET", path)
        _emit(args, data, "\n".join(_compaction_lines(data)))
        return 0
    body: dict[str, Any] = {"mode": args.answer, "reason": args.reason}
    if args.summary is not None:
        body["summary"] = args.summary
    if args.keep_from is not None:
        body["keepFrom"] = args.keep_from
    data = client.call("POST", path, body)
    _emit(args, data, "queued" if data["queued"] else "answered")
    return 0


def cmd_approvals(settings: Settings, args: argparse.Namespace) -> int:
    """The tool calls a thread with ``permissions: "ask"`` waits on."""
    data = DaemonClient.find(settings).call("GET", f"/threads/{args.thread}/approvals")
    lines = [
        f"{a['id']}  {a['tool']}  {a['argument']}  (denied at {a['deadline']})"
        for a in data["approvals"]
    ]
    _emit(args, data, "\n".join(lines) or "nothing waits for an answer")
    return 0


def cmd_approve(settings: Settings, args: argparse.Namespace) -> int:
    """Allow (or with ``--deny`` deny) one pending tool call."""
    body = {
        "id": args.approval,
        "decision": "deny" if args.deny else "allow",
        "reason": args.reason,
    }
    data = DaemonClient.find(settings).call("POST", f"/threads/{args.thread}/approvals", body)
    done = {"allow": "allowed", "deny": "denied"}[data["decision"]]
    _emit(args, data, f"{done} {data['id']}")
    return 0


def cmd_stop(settings: Settings, args: argparse.Namespace) -> int:
    """End the thread's running turn (``POST /threads/:id/interrupt``)."""
    data = DaemonClient.find(settings).call("POST", f"/threads/{args.thread}/interrupt", {})
    _emit(args, data, f"interrupted {data['thread']}")
    return 0


def cmd_pin(settings: Settings, args: argparse.Namespace) -> int:
    """Keep a message of the thread through every tier (``POST /threads/:id/pins``)."""
    data = DaemonClient.find(settings).call(
        "POST", f"/threads/{args.thread}/pins", {"seq": args.seq}
    )
    _emit(args, data, f"pinned seq {data['pinned']}; kept: {', '.join(map(str, data['pins']))}")
    return 0


def cmd_ui(settings: Settings, args: argparse.Namespace) -> int:
    """The status page's address, its token in the fragment (never sent to the daemon);
    ``--open`` opens it in a browser."""
    client = DaemonClient.find(settings)
    client.call("GET", "/health")  # a daemon that is not up says so here, not in the browser
    url = ui.url(client.url, client.token)
    _emit(args, {"url": url}, url)
    if args.open:
        webbrowser.open(url)
    return 0


def cmd_view(settings: Settings, args: argparse.Namespace) -> int:
    directory = archive.directory_of(settings, args.db)
    projection = _read(
        settings, args, lambda store: archive.rebuilt_anywhere(store, args.thread, directory)
    )
    window = ModelWindow(args.window, resolved=args.window_resolved)
    shaped = engines.profile_of(projection.engine, settings)
    usage = measure(projection, window, shaped.ceilings)
    decision = plan(projection, usage, shaped.planner, now_utc())
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


def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    """A thread's events as JSON lines, from the live log or its archive, each with its seq
    and the event as the log stores it (``condensate replay`` reads the file); no daemon
    needed."""
    directory = archive.directory_of(settings, args.db)
    rows = _read(settings, args, lambda store: archive.thread_rows(store, args.thread, directory))
    if args.output is None:
        for line in archive.export_lines(rows):
            sys.stdout.write(line + "\n")
        return 0
    count = archive.write_export(Path(args.output), rows)
    data = {"thread": args.thread, "events": count, "file": str(args.output)}
    _emit(args, data, f"exported {count} events of thread {args.thread} to {args.output}")
    return 0


def cmd_archive(settings: Settings, args: argparse.Namespace) -> int:
    """Move a finished thread out of the live log into its archive (``condensate.archive``).
    A daemon holding the log's directory does it (``POST /threads/:id/archive``), ending the
    thread's engine; else it is done here, the directory's lock held so that no daemon starts
    meanwhile."""
    home = Path(args.db).parent if args.db else settings.home
    if not args.db:
        home.mkdir(parents=True, exist_ok=True, mode=statedir.DIR_MODE)
    try:
        lock = statedir.hold(home)
    except statedir.StateDirectoryBusy:
        client = DaemonClient.find(settings.model_copy(update={"home": home}))
        path = f"/threads/{urllib.parse.quote(args.thread, safe='')}/archive"
        data = client.call("POST", path, {})
    else:
        directory = archive.directory_of(settings, args.db)
        try:
            record = _read(
                settings, args, lambda store: archive.archive_thread(store, args.thread, directory)
            )
        finally:
            os.close(lock)
        data = archive.record_json(record, directory)
    _emit(
        args,
        data,
        f"archived thread {data['thread']}: {data['events']} events to {data['file']}",
    )
    return 0


def _log_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The commands that keep a log: exporting a thread, archiving it."""
    export = command("export", "print a thread's events as JSON lines (replay reads them)")
    export.add_argument("thread")
    export.add_argument("-o", "--output", help="write them to this file (default: stdout)")
    archived = command("archive", "move a finished thread out of the live log, into its archive")
    archived.add_argument("thread")


def _progress_bar() -> Callable[[str, int, int], None] | None:
    """A progress bar on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(policy: str, done: int, total: int) -> None:
        if done % 25 and done != total:
            return
        width = 30
        filled = round(width * done / total) if total else width
        sys.stderr.write(f"\r{policy:<15} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    from condensate import replay  # noqa: PLC0415  (the fake server loads only for a replay)

    recording = replay.load(Path(args.log), args.thread)
    shaped = engines.profile_of(recording.engine, settings)
    defaults = replay.default_prices()
    prices = replay.Prices(
        input=defaults.input if args.price_input is None else args.price_input,
        cache_read=defaults.cache_read if args.price_cache_read is None else args.price_cache_read,
        cache_write=(
            defaults.cache_write if args.price_cache_write is None else args.price_cache_write
        ),
        output=defaults.output if args.price_output is None else args.price_output,
    )
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    try:
        planner, ceilings = tuned(shaped.planner, shaped.ceilings, args.set)
    except TuningError as exc:
        raise ConfigError(str(exc)) from exc
    config = replay.ReplayConfig(
        window=args.window,
        ceilings=ceilings,
        planner=planner,
        prices=prices,
        policies=policies,
        curator=args.curator,
    )

    async def go() -> replay.Report:
        if args.curator == replay.FAKE_CURATOR:
            return await replay.replay(recording, config, progress=_progress_bar())
        providers = settings.providers()
        async with aiohttp.ClientSession() as session:
            return await replay.replay(
                recording,
                config,
                curator_client_for=lambda model: make_client(model, providers, session),
                progress=_progress_bar(),
            )

    report = anyio.run(go)
    _emit(args, report.to_json(), replay.text_report(report))
    return 0


def _operator_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The commands that answer a running thread: its approvals, and stopping its turn."""
    listed = command("approvals", "list the tool calls a thread waits to have allowed")
    listed.add_argument("thread")
    approve = command("approve", "allow (or --deny) a tool call a thread waits on")
    approve.add_argument("thread")
    approve.add_argument("approval", help="the id `condensate approvals THREAD` shows")
    approve.add_argument("--deny", action="store_true", help="refuse it instead")
    approve.add_argument("--reason", default="", help="told to the agent")
    stop = command("stop", "end a thread's running turn")
    stop.add_argument("thread")
    pin = command("pin", "keep a message of a thread through every window")
    pin.add_argument("thread")
    pin.add_argument("seq", type=int, help="the message's seq (condensate tail shows it)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="condensate", description=__doc__)
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--db", help="the log file (default: the state directory's)")
        return p

    serve_parser = command("serve", "run the daemon (what the systemd unit runs)")
    serve_parser.add_argument("--host")
    serve_parser.add_argument("--port", type=int)
    command("doctor", "create or check the state directory and the event log")
    run = command("run", "start a thread and follow its log until its turn ends")
    run.add_argument("brief")
    run.add_argument(
        "--engine",
        help=f"the engine the thread runs on (installed: {', '.join(engines.names())}; "
        "default: the daemon's default)",
    )
    run.add_argument("--model", required=True, help="e.g. anthropic:claude-sonnet-4-5")
    run.add_argument("--cwd", default=".")
    run.add_argument("--persona", default="")
    run.add_argument(
        "--head",
        action="store_true",
        help="a head thread: its line is the model's window less the reserves, not the ceiling",
    )
    run.add_argument("--detach", action="store_true", help="print the thread id and return")
    command("threads", "list the daemon's threads")
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
    _operator_commands(command)
    _log_commands(command)
    command("ui", "print the status page's address (with the token)").add_argument(
        "--open", action="store_true", help="open it in a browser too"
    )
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
        "anthropic:claude-haiku-4-5 (needs its API key)",
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
            f"--price-{name}", type=float, help="USD per million tokens (default: Sonnet 4.5)"
        )
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
    "stop": cmd_stop,
    "pin": cmd_pin,
    "view": cmd_view,
    "replay": cmd_replay,
    "export": cmd_export,
    "archive": cmd_archive,
    "ui": cmd_ui,
}


EX_TEMPFAIL = 75
EX_CONFIG = 78


def exit_status(command: str, error: CondensateError) -> int:
    """2 for a command's error, but ``serve`` tells its supervisor whether trying again can
    help: 78 (EX_CONFIG, which the systemd unit does not restart) for a setting that cannot
    work, 75 (EX_TEMPFAIL) for something that stands in the way for now (a busy port, the
    state directory another daemon holds)."""
    if command != "serve":
        return 2
    if isinstance(error, ConfigError):
        return EX_CONFIG
    if isinstance(error, TemporaryFailure):
        return EX_TEMPFAIL
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
        configure_logging(settings.log_format)
        return COMMANDS[args.command](settings, args)
    except CondensateError as exc:
        sys.stderr.write(f"condensate: {exc}\n")
        return exit_status(args.command, exc)
    except KeyboardInterrupt:
        return 130
