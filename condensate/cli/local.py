"""The commands that work without a daemon: ``serve`` runs it; ``doctor``, ``config``, ``view``,
``export``, ``archive`` and ``replay`` read the settings or the log directly."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import anyio
from pydantic_settings import BaseSettings

from condensate import __version__, config, statedir
from condensate.app import engine_checks, log_name, open_store, serve
from condensate.cli.output import (
    emit,
    progress_bar,
)
from condensate.client import DaemonClient
from condensate.core.meter import ModelWindow, measure
from condensate.core.planner import Cut, HoldBack, Stop, plan
from condensate.core.render import render_window
from condensate.core.tokens import counter_for
from condensate.core.tuning import TuningError, tuned
from condensate.engine import registry as engines
from condensate.errors import ConfigError, Refused
from condensate.eventlog import EventStore, archive
from condensate.eventlog.sqlite import SqliteStore
from condensate.events import EVENT_TYPES, now_utc
from condensate.providers import make_client
from condensate.settings import Settings, load_settings

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
            # A running daemon tightened its directory at its start, and what its CLIs write
            # there while they run is theirs: a read-only command leaves it alone.
            if not settings.database_url and statedir.holder(settings.home) is None:
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
    emit(args, data, text)
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


def cmd_view(settings: Settings, args: argparse.Namespace) -> int:
    directory = archive.directory_of(settings, args.db)
    projection = _read(
        settings, args, lambda store: archive.rebuilt_anywhere(store, args.thread, directory)
    )
    if projection.last_seq == 0:
        detail = (
            f"There is no thread {args.thread!r} in the log or its archives "
            "(condensate threads lists them)."
        )
        raise Refused(code="unknown-thread", detail=detail)
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
    emit(args, data, text)
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
    emit(args, data, f"exported {count} events of thread {args.thread} to {args.output}")
    return 0


def cmd_archive(settings: Settings, args: argparse.Namespace) -> int:
    """Move a finished thread out of the live log into its archive (``eventlog.archive``).
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
    emit(
        args,
        data,
        f"archived thread {data['thread']}: {data['events']} events to {data['file']}",
    )
    return 0


def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    from condensate import replay  # noqa: PLC0415  (the fake server loads only for a replay)

    recording = replay.load(Path(args.log), args.thread)
    shaped = engines.profile_of(recording.engine, settings)
    given = {
        "input": args.price_input,
        "cache_read": args.price_cache_read,
        "cache_write": args.price_cache_write,
        "output": args.price_output,
    }
    # A copy, not a new price: the defaults' one-hour writes and long-context tier stay.
    prices = replay.default_prices(recording.model, settings.prices).model_copy(
        update={name: value for name, value in given.items() if value is not None}
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
            return await replay.replay(recording, config, progress=progress_bar())
        providers = settings.providers()
        async with aiohttp.ClientSession() as session:
            return await replay.replay(
                recording,
                config,
                curator_client_for=lambda model: make_client(model, providers, session),
                progress=progress_bar(),
            )

    report = anyio.run(go)
    emit(args, report.to_json(), replay.text_report(report))
    return 0


def _setting_rows(kind: type[BaseSettings], values: BaseSettings | None) -> list[dict[str, str]]:
    """Each setting of ``kind``: its variable, its value as printed, where it came from."""
    path, rows = config.config_path(), []
    lines = config.read_file(path)
    for field in kind.model_fields:
        names = config.env_names(kind, field)
        if not names[0].startswith(config.PREFIX):
            continue  # systemd's NOTIFY_SOCKET: read, but not Condensate's to set
        value = getattr(values, field) if values is not None else "(invalid: see above)"
        rows.append(
            {
                "name": names[0],
                "value": config.shown(names[0], value),
                "source": config.source(names, os.environ, path, lines),
            }
        )
    return rows


def cmd_config(args: argparse.Namespace) -> int:
    """``condensate config``: the effective settings and where each came from;
    ``config set NAME VALUE`` / ``config unset NAME`` edit the configuration file."""
    path = config.config_path()
    known = engines.known_variables(engines.installed())
    if args.action in ("set", "unset"):
        name = args.name
        if name not in known:
            hint = config.unknown([name], known) if name.startswith(config.PREFIX) else []
            msg = (
                hint[0] if hint else f"{name} is not a Condensate setting (see condensate config)."
            )
            raise ConfigError(msg)
        before = path.read_text(encoding="utf-8") if path.is_file() else None
        config.write(path, name, args.value if args.action == "set" else None)
        shadowed = os.environ.pop(name, None)  # the file's value is checked, not the env's
        try:
            _all_settings()
        except ConfigError:
            if before is None:
                path.unlink()
            else:
                path.write_text(before, encoding="utf-8")
            raise
        finally:
            if shadowed is not None:
                os.environ[name] = shadowed
        done = f"{name} {'set' if args.action == 'set' else 'removed'} in {path}"
        if shadowed is not None:
            done += (
                f"; the environment sets {name} too, and it wins: unset it there for the "
                "file's value to count"
            )
        data = {"file": str(path), "name": name, "action": args.action}
        emit(args, {**data, "overriddenByEnvironment": shadowed is not None}, done)
        return 0
    problems: list[str] = []
    rows: list[dict[str, str]] = []
    for kind in _setting_kinds():
        try:
            values: BaseSettings | None = config.read_settings(kind)
        except ConfigError as exc:
            problems.append(str(exc))
            values = None
        rows += [
            r for r in _setting_rows(kind, values) if r["name"] not in {x["name"] for x in rows}
        ]
    warnings = problems + engines.setting_warnings(_all_settings_or_none(), engines.installed())
    data = {"file": str(path), "exists": path.is_file(), "settings": rows, "warnings": warnings}
    width = max(len(r["name"]) for r in rows)
    lines = [f"configuration file: {path}{'' if path.is_file() else ' (none yet)'}"]
    lines += [f"{r['name']:<{width}}  {r['value'] or '(empty)'}  [{r['source']}]" for r in rows]
    lines += [f"warning: {w}" for w in warnings]
    emit(args, data, "\n".join(lines))
    return 0


def _setting_kinds() -> list[type[BaseSettings]]:
    return [Settings, *(info.settings for info in engines.installed().values())]


def _all_settings() -> list[BaseSettings]:
    """Every settings model read, so that a bad value anywhere is one sentence."""
    return [config.read_settings(kind) for kind in _setting_kinds()]


def _all_settings_or_none() -> Settings | None:
    try:
        return load_settings()
    except ConfigError:
        return None


def warn_unknown() -> None:
    """A misspelt CONDENSATE_* variable, in the environment or the file, is said at once."""
    for text in engines.unknown_variables():
        sys.stderr.write(f"condensate: warning: {text}\n")
